"""What the specification (and this client's reading of it) says about each
method by name: which are safe to send twice, which results may be cached,
and which notification makes which cached results stale. Defined here only.

    >>> "tools/list" in SAFE_TO_RETRY, "tools/call" in SAFE_TO_RETRY
    (True, False)
    >>> INVALIDATES["notifications/tools/list_changed"]
    ('tools/list',)
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

#: Methods safe to send again after a reconnect when their first attempt may
#: have reached the server: they only read, or (the task requests) are
#: idempotent: `tasks/cancel` of a cancelled task and `tasks/update` with
#: answers already taken change nothing. Anything else (a tool call above
#: all) is never repeated blindly.
SAFE_TO_RETRY: Final = frozenset({
    "ping",
    "server/discover",
    "tools/list",
    "resources/list",
    "resources/templates/list",
    "prompts/list",
    "resources/read",
    "prompts/get",
    "completion/complete",
    "tasks/get",
    "tasks/list",
    "tasks/result",
    "tasks/cancel",
    "tasks/update",
})

#: Methods whose results may be cached (2026-07-28 caching hints): lists,
#: reads and discovery, and the Skills extension's results.
CACHEABLE: Final = frozenset({
    "server/discover", "tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read",
    "skills/list", "skills/get",
})

#: A list-changed notification, and the cached results it makes stale.
INVALIDATES: Final[Mapping[str, tuple[str, ...]]] = MappingProxyType({
    "notifications/tools/list_changed": ("tools/list",),
    "notifications/prompts/list_changed": ("prompts/list",),
    "notifications/resources/list_changed": ("resources/list", "resources/templates/list"),
})

#: The server capability a method belongs to: a server that does not
#: declare it does not offer the method (and answers -32601 when asked).
SERVER_CAPABILITY_OF: Final[Mapping[str, str]] = MappingProxyType({
    "tools/list": "tools",
    "tools/call": "tools",
    "resources/list": "resources",
    "resources/templates/list": "resources",
    "resources/read": "resources",
    "resources/subscribe": "resources",
    "resources/unsubscribe": "resources",
    "prompts/list": "prompts",
    "prompts/get": "prompts",
    "completion/complete": "completions",
    "logging/setLevel": "logging",
})

#: A server capability that a revision before this one does not have (a
#: 2024-11-05 server offers completions without declaring them).
SERVER_CAPABILITY_SINCE: Final[Mapping[str, str]] = MappingProxyType({"completions": "2025-03-26"})


def undeclared_capability(method: str, capabilities: Mapping[str, Any], protocol_version: str | None) -> str | None:
    """The server capability `method` belongs to when `capabilities` (a
    server's, on a connection of `protocol_version`; None: not known) do
    not declare it and its revision has it: then the server does not offer
    the method. None otherwise (a `null` capability is not declared).

        >>> undeclared_capability("prompts/list", {"tools": {}}, "2025-11-25")
        'prompts'
        >>> undeclared_capability("completion/complete", {}, "2024-11-05") is None  # no such capability then
        True
    """
    capability = SERVER_CAPABILITY_OF.get(method)
    if capability is None or capabilities.get(capability) is not None:
        return None
    since = SERVER_CAPABILITY_SINCE.get(capability)
    if since is not None and (protocol_version is None or protocol_version < since):
        return None  # its revision may predate the capability
    return capability
