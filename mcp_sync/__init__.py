"""mcp_sync: a synchronous, thread-safe client for the Model Context Protocol.

    >>> import mcp_sync
    >>> from mcp_sync.testing import demo_server
    >>> with mcp_sync.connect(demo_server()) as client:
    ...     print(client.call_tool("echo", {"text": "hello"}).text)
    hello

Bad arguments raise `TypeError` or `ValueError` before anything is sent;
everything from the server or the transport raises an `McpError` subclass.
The documentation (docs/ in the source tree, with its threading and error
pages) says the rest.
"""

import logging
from typing import TYPE_CHECKING, Any

# A library configures no logging: without this, Python's last-resort
# handler would print every WARNING of ours (and every server's) as bare
# text on stderr in a program that never set logging up.
logging.getLogger("mcp_sync").addHandler(logging.NullHandler())

from . import display, handlers  # display: how results look in notebooks (types.show_with)
from ._version import __version__
from .cache import ResultCache
from .client import Client, ClientOptions, RequestOptions, connect, forget_eras
from .options import Keepalive, Limits, Reconnect, Timeouts
from .errors import (
    AuthenticationError,
    AuthorizationError,
    AuthorizationRequired,
    ConnectError,
    ConfigError,
    ConnectionClosed,
    ExtensionNotDeclared,
    HeaderMismatch,
    HTTPStatusError,
    InputHandlerError,
    InputRequired,
    InputRoundsExceeded,
    InvalidMessage,
    InvalidParams,
    InvalidResult,
    MalformedInputRequest,
    McpError,
    MessageTooLarge,
    MethodNotFound,
    MissingClientCapability,
    NoInputHandler,
    OAuthError,
    Overloaded,
    OutputValidationError,
    PaginationError,
    ProtocolError,
    RequestTimeout,
    ResourceNotFound,
    RoutingError,
    ServerError,
    ServerExited,
    SessionExpired,
    SkillVerificationError,
    TaskCancelled,
    ToolError,
    TransportError,
    UnsupportedMethod,
    UnsupportedProtocolVersion,
    UrlElicitationRequired,
    VersionNegotiationError,
)
from .notifications import Notification
from .progress import progress_bar
from .connection import Drops
from .metrics import Stats
from .status import Status
from .protocol.versions import SUPPORTED_VERSIONS
from .transports import Custom, Memory, Stdio, Target, Transport

if TYPE_CHECKING:
    from . import auth
    from .config import ServerConfig, connect_configured, find_config, load_config
    from .group import ClientGroup
    from .subscriptions import Subscription, SubscriptionBroken, SubscriptionEnded, SubscriptionResumed
    from .tasks import Task
    from .transports import HTTP, SSE
from .types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    GetPromptResult,
    ImageContent,
    Progress,
    Prompt,
    ReadResourceResult,
    Resource,
    ResourceLink,
    ResourceTemplate,
    TextContent,
    TextResourceContents,
    Tool,
    UnknownContent,
)

__all__ = [
    "__version__", "connect", "forget_eras", "Client", "ClientOptions", "RequestOptions", "SUPPORTED_VERSIONS",
    "Timeouts", "Limits", "Keepalive", "Reconnect",
    # transports
    "Stdio", "HTTP", "SSE", "Memory", "Custom", "Target", "Transport",
    # results
    "CallToolResult", "GetPromptResult", "ReadResourceResult", "Tool", "Prompt", "Resource", "ResourceTemplate",
    "TextContent", "ImageContent", "AudioContent", "ResourceLink", "EmbeddedResource", "UnknownContent",
    "TextResourceContents", "BlobResourceContents", "Progress", "Notification",
    # errors
    "McpError", "ServerError", "MethodNotFound", "InvalidParams", "ResourceNotFound",
    "HeaderMismatch", "MissingClientCapability", "UnsupportedProtocolVersion", "UrlElicitationRequired",
    "TransportError",
    "ConnectionClosed", "ServerExited", "ConnectError", "InvalidMessage", "MessageTooLarge",
    "HTTPStatusError", "AuthenticationError", "SessionExpired", "AuthorizationError",
    "AuthorizationRequired", "OAuthError",
    "RequestTimeout", "ProtocolError", "VersionNegotiationError", "InvalidResult",
    "OutputValidationError", "PaginationError", "UnsupportedMethod", "InputRequired", "ToolError",
    "NoInputHandler", "InputHandlerError", "InputRoundsExceeded", "MalformedInputRequest",
    "Overloaded", "TaskCancelled", "ConfigError", "RoutingError", "SkillVerificationError", "ExtensionNotDeclared",
    # input handlers, progress, status and statistics, caching
    "handlers", "progress_bar", "Status", "Stats", "Drops", "ResultCache",
    # subscriptions, tasks, config files and groups
    "Subscription", "SubscriptionEnded", "SubscriptionBroken", "SubscriptionResumed",
    "Task",
    "load_config", "ServerConfig", "find_config", "connect_configured", "ClientGroup",
]


# These names load on first use (PEP 562), from the module named: `HTTP`,
# `SSE` and the `auth` package bring the HTTP stack (urllib3, requests), which
# costs more than the rest of the package put together and which a stdio-only
# program never needs; config files and groups are not needed by most programs;
# nor are the Tasks extension and `listen()`'s subscriptions, whose
# classes (and `datetime`) are a tenth of the import. `testing` (the test
# server) loads on first use too, so `mcp_sync.testing.demo_server()` works
# after a plain `import mcp_sync`, as the examples write it.
_LAZY = {
    "HTTP": "transports", "SSE": "transports", "auth": "", "testing": "",
    "ServerConfig": "config", "connect_configured": "config", "find_config": "config", "load_config": "config",
    "ClientGroup": "group",
    "Task": "tasks",
    "Subscription": "subscriptions", "SubscriptionBroken": "subscriptions",
    "SubscriptionEnded": "subscriptions", "SubscriptionResumed": "subscriptions",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    if _LAZY[name]:
        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    else:  # a subpackage
        value = importlib.import_module(f"{__name__}.{name}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__) | set(_LAZY))
