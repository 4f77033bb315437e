"""What a Streamable HTTP request must look like, and how a rejection is answered.

It owns the HTTP side of errors (`HTTPError`: a status, an optional JSON-RPC
error body and headers; `rpc_error` builds one), the status of a stateless
JSON answer from its error code (`stateless_status`), and the checks of a
2026-07-28 request (`validate_stateless`): `_meta` version and
capabilities, the routing headers (`MCP-Protocol-Version`, `Mcp-Method`,
`Mcp-Name`, `Mcp-Param-*` mirrored from `x-mcp-header` annotations, with
the `=?base64?...?=` sentinel decoded), and the version. Plain functions of
the request's headers and body; they know the `Server` only to read its
versions and a tool's inputSchema.
"""

from __future__ import annotations

import base64
import binascii
import decimal
import email.message
import re
from collections.abc import Mapping
from typing import Any

from ._protocol import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    META_CLIENT_CAPABILITIES,
    META_PROTOCOL_VERSION,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
    JSONDict,
    RequestId,
)
from ._registry import Server

HEADER_MISMATCH = -32020
#: The non-standard code legacy SDKs use for transport-level rejections.
LEGACY_TRANSPORT_ERROR = -32000
SESSION_NOT_FOUND = -32001


#: JSON-RPC error code -> HTTP status of a stateless answer (others: 200).
_STATELESS_STATUS = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    HEADER_MISMATCH: 400,
    MISSING_REQUIRED_CLIENT_CAPABILITY: 400,
    UNSUPPORTED_PROTOCOL_VERSION: 400,
    METHOD_NOT_FOUND: 404,
}

#: Method -> the params key mirrored in `Mcp-Name`.
_NAME_BEARING = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri",
                 "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId"}

_SENTINEL = re.compile(r"=\?base64\?(?P<payload>.*)\?=", re.DOTALL)
_HEADER_SAFE = re.compile(r"[\x20-\x7e\t]*")
_DECIMAL = re.compile(r"-?[0-9]+(\.[0-9]+)?")


