"""The protocol vocabulary the test server speaks, shared by all its modules.

It owns the constants of the wire: the protocol revisions (stateless and
`initialize` era), log levels, the `_meta` keys of 2026-07-28, the JSON-RPC
error codes, which methods each era serves and which results carry caching
hints, the change kinds behind list_changed notifications, and `RpcError`,
the JSON-RPC error answer a handler raises. It knows nothing of sessions,
threads or transports: plain values and two type checks.
"""

from __future__ import annotations

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
    its call with this error instead of an `isError` result."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
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

