"""The in-process MCP server: `Server`, `ServerSession`, `ToolContext` (a facade).

This module keeps the historical import path `mcp_sync.testing.core`; the
code lives in one module per concept:

* `_protocol`: revisions, `_meta` keys, error codes, `RpcError`;
* `_registry`: `Server`, the registration API and configuration;
* `_session`: `ServerSession`, one connection's state and dispatch;
* `_context`: a request in flight (`Call`) and `ToolContext`;
* `_handlers`: the feature request handlers (tools, resources, prompts...);
* `_asking`: servers that ask back, in both eras;
* `_subscriptions`: `subscriptions/listen` (stateless change notifications);
* `_features`: the registered definitions; `_pool`: a session's workers.
"""

from __future__ import annotations

# `Name as Name`: an explicit re-export (this module has no `__all__`, as before the split).
from ._asking import (
    ASKABLE_METHODS as ASKABLE_METHODS,
    MRTR_METHODS as MRTR_METHODS,
    RESULT_NAMES as RESULT_NAMES,
    ClientError as ClientError,
    InputRequired as InputRequired,
    MissingClientCapability as MissingClientCapability,
    RequestCancelled as RequestCancelled,
    StateSealer as StateSealer,
    check_answer as check_answer,
    describe_capabilities as describe_capabilities,
    missing_capabilities as missing_capabilities,
    request_digest as request_digest,
)
from ._context import (
    RequestContext as RequestContext,
    ToolContext as ToolContext,
)
from ._features import (
    ArgumentError as ArgumentError,
    Completer as Completer,
    CompletionKey as CompletionKey,
    PromptDef as PromptDef,
    ResourceDef as ResourceDef,
    TemplateDef as TemplateDef,
    ToolDef as ToolDef,
    compile_template as compile_template,
    paginate as paginate,
    resource_contents as resource_contents,
    text_content as text_content,
)
from ._pool import WorkerPool as WorkerPool
from ._protocol import (
    CACHE_SCOPES as CACHE_SCOPES,
    CHANGE_KINDS as CHANGE_KINDS,
    INTERNAL_ERROR as INTERNAL_ERROR,
    INVALID_PARAMS as INVALID_PARAMS,
    INVALID_REQUEST as INVALID_REQUEST,
    LEGACY_VERSIONS as LEGACY_VERSIONS,
    LOG_LEVELS as LOG_LEVELS,
    META_CLIENT_CAPABILITIES as META_CLIENT_CAPABILITIES,
    META_LOG_LEVEL as META_LOG_LEVEL,
    META_PROTOCOL_VERSION as META_PROTOCOL_VERSION,
    META_SERVER_INFO as META_SERVER_INFO,
    META_SUBSCRIPTION_ID as META_SUBSCRIPTION_ID,
    METHOD_NOT_FOUND as METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY as MISSING_REQUIRED_CLIENT_CAPABILITY,
    PARSE_ERROR as PARSE_ERROR,
    RESOURCE_NOT_FOUND_LEGACY as RESOURCE_NOT_FOUND_LEGACY,
    STATELESS_VERSIONS as STATELESS_VERSIONS,
    SUPPORTED_VERSIONS as SUPPORTED_VERSIONS,
    UNSUPPORTED_PROTOCOL_VERSION as UNSUPPORTED_PROTOCOL_VERSION,
    JSONDict as JSONDict,
    RequestId as RequestId,
    RpcError as RpcError,
)
from ._registry import (
    RelatedSend as RelatedSend,
    Server as Server,
)
from ._session import (
    Handler as Handler,
    ServerSession as ServerSession,
)
