"""The protocol vocabulary the test server speaks, shared by all its modules.

It owns the constants of the wire: the protocol revisions (stateless and
`initialize` era), log levels, the `_meta` keys of 2026-07-28, the JSON-RPC
error codes, which methods each era serves and which results carry caching
hints, the change kinds behind list_changed notifications, and `RpcError`,
the JSON-RPC error answer a handler raises. It knows nothing of sessions,
threads or transports: plain values, a few type checks, and `json_problem`,
which says what in an answer JSON cannot carry.
"""

from __future__ import annotations

import json
import math
import reprlib
from typing import Any, TypeGuard

JSONDict = dict[str, Any]


#: Stateless revisions this server can speak, newest first.
STATELESS_VERSIONS: tuple[str, ...] = ("2026-07-28",)
#: Revisions with the `initialize` handshake, newest first.
LEGACY_VERSIONS: tuple[str, ...] = ("2025-11-25", "2025-06-18")
#: Every revision this server speaks by default, newest first.
SUPPORTED_VERSIONS: tuple[str, ...] = STATELESS_VERSIONS + LEGACY_VERSIONS
#: Older `initialize` revisions, spoken only when asked for (`versions=`),
#: as servers of SDK releases still in wide use do: results take their
#: shapes (see `_shapes`), and HTTP requests need no `MCP-Protocol-Version`.
OLD_VERSIONS: tuple[str, ...] = ("2025-03-26", "2024-11-05")
#: Every revision `versions=` may name, newest first.
ALL_VERSIONS: tuple[str, ...] = SUPPORTED_VERSIONS + OLD_VERSIONS

#: RFC 5424 severities, least severe first.
LOG_LEVELS: tuple[str, ...] = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
LEVEL_RANK = {level: rank for rank, level in enumerate(LOG_LEVELS)}

META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_LOG_LEVEL = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
META_SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
RESOURCE_NOT_FOUND_LEGACY = -32002
MISSING_REQUIRED_CLIENT_CAPABILITY = -32021
UNSUPPORTED_PROTOCOL_VERSION = -32022

RequestId = str | int

FEATURE_METHODS = frozenset({
    "tools/list", "tools/call", "resources/list", "resources/templates/list", "resources/read",
    "prompts/list", "prompts/get", "completion/complete",
    # The Skills extension (answered -32601 unless the server serves skills).
    "skills/list", "skills/get", "resources/directory/read",
})
STATELESS_METHODS = FEATURE_METHODS | {"server/discover", "subscriptions/listen"}
LEGACY_METHODS = FEATURE_METHODS | {
    "ping", "initialize", "logging/setLevel", "resources/subscribe", "resources/unsubscribe",
}
#: Results that carry caching hints (2026-07-28 server/utilities/caching).
CACHEABLE = frozenset({
    "server/discover", "tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read",
    "skills/list", "skills/get",
})

#: What changes: `Server.notify_changed(kind)` -> the list_changed notification
#: and the `subscriptions/listen` filter key that opts in to it.
CHANGE_KINDS: dict[str, tuple[str, str]] = {
    "tools": ("notifications/tools/list_changed", "toolsListChanged"),
    "prompts": ("notifications/prompts/list_changed", "promptsListChanged"),
    "resources": ("notifications/resources/list_changed", "resourcesListChanged"),
}
CACHE_SCOPES = ("public", "private")


class RpcError(Exception):
    """A JSON-RPC error answer to a request. A tool may raise it to answer
    its call with this error instead of an `isError` result.

    `code` must be an int (not a bool) and `message` a str: the error object
    a client reads needs both (TypeError at construction otherwise, in the
    handler that made the mistake). `data`, any JSON value, is checked when
    the answer goes out (see `json_problem`)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        if isinstance(code, bool) or not isinstance(code, int):
            raise TypeError(f"RpcError code must be an int (a JSON-RPC error code such as -32000), "
                            f"not {type(code).__name__} {code!r}")
        if not isinstance(message, str):
            raise TypeError(f"RpcError message must be a str, not {type(message).__name__} {message!r}")
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_json(self) -> JSONDict:
        error: JSONDict = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


def is_request_id(value: Any) -> TypeGuard[RequestId]:
    return isinstance(value, (str, int)) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# Strict, as a client's decoder is: NaN and the infinities are not JSON.
_strict_encoder = json.JSONEncoder(allow_nan=False)
_short = reprlib.Repr()
_short.maxstring = _short.maxother = 80


def json_problem(value: Any, where: str = "") -> str | None:
    """None when `value` can go on the wire as JSON; otherwise what cannot
    and where, as "structuredContent.at[1] is <repr> (of type datetime)", the
    path starting at `where`. It encodes `value` once (the C encoder) and
    walks it only when that fails, so an answer that encodes costs one
    encoding."""
    try:
        _strict_encoder.encode(value)
    except (TypeError, ValueError, RecursionError) as exc:
        try:
            found = _find(value, where, set())
        except RecursionError:
            found = None
        return found if found is not None else f"{where or 'the value'}: {exc}"
    return None


def _find(value: Any, path: str, open_: set[int]) -> str | None:
    """The first value under `value` (at `path`, "" for the root) that JSON
    cannot encode, described; None if none. `open_`: the ids of the
    containers being walked, to name a circle rather than recurse for ever."""
    at = path or "the value"
    if value is None or isinstance(value, (str, bool, int)):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{at} is {value!r}, which JSON cannot carry (not a finite number)"
    if isinstance(value, (dict, list, tuple)):
        if id(value) in open_:
            return f"{at} refers back to a value that contains it (a circular reference)"
        open_.add(id(value))
        try:
            if isinstance(value, dict):
                for key, item in value.items():
                    if not isinstance(key, (str, int, float, bool)) and key is not None:
                        return (f"{at} has the key {_short.repr(key)} (of type {type(key).__name__}); "
                                "JSON keys are strings")
                    name = str(key)
                    if name.isidentifier():
                        child = f"{path}.{name}" if path else name
                    else:
                        child = f"{path}[{json.dumps(name)}]"
                    found = _find(item, child, open_)
                    if found is not None:
                        return found
            else:
                for index, item in enumerate(value):
                    found = _find(item, f"{path}[{index}]", open_)
                    if found is not None:
                        return found
        finally:
            open_.discard(id(value))
        return None
    return f"{at} is {_short.repr(value)} (of type {type(value).__name__}), which JSON cannot encode"
