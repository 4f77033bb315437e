"""Streamable HTTP for the test server: `HTTPServer` (a facade).

This module keeps the import path `mcp_sync.testing.http`. `HTTPServer`, its
behaviour and its status codes are documented in `_streamable` and
`_eras`; the pieces it is made of live in one module per concept:

* `_streamable`: `HTTPServer` (test knobs, routing to an era) and the gate
  types `Gated`/`GateAnswer`;
* `_loopback`: the lifecycle and knobs `HTTPServer` and `SSEServer` share,
  and `RecordedRequest`;
* `_listener`: the listening socket and one tracked thread per connection;
* `_framing`: reading requests, writing JSON and SSE responses;
* `_eras`: serving each protocol era (stateless; `initialize` sessions);
* `_validation`: request checks of 2026-07-28 (routing headers) and rejections;
* `_streams`: response streams and `initialize`-era sessions;
* `_responses`: writing a stream as one HTTP response;
* `_legacy_sse`: `SSEServer`, the old HTTP+SSE transport (2024-11-05).
"""

from __future__ import annotations

# `Name as Name`: kept importable from here for code written before the split.
from ._protocol import (
    INVALID_PARAMS as INVALID_PARAMS,
    INVALID_REQUEST as INVALID_REQUEST,
    META_CLIENT_CAPABILITIES as META_CLIENT_CAPABILITIES,
    META_PROTOCOL_VERSION as META_PROTOCOL_VERSION,
    METHOD_NOT_FOUND as METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY as MISSING_REQUIRED_CLIENT_CAPABILITY,
    PARSE_ERROR as PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION as UNSUPPORTED_PROTOCOL_VERSION,
    JSONDict as JSONDict,
    RequestId as RequestId,
)
from ._legacy_sse import SSEServer as SSEServer
from ._loopback import RecordedRequest
from ._registry import Server as Server
from ._session import ServerSession as ServerSession
from ._streamable import (
    RESPONSE_MODES as RESPONSE_MODES,
    GateAnswer,
    Gated,
    HTTPServer,
)
from ._validation import (
    HEADER_MISMATCH as HEADER_MISMATCH,
    decode_header_value as decode_header_value,
    mcp_param_annotations as mcp_param_annotations,
)

__all__ = ["GateAnswer", "Gated", "HTTPServer", "RecordedRequest", "SSEServer"]
