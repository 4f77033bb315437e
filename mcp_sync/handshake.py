"""Settling the protocol version on a live connection.

Two exchanges, each a small function over the engine: the `server/discover`
probe of the stateless era (what its answer means is decided by
`protocol.versions.read_probe_answer`), and the `initialize` handshake of the
initialize era. The client decides which to run and what to do with the
outcome (restart the server, keep the session); these functions only talk.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Callable

import attrs

from .connection import Connection
from .errors import (
    AuthenticationError,
    HTTPStatusError,
    InvalidResult,
    RequestTimeout,
    TransportError,
    VersionNegotiationError,
    server_error_from_wire,
)
from .protocol import versions
from .protocol.versions import FallBack, Reprobe, UseStateless
from .types import InitializeResult

Callback = Callable[[dict[str, Any]], None]


@attrs.frozen
class Identity:
    """What the client says about itself in every handshake."""

    capabilities: Mapping[str, Any]
    client_info: Mapping[str, Any]
    log_level: str | None


def probe(
    conn: Connection,
    version: str,
    allowed: Sequence[str],
    identity: Identity,
    *,
    timeout: float,
    on_log: Callback,
    failure_means_initialize_era: bool,
) -> UseStateless | FallBack:
    """Send `server/discover` until the answer settles the era.

    Silence within `timeout` means an initialize-era server. A transport failure
    during the probe (an initialize-era server that dies on an unknown method) means
    one too when the caller can restart the server (`failure_means_initialize_era`).
    """
    for _attempt in range(3):
        dialect = versions.dialect_for(version)
        params = {"_meta": dialect.request_meta(identity.capabilities, identity.client_info, identity.log_level)}
        response: dict[str, Any] | None
        try:
            pending = conn.send_request("server/discover", params)
            response = conn.wait(pending, timeout=timeout, on_log=on_log)
        except RequestTimeout:
            response = None
        except AuthenticationError:
            raise  # 401/403 say nothing about the era
        except HTTPStatusError as exc:
            # A 4xx with no modern JSON-RPC error in it is an initialize-era server's
            # answer (the JSON-RPC ones arrive as error responses). 5xx is
            # an error, not evidence.
            if 400 <= exc.status < 500:
                return FallBack(f"server/discover answered HTTP {exc.status}")
            raise
        except TransportError as exc:
            if not failure_means_initialize_era:
                raise
            return FallBack(f"the server failed on server/discover: {exc}")
        verdict = versions.read_probe_answer(response, allowed)
        if not isinstance(verdict, Reprobe):
            return verdict
        # Even the version we just sent may be listed: a server may refuse a
        # first request on purpose. Retry (a few times at most) as told.
        version = verdict.version
    raise VersionNegotiationError(
        "the server kept refusing the protocol versions it said it supports", requested=list(allowed),
    )


def initialize(
    conn: Connection,
    version: str,
    allowed: Sequence[str],
    identity: Identity,
    *,
    timeout: float | None,
    on_log: Callback,
    on_server_request: Callback,
) -> InitializeResult:
    """The initialize handshake: `initialize`, a check of the negotiated
    version, then `notifications/initialized`. Returns the session."""
    dialect = versions.dialect_for(version)
    params = {
        "protocolVersion": version,
        # A capability the revision lacks is not declared (elicitation
        # before 2025-06-18), nor a clientInfo field (title). When
        # negotiating down, `version` is the newest asked for, so nothing
        # is dropped then.
        "capabilities": dialect.declarable_capabilities(identity.capabilities),
        "clientInfo": dialect.client_info(identity.client_info),
    }
    pending = conn.send_request("initialize", params, cancellable=False)
    response = conn.wait(pending, timeout=timeout, on_log=on_log, on_server_request=on_server_request)
    if "error" in response:
        raise server_error_from_wire(response["error"], method="initialize")
    result = response.get("result")
    if not isinstance(result, Mapping):
        raise InvalidResult("initialize answered without a result object")
    negotiated = versions.check_negotiated(result, version, allowed)
    session = InitializeResult.from_wire(result)
    # The transport frames everything after initialize for this version
    # (HTTP: the session id and MCP-Protocol-Version headers).
    conn.transport.negotiated(negotiated, False)
    conn.notify("notifications/initialized")
    return session
