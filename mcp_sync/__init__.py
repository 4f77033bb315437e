"""mcp_sync: a synchronous, thread-safe client for the Model Context Protocol.

    >>> import mcp_sync
    >>> from mcp_sync.testing import demo_server
    >>> with mcp_sync.connect(demo_server()) as client:
    ...     print(client.call_tool("echo", {"text": "hello"}).text)
    hello

See the README and docs/ for the threading model and the error model.
"""

import logging
from typing import TYPE_CHECKING, Any

# A library configures no logging: without this, Python's last-resort
# handler would print every WARNING of ours (and every server's) as bare
# text on stderr in a program that never set logging up.
logging.getLogger("mcp_sync").addHandler(logging.NullHandler())

from . import display, handlers  # display: how results look in notebooks (types.show_with)
from ._version import __version__
from .cache import ResultCache, StaleResult
from .client import DEFAULT_TIMEOUT, Client, ClientOptions, RequestOptions, connect, forget_eras
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
from .notifications import Notification, NotificationStream
from .progress import ProgressBar, progress_bar
from .connection import Drops
from .metrics import MethodStats, Stats
from .status import Status, StatusChange
from .protocol import jsonrpc
from .protocol.versions import SUPPORTED_VERSIONS
from .transports import Custom, Memory, MessageSink, Stdio, Target, Transport

if TYPE_CHECKING:
    from . import auth
    from .config import ServerConfig, config_locations, connect_configured, find_config, load_config
    from .group import ClientGroup, GroupItem, Listing
    from .skills import Skill, SkillContent, SkillFile, Skills
    from .subscriptions import Subscription, SubscriptionBroken, SubscriptionEnded, SubscriptionResumed
    from .tasks import Task
    from .transports import HTTP, SSE
from .types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    CompleteResult,
    DiscoverResult,
    EmbeddedResource,
    GetPromptResult,
    ImageContent,
    Implementation,
    InitializeResult,
    Page,
    Progress,
    Prompt,
    PromptArgument,
    PromptMessage,
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
    "__version__", "connect", "forget_eras", "Client", "ClientOptions", "RequestOptions", "DEFAULT_TIMEOUT", "SUPPORTED_VERSIONS",
    "Timeouts", "Limits", "Keepalive",
    "jsonrpc",
    # transports
    "Stdio", "HTTP", "SSE", "Memory", "Custom", "Target", "Transport", "MessageSink",
    # types
    "AudioContent", "BlobResourceContents", "CallToolResult", "CompleteResult", "DiscoverResult",
    "EmbeddedResource", "GetPromptResult", "ImageContent", "Implementation", "InitializeResult",
    "Page", "Progress", "Prompt", "PromptArgument", "PromptMessage", "ReadResourceResult",
    "Resource", "ResourceLink", "ResourceTemplate", "TextContent", "TextResourceContents", "Tool",
    "UnknownContent",
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
    "handlers", "Notification", "NotificationStream", "progress_bar", "ProgressBar", "Drops", "ResultCache", "StaleResult",
    "Status", "StatusChange", "Reconnect", "Stats", "MethodStats", "Overloaded",
    "Subscription", "SubscriptionEnded", "SubscriptionBroken", "SubscriptionResumed",
    # the Tasks extension
    "Task", "TaskCancelled",
    # config files and groups
    "load_config", "ServerConfig", "config_locations", "find_config", "connect_configured", "ConfigError",
    "ClientGroup", "GroupItem", "Listing", "RoutingError",
    # the Skills extension
    "Skills", "Skill", "SkillFile", "SkillContent", "SkillVerificationError", "ExtensionNotDeclared",
]


# These names load on first use (PEP 562), from the module named: `HTTP`,
# `SSE` and the `auth` package bring the HTTP stack (urllib3, requests), which
# costs more than the rest of the package put together and which a stdio-only
# program never needs; config files and groups are not needed by most programs;
# nor are the Tasks and Skills extensions and `listen()`'s subscriptions, whose
# classes (and `datetime`) are a tenth of the import.
_LAZY = {
    "HTTP": "transports", "SSE": "transports", "auth": "",
    "ServerConfig": "config", "config_locations": "config", "connect_configured": "config",
    "find_config": "config", "load_config": "config",
    "ClientGroup": "group", "GroupItem": "group", "Listing": "group",
    "Task": "tasks",
    "Skill": "skills", "SkillContent": "skills", "SkillFile": "skills", "Skills": "skills",
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