class HTTPError(Exception):
    """A rejection answered before (or instead of) serving the message."""

    def __init__(self, status: int, body: JSONDict | None = None, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(status)
        self.status = status
        self.body = body
        self.headers = dict(headers or {})


def error_body(code: int, message: str, request_id: RequestId | None = None, data: Any = None) -> JSONDict:
    body: JSONDict = {"jsonrpc": "2.0"}
    if request_id is not None:
        body["id"] = request_id
    error: JSONDict = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    body["error"] = error
    return body


def rpc_error(status: int, code: int, message: str, request_id: RequestId | None = None, data: Any = None) -> HTTPError:
    return HTTPError(status, error_body(code, message, request_id, data))


def decode_header_value(value: str) -> str | None:
    """A header value with the `=?base64?...?=` sentinel decoded (None when
    the sentinel is malformed: bad or non-canonical base64, or not UTF-8)."""
    found = _SENTINEL.fullmatch(value)
    if found is None:
        return value
    payload = found.group("payload")
    try:
        raw = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        return None
    if base64.b64encode(raw).decode("ascii") != payload:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def mcp_param_annotations(input_schema: Any) -> list[tuple[tuple[str, ...], str]]:
    """`(property path, header name)` of every `x-mcp-header` annotation
    reachable from the schema root through `properties` keys only."""
    found: list[tuple[tuple[str, ...], str]] = []
    stack: list[tuple[tuple[str, ...], Any]] = [((), input_schema)]
    while stack:
        path, schema = stack.pop()
        if not isinstance(schema, dict):
            continue
        header = schema.get("x-mcp-header")
        if path and isinstance(header, str) and header:
            found.append((path, header))
        properties = schema.get("properties")
        if isinstance(properties, dict):
            for key, sub in properties.items():
                stack.append(((*path, key), sub))
    return sorted(found)


def _value_at(arguments: Any, path: tuple[str, ...]) -> Any:
    node = arguments
    for key in path:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


def _param_matches(value: Any, decoded: str) -> bool:
    if isinstance(value, bool):
        return decoded == ("true" if value else "false")
    if isinstance(value, (int, float)):
        if _DECIMAL.fullmatch(decoded) is None:
            return False
        expected = decimal.Decimal(value) if isinstance(value, int) else decimal.Decimal(repr(value))
        return decimal.Decimal(decoded) == expected
    return isinstance(value, str) and decoded == value


def validate_stateless(server: Server, headers: email.message.Message, message: JSONDict, request_id: RequestId) -> None:
    """Check a 2026-07-28 request (steps 2-5 of the `HTTPServer` docstring); raise the HTTPError answering it."""
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    if not isinstance(params, dict) or not isinstance(meta, dict):
        raise rpc_error(400, INVALID_PARAMS, "Invalid params: params._meta must be an object carrying "
                        f"{META_PROTOCOL_VERSION!r} and {META_CLIENT_CAPABILITIES!r}", request_id)
    missing = [key for key in (META_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES) if key not in meta]
    if missing:
        raise rpc_error(400, INVALID_PARAMS,
                        f"Invalid params: missing required _meta field(s) {', '.join(map(repr, missing))}",
                        request_id)

    def mismatch(text: str) -> HTTPError:
        return rpc_error(400, HEADER_MISMATCH, f"Header mismatch: {text}", request_id)

    def header(name: str, required: bool = True) -> str | None:
        values = headers.get_all(name) or []
        if len(values) > 1:
            raise mismatch(f"{name} appears more than once")
        if not values:
            if required:
                raise mismatch(f"the {name} header is required")
            return None
        value = str(values[0])
        if _HEADER_SAFE.fullmatch(value) is None:
            raise mismatch(f"{name} contains invalid characters")
        return value

    version = meta[META_PROTOCOL_VERSION]
    method = message["method"]
    sent_version = header("MCP-Protocol-Version")
    if sent_version != version:
        raise mismatch(f"MCP-Protocol-Version header value {sent_version!r} does not match body value {version!r}")
    sent_method = header("Mcp-Method")
    if sent_method != method:
        raise mismatch(f"Mcp-Method header value {sent_method!r} does not match body value {method!r}")
    name_key = _NAME_BEARING.get(method)
    if name_key is not None:
        raw_name = header("Mcp-Name")
        assert raw_name is not None
        decoded = decode_header_value(raw_name)
        if decoded is None:
            raise mismatch("Mcp-Name has a malformed base64 sentinel")
        if decoded != params.get(name_key):
            raise mismatch(f"Mcp-Name header value {decoded!r} does not match body value {params.get(name_key)!r}")
    if not isinstance(version, str):
        raise rpc_error(400, INVALID_PARAMS, f"Invalid params: _meta {META_PROTOCOL_VERSION!r} must be a string",
                        request_id)
    if version not in server.stateless_versions:
        raise rpc_error(400, UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version", request_id,
                        {"supported": list(server.stateless_versions), "requested": version})
    if method == "tools/call" and isinstance(params.get("name"), str):
        schema = server.input_schema(params["name"])
        if schema is not None:
            arguments = params.get("arguments")
            for path, token in mcp_param_annotations(schema):
                name = f"Mcp-Param-{token}"
                value = _value_at(arguments, path)
                if value is None or isinstance(value, (dict, list)):
                    if headers.get_all(name):
                        raise mismatch(f"{name} must be omitted when {'.'.join(path)!r} has no value")
                    continue
                raw = header(name)
                assert raw is not None
                decoded = decode_header_value(raw)
                if decoded is None:
                    raise mismatch(f"{name} has a malformed base64 sentinel")
                if not _param_matches(value, decoded):
                    raise mismatch(f"{name} header value {decoded!r} does not match body value {value!r}")


def stateless_status(message: JSONDict) -> int:
    """The HTTP status of a stateless JSON answer: from its error code, 200 for a result."""
    error = message.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    return _STATELESS_STATUS.get(code, 200) if isinstance(code, int) else 200

