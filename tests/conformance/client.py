"""The client program the official MCP conformance suite drives.

Usage (by the harness): python tests/conformance/client.py <server-url>
with MCP_CONFORMANCE_SCENARIO, MCP_CONFORMANCE_PROTOCOL_VERSION and, for
some scenarios, MCP_CONFORMANCE_CONTEXT (JSON) in the environment.

It uses only mcp_sync's public API: each scenario is a few calls, and
everything the suite checks (headers, _meta, version retries, resumption,
x-mcp-header rules) is the library's own behaviour.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import Any, Callable

import mcp_sync

log = logging.getLogger("conformance-client")


def list_and_call_all(client: mcp_sync.Client, context: dict[str, Any]) -> None:
    for tool in client.list_tools():
        log.info("calling %s", tool.name)
        client.call_tool(tool)


def tools_call(client: mcp_sync.Client, context: dict[str, Any]) -> None:
    names = [tool.name for tool in client.list_tools()]
    if "add_numbers" in names:
        print(client.call_tool("add_numbers", {"a": 5, "b": 3}).text)


def sse_retry(client: mcp_sync.Client, context: dict[str, Any]) -> None:
    client.list_tools()
    print(client.call_tool("test_reconnection", {}).text)


def standard_headers(client: mcp_sync.Client, context: dict[str, Any]) -> None:
    list_and_call_all(client, context)
    for resource in client.list_resources():
        client.read_resource(resource.uri)
    for prompt in client.list_prompts():
        client.get_prompt(prompt.name)


def custom_headers(client: mcp_sync.Client, context: dict[str, Any]) -> None:
    client.list_tools()
    for call in context.get("toolCalls", []):
        client.call_tool(call["name"], call.get("arguments") or {})


def invalid_tool_headers(client: mcp_sync.Client, context: dict[str, Any]) -> None:
    names = [tool.name for tool in client.list_tools()]
    log.info("tools kept: %s", names)
    for name in names:
        client.call_tool(name, {})


def schema_preservation(client: mcp_sync.Client, context: dict[str, Any]) -> None:
    tools = {tool.name: tool for tool in client.list_tools()}
    source = tools.get("json_schema_2020_12_tool")
    if source is not None and "json_schema_echo" in tools:
        client.call_tool("json_schema_echo", {"schema": source.raw["inputSchema"]})


def list_only(client: mcp_sync.Client, context: dict[str, Any]) -> None:
    client.list_tools()


def skills_listed(client: mcp_sync.Client, context: dict[str, Any]) -> None:
    # A host builds its registry from the listing alone: nothing is read.
    for skill in client.skills.list():
        log.info("skill %s: %s (%d files)", skill.uri, skill.description, len(skill.files or ()))


def skills_loaded(client: mcp_sync.Client, context: dict[str, Any]) -> None:
    # Load each skill (SKILL.md first), then its other files; a file that
    # fails verification stops the skill: nothing more of it is read.
    for skill in client.skills.list():
        try:
            client.skills.read(skill.uri)
            for file in skill.files or ():
                if file.uri != skill.uri:
                    client.skills.read(skill.uri, file.path)
        except mcp_sync.SkillVerificationError as exc:
            log.error("skill %s refused (%s): %s", skill.uri, exc.check, exc)


SCENARIOS: dict[str, Callable[[mcp_sync.Client, dict[str, Any]], None]] = {
    "initialize": list_only,
    "tools_call": tools_call,
    "sse-retry": sse_retry,
    "request-metadata": list_and_call_all,
    "http-standard-headers": standard_headers,
    "http-custom-headers": custom_headers,
    "http-invalid-tool-headers": invalid_tool_headers,
    "json-schema-ref-no-deref": list_only,
    "json-schema-2020-12-preservation": schema_preservation,
    "sep-2322-client-request-state": list_and_call_all,
    "sep-2640-client-no-prefetch": skills_listed,
    "sep-2640-client-verify-digest": skills_loaded,
    "sep-2640-client-verify-size": skills_loaded,
    "sep-2640-client-verify-frontmatter": skills_loaded,
    "elicitation-sep1034-client-defaults": list_and_call_all,
}


#: The client ID metadata document URL the suite's authorization servers expect.
CIMD_URL = "https://conformance-test.local/client-metadata.json"


def issuer_of(url: str) -> str:
    """The authorization server a service is configured with. A client
    secret is only ever sent to its own issuer, so a service names it; here
    it is read from the server's protected resource metadata (RFC 9728)."""
    import requests
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    answer = requests.get(f"{parts.scheme}://{parts.netloc}/.well-known/oauth-protected-resource{parts.path}",
                          timeout=10)
    answer.raise_for_status()
    return str(answer.json()["authorization_servers"][0])


def authorization(scenario: str, context: dict[str, Any], url: str) -> Any:
    """The token provider for an auth scenario (None for the others).

    Every choice the suite checks (discovery order, scopes, client
    identity, iss, step-up, DPoP nonces) is the library's; this only maps
    the scenario's context onto the public constructors."""
    if not scenario.startswith("auth/"):
        return None
    from mcp_sync import auth

    dpop = scenario in ("auth/dpop", "auth/dpop-nonce")
    if scenario == "auth/client-credentials-basic":
        return auth.ClientCredentials(context["client_id"], context["client_secret"],
                                      token_endpoint_auth_method="client_secret_basic",
                                      authorization_server=issuer_of(url))
    if scenario == "auth/client-credentials-jwt":
        key = auth.SigningKey.from_pem(context["private_key_pem"], context.get("signing_algorithm"))
        return auth.ClientCredentials(context["client_id"], private_key=key)
    if scenario == "auth/wif-jwt-bearer":
        return auth.JwtBearer(context["valid_jwt"], client_id=context.get("client_id"))
    if scenario == "auth/enterprise-managed-authorization":
        return auth.EnterpriseManaged(
            id_token=context["idp_id_token"], idp_token_endpoint=context["idp_token_endpoint"],
            idp_client_id=context.get("idp_client_id"), client_id=context["client_id"],
            client_secret=context.get("client_secret"),
            authorization_server=issuer_of(url) if context.get("client_secret") else None,
        )
    # The authorization code flow; the suite's authorization servers
    # redirect at once, so the redirect is read from the Location header.
    return auth.OAuth(
        redirect=auth.HeadlessRedirect("http://localhost:3000/callback"),
        client_id=context.get("client_id"), client_secret=context.get("client_secret"),
        client_issuer=context.get("issuer"), client_metadata_url=CIMD_URL,
        client_name="mcp_sync conformance client", dpop=dpop,
    )


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.DEBUG, stream=sys.stderr,
                        format="%(asctime)s %(threadName)s %(name)s %(levelname)s %(message)s")
    if len(argv) < 2:
        print("usage: client.py <server-url>", file=sys.stderr)
        return 2
    url = argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    version = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    run = SCENARIOS.get(scenario, list_and_call_all)
    log.info("scenario %r at %s against %s", scenario, version, url)
    try:
        # Forms are answered with their schema's defaults (SEP-1034).
        handlers = {"form": mcp_sync.handlers.defaults_form}
        with mcp_sync.connect(url, protocol=version, timeout=30, input_handlers=handlers,
                              auth=authorization(scenario, context, url)) as client:
            run(client, context)
    except mcp_sync.McpError as exc:
        log.error("scenario %r failed: %s: %s", scenario, type(exc).__name__, exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
