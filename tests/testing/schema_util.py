"""JSON-schema checks of the messages the test server emits, shared by the
tests of `mcp_sync.testing` (in-process, stdio and HTTP).

Every message is validated against the published schema of the revision in
use, from `tests/schemas/<rev>/schema.json`.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import jsonschema

REPO = Path(__file__).resolve().parents[2]
MODERN = "2026-07-28"
LEGACY = ("2025-11-25", "2025-06-18")

META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPS = "io.modelcontextprotocol/clientCapabilities"
META_LOG = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"


# --------------------------------------------------------------------------
# JSON schema validation


SCHEMAS = REPO / "tests" / "schemas"


@functools.lru_cache(maxsize=None)
def _load_schema(rev: str) -> dict[str, Any]:
    path = SCHEMAS / rev / "schema.json"
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


@functools.lru_cache(maxsize=None)
def _validator_class(rev: str) -> Any:
    """The schema's validator class, after checking the schema itself (once per revision: it is slow)."""
    schema = _load_schema(rev)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls


@functools.lru_cache(maxsize=None)
def _validator(rev: str, definition: str) -> Any:
    schema = _load_schema(rev)
    defs_key = "$defs" if "$defs" in schema else "definitions"
    assert definition in schema[defs_key], f"{definition} is not defined in the {rev} schema"
    root = dict(schema)
    root["$ref"] = f"#/{defs_key}/{definition}"
    return _validator_class(rev)(root)


def validate(rev: str, definition: str, instance: Any) -> None:
    _validator(rev, definition).validate(instance)


def is_valid(rev: str, definition: str, instance: Any) -> bool:
    return bool(_validator(rev, definition).is_valid(instance))


RESULT_DEFS = {
    "server/discover": "DiscoverResult",
    "initialize": "InitializeResult",
    "ping": "EmptyResult",
    "logging/setLevel": "EmptyResult",
    "tools/list": "ListToolsResult",
    "tools/call": "CallToolResult",
    "resources/list": "ListResourcesResult",
    "resources/templates/list": "ListResourceTemplatesResult",
    "resources/read": "ReadResourceResult",
    "prompts/list": "ListPromptsResult",
    "prompts/get": "GetPromptResult",
    "completion/complete": "CompleteResult",
    "resources/subscribe": "EmptyResult",
    "resources/unsubscribe": "EmptyResult",
    "subscriptions/listen": "SubscriptionsListenResult",
}


def check_response(rev: str, method: str, msg: dict[str, Any]) -> None:
    """Validate a response to `method` against revision `rev`."""
    assert msg.get("jsonrpc") == "2.0"
    if "error" in msg:
        validate(rev, "JSONRPCError" if rev == "2025-06-18" else "JSONRPCErrorResponse", msg)
        if msg["error"]["code"] == -32022:
            validate(MODERN, "UnsupportedProtocolVersionError", msg)
        return
    validate(rev, "JSONRPCResponse" if rev == "2025-06-18" else "JSONRPCResultResponse", msg)
    validate(rev, RESULT_DEFS[method], msg["result"])
    result = msg["result"]
    if rev == MODERN:
        assert result["resultType"] == "complete"
        assert set(result["_meta"][META_SERVER_INFO]) >= {"name", "version"}
        if method in ("server/discover", "tools/list", "prompts/list", "resources/list",
                      "resources/templates/list", "resources/read"):
            validate(rev, "CacheableResult", result)
    else:
        assert "resultType" not in result
        assert "ttlMs" not in result and "cacheScope" not in result


def check_error_any_revision(msg: dict[str, Any]) -> None:
    """An error sent before any revision is agreed must fit every revision that can express it."""
    for rev in (MODERN,) + LEGACY:
        if rev == "2025-06-18" and "id" not in msg:
            continue  # 2025-06-18's JSONRPCError has a required id; later revisions dropped that
        check_response(rev, "", msg)


def check_notification(rev: str, msg: dict[str, Any]) -> None:
    assert "id" not in msg
    validate(rev, "JSONRPCNotification", msg)
    validate(rev, "ServerNotification", msg)


def check_all_notifications(rev: str, messages: list[dict[str, Any]]) -> None:
    for msg in messages:
        if "method" in msg:
            check_notification(rev, msg)
