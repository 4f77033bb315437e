"""Every exception `mcp_sync` raises, in one hierarchy.

Catch the broad class or the precise one, as with `requests.exceptions`::

    McpError
    ├── ServerError                 the server answered with a JSON-RPC error
    │   ├── MethodNotFound          -32601
    │   ├── InvalidParams           -32602
    │   │   └── ResourceNotFound    -32002, or -32602 on resources/read meaning not found
    │   ├── HeaderMismatch          -32020
    │   ├── MissingClientCapability -32021
    │   ├── UnsupportedProtocolVersion  -32022
    │   └── UrlElicitationRequired  -32042 (2025-11-25)
    ├── TransportError              the channel failed; no answer came
    │   ├── ConnectionClosed        closed by close(), or the server went away
    │   │   └── ServerExited        the server process ended
    │   ├── ConnectError            the server could not be started or reached
    │   ├── InvalidMessage          the server sent something that is not JSON-RPC
    │   ├── MessageTooLarge         a message over the configured size limit
    │   ├── HTTPStatusError         an HTTP answer with no JSON-RPC message in it
    │   │   ├── AuthenticationError 401 or 403
    │   │   └── SessionExpired      404 for an initialize-era session
    │   └── AuthorizationError      getting a token (OAuth) failed
    │       ├── AuthorizationRequired  a person must authorize and none can be reached
    │       ├── EndpointNotAllowed  a server named an address it may not send the client to
    │       └── OAuthError          the authorization server answered with an OAuth error
    ├── RequestTimeout              no answer in time (also a TimeoutError)
    ├── Overloaded                  too many calls already waiting; nothing was sent
    ├── ProtocolError               the server broke a rule of the protocol
    │   ├── VersionNegotiationError no protocol version both sides speak
    │   ├── InvalidResult           a result the client cannot accept
    │   │   └── OutputValidationError  structuredContent fails the tool's outputSchema
    │   └── PaginationError         a repeated cursor, or too many pages
    ├── UnsupportedMethod           the negotiated version has no such method
    ├── InputRequired               the server needs input the client did not supply
    │   ├── NoInputHandler          no handler for a kind of request (nothing ran)
    │   ├── InputHandlerError       a handler failed or answered something invalid
    │   ├── InputRoundsExceeded     still asking after max_input_rounds
    │   └── MalformedInputRequest   an input_required result that cannot be answered
    ├── ToolError                   raised by CallToolResult.raise_for_error()
    ├── TaskCancelled               a task was cancelled before its result (Tasks)
    ├── ConfigError                 a server config file that cannot be used
    ├── ExtensionNotDeclared        the server did not declare the extension a call needs
    ├── SkillVerificationError      a skill's file failed a check of its entry (Skills)
    └── RoutingError                a ClientGroup cannot tell which server a name is for

Only `ServerError` and its subclasses stand for something the server sent;
every other class is decided locally, so a local failure never looks like an
error from the peer. Bad arguments from the caller raise the ordinary
`TypeError`/`ValueError` at once, before anything is sent.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any, TypeVar

from .protocol import codes
from .protocol.methods import undeclared_capability

__all__ = [
    "McpError",
    "ServerError",
    "MethodNotFound",
    "InvalidParams",
    "ResourceNotFound",
    "HeaderMismatch",
    "MissingClientCapability",
    "UnsupportedProtocolVersion",
    "UrlElicitationRequired",
    "TransportError",
    "ConnectionClosed",
    "ServerExited",
    "ConnectError",
    "InvalidMessage",
    "MessageTooLarge",
    "HTTPStatusError",
    "AuthenticationError",
    "SessionExpired",
    "AuthorizationError",
    "AuthorizationRequired",
    "OAuthError",
    "RequestTimeout",
    "Overloaded",
    "ProtocolError",
    "VersionNegotiationError",
    "InvalidResult",
    "OutputValidationError",
    "PaginationError",
    "UnsupportedMethod",
    "InputRequired",
    "NoInputHandler",
    "InputHandlerError",
    "InputRoundsExceeded",
    "MalformedInputRequest",
    "ToolError",
    "TaskCancelled",
    "ConfigError",
    "RoutingError",
    "ExtensionNotDeclared",
    "SkillVerificationError",
    "server_error_from_wire",
]


class McpError(Exception):
    """The root of every exception raised for what the server or the
    transport did: an error answer, a timeout, a server that died, a
    malformed message. Bad arguments raise `TypeError` or `ValueError`
    instead, before anything is sent.

    Example::

        try:
            client.call_tool("add", {"a": 2, "b": 3})
        except mcp_sync.McpError as exc:
            print("the call failed:", exc)
    """


# -- errors the server sent -------------------------------------------------


def _kind_of(code: int) -> str:
    if code in (codes.PARSE_ERROR, codes.INVALID_REQUEST):
        return "json_rpc"
    if code == codes.INTERNAL_ERROR:
        return "execution"
    return "protocol"


class ServerError(McpError):
    """A JSON-RPC error response, with `code`, `message` and `data` exactly as sent.

    `kind` sorts the code: ``"json_rpc"`` (-32700, -32600), ``"execution"``
    (-32603) or ``"protocol"`` (everything else). `method` names the request
    that failed.

    Attributes:
        code (int): The JSON-RPC error code, such as -32602.
        message (str): The error's message as the server sent it (its
            `repr` when it was not a string).
        data (Any): The error's `data` member as sent; None when it had none.
        method (str | None): The method of the request that failed, such as
            ``"tools/call"``; None when not known.
        kind (str): ``"json_rpc"``, ``"execution"`` or ``"protocol"``, from
            the code (see above).

    Example::

        try:
            client.call_tool("nope")
        except mcp_sync.InvalidParams as exc:
            print(exc.code, exc.message)   # -32602 Unknown tool: nope
    """

    def __init__(
        self, code: int, message: str, data: Any = None, *, method: str | None = None
    ) -> None:
        self.code = code
        self.message = message
        self.data = data
        self.method = method
        self.kind = _kind_of(code)
        where = f" ({method})" if method else ""
        super().__init__(f"server error {code}{where}: {message}")


class MethodNotFound(ServerError):
    """-32601: the server does not offer this method.

    When the method belongs to a capability the server did not declare
    (`prompts/list` from a server that offers tools only), `capability`
    names it and the message says so: check `client.server_capabilities`
    before asking::

        if "prompts" in (client.server_capabilities or {}):
            prompts = client.list_prompts()

    Attributes:
        capability (str | None): The server capability the method belongs
            to, such as ``"prompts"``, when the server did not declare it;
            None when it did, or the method belongs to none.
    """

    capability: str | None = None


class InvalidParams(ServerError):
    """-32602: the server refused the request's parameters."""


class ResourceNotFound(InvalidParams):
    """The resource does not exist: -32002 on `resources/read`, or -32602
    there when the revision says it means not found (2026-07-28) or the
    server says so (its `data.uri`, or a message such as "Resource ... not
    found", which is how TypeScript-SDK and FastMCP servers answer in the
    initialize era).

    `uri` is the resource asked for.
    """

    #: The URI the request asked for; `uri` falls back to it when the
    #: server's error does not name one.
    requested_uri: str | None = None

    @property
    def uri(self) -> str | None:
        """The URI of the missing resource: the error's `data.uri`, else the
        URI the request asked for (None only for an error built by hand)."""
        if isinstance(self.data, Mapping) and isinstance(self.data.get("uri"), str):
            return str(self.data["uri"])
        return self.requested_uri

    def __str__(self) -> str:
        text = super().__str__()
        uri = self.uri
        return f"{text}: {uri}" if uri and uri not in text else text


class HeaderMismatch(ServerError):
    """-32020: an HTTP header disagreed with the request body."""


class MissingClientCapability(ServerError):
    """-32021: the request needs a client capability that was not declared.

    `required_capabilities` is the server's `data.requiredCapabilities`.
    """

    @property
    def required_capabilities(self) -> Any:
        """The server's `data.requiredCapabilities` as sent (a capabilities
        object, such as ``{"sampling": {}}``); None when `data` has none."""
        if isinstance(self.data, Mapping):
            return self.data.get("requiredCapabilities")
        return None


class UnsupportedProtocolVersion(ServerError):
    """-32022: the server does not speak the version the request carried.

    `supported` lists the versions it does speak (possibly empty).
    """

    @property
    def supported(self) -> list[str]:
        """The protocol versions the server says it speaks, from its
        `data.supported` (strings only); empty when it listed none."""
        if isinstance(self.data, Mapping) and isinstance(self.data.get("supported"), list):
            return [v for v in self.data["supported"] if isinstance(v, str)]
        return []


class UrlElicitationRequired(ServerError):
    """-32042 (2025-11-25): the server will run the request only after the
    user completed the URL-mode elicitations it lists (a sign-in, a
    payment, a consent page).

    With a ``"url"`` input handler installed the client runs it for each
    elicitation and sends the request once more (the server refused it
    before doing anything, so that is safe whatever the tool does); this
    error reaches you when no such handler is installed, when the handler
    did not accept every elicitation, or when the server refused again.

    Example::

        try:
            client.call_tool("connect-calendar")
        except mcp_sync.UrlElicitationRequired as exc:
            for elicitation in exc.elicitations:
                print(elicitation["message"], elicitation["url"])
    """

    @property
    def elicitations(self) -> list[dict[str, Any]]:
        """The URL-mode elicitations from the error's `data.elicitations`
        (each with `mode`, `elicitationId`, `url` and `message`), in the
        server's order; entries that are not such an object are left out."""
        listed = self.data.get("elicitations") if isinstance(self.data, Mapping) else None
        if not isinstance(listed, list):
            return []
        return [dict(item) for item in listed
                if isinstance(item, Mapping) and item.get("mode", "url") == "url"
                and all(isinstance(item.get(key), str) for key in ("elicitationId", "url", "message"))]


_BY_CODE: dict[int, type[ServerError]] = {
    codes.METHOD_NOT_FOUND: MethodNotFound,
    codes.INVALID_PARAMS: InvalidParams,
    codes.RESOURCE_NOT_FOUND: ResourceNotFound,
    codes.HEADER_MISMATCH: HeaderMismatch,
    codes.MISSING_CLIENT_CAPABILITY: MissingClientCapability,
    codes.UNSUPPORTED_PROTOCOL_VERSION: UnsupportedProtocolVersion,
    codes.URL_ELICITATION_REQUIRED: UrlElicitationRequired,
}


#: How servers word "no such resource" in a -32602 answer (TypeScript SDK:
#: "Resource ... not found"; FastMCP: "Unknown resource: ...").
_NOT_FOUND_WORDING = re.compile(r"not\s+found|unknown\s+resource|no\s+such\s+resource|does\s+not\s+exist", re.IGNORECASE)


def server_error_from_wire(
    error: Any, *, method: str | None = None, params: Mapping[str, Any] | None = None,
    invalid_params_means_not_found: bool = True, server_capabilities: Mapping[str, Any] | None = None,
    protocol_version: str | None = None,
) -> ServerError:
    """Build the precise `ServerError` subclass for a wire `error` object.

    On `resources/read`, -32002 is `ResourceNotFound`, and so is -32602
    where the revision says so (2026-07-28; pass
    `invalid_params_means_not_found=False` for the initialize era) or where
    the error itself says so: its `data.uri` names a resource, or its
    message reads as not found. `params` are the request's, so that the
    error knows the URI asked for. With `server_capabilities` (what the
    server declared, in `protocol_version`), a -32601 for a method of a
    capability missing there (or null) says which
    (`MethodNotFound.capability`).

    A malformed error object still becomes a `ServerError` (code -32603 when
    the code is not an integer) so that nothing the server said is lost.
    """
    if not isinstance(error, Mapping):
        return ServerError(codes.INTERNAL_ERROR, f"malformed error object: {error!r}", method=method)
    code = error.get("code")
    if isinstance(code, bool) or not isinstance(code, int):
        return ServerError(codes.INTERNAL_ERROR, f"malformed error object: {dict(error)!r}", method=method)
    message = error.get("message")
    text = message if isinstance(message, str) else repr(message)
    data = error.get("data")
    cls = _BY_CODE.get(code, ServerError)
    if code == codes.INVALID_PARAMS and method == "resources/read" and (
        invalid_params_means_not_found
        or (isinstance(data, Mapping) and isinstance(data.get("uri"), str))
        or _NOT_FOUND_WORDING.search(text) is not None
    ):
        cls = ResourceNotFound
    exc = cls(code, text, data, method=method)
    if isinstance(exc, ResourceNotFound) and params is not None and isinstance(params.get("uri"), str):
        exc.requested_uri = params["uri"]
    elif isinstance(exc, MethodNotFound) and server_capabilities is not None and method is not None:
        capability = undeclared_capability(method, server_capabilities, protocol_version)
        if capability is not None:
            exc.capability = capability
            exc.args = (f"{exc.args[0]}; the server does not declare the {capability!r} capability "
                        f"(client.server_capabilities lists what it offers)",)
    return exc


# -- transport failures --------------------------------------------------------


class TransportError(McpError):
    """The channel to the server failed, so no answer came."""


class ConnectionClosed(TransportError):
    """The connection is closed: by `close()`, or because the server went away.

    `may_have_executed` is set on the error a call gets when its connection
    failed under it: True when the request had been sent (the server may
    have run it; it is not repeated for you), False when it had not. None
    when it does not apply (a call made after the connection was closed).
    """

    may_have_executed: bool | None = None
    """True when the failed request had been sent (the server may have run
    it), False when it had not; None when it does not apply."""


class ServerExited(ConnectionClosed):
    """The server process ended. `returncode` and `stderr_tail` say how.

    Attributes:
        returncode (int | None): The process's exit status (negative: killed
            by that signal); None when it was not known.
        stderr_tail (list[str]): The last lines (at most 20) the server wrote
            to its standard error, oldest first; empty when it wrote none.
    """

    def __init__(self, message: str, *, returncode: int | None, stderr_tail: list[str]) -> None:
        self.returncode = returncode
        self.stderr_tail = list(stderr_tail)
        super().__init__(message)


class ConnectError(TransportError):
    """The server could not be started or reached."""


class InvalidMessage(TransportError):
    """The server sent something that is not a JSON-RPC message."""


class MessageTooLarge(TransportError):
    """A message was larger than the configured limit (`limit`, in bytes).

    Attributes:
        limit (int): The limit that was exceeded, in bytes.
    """

    def __init__(self, message: str, *, limit: int) -> None:
        self.limit = limit
        super().__init__(message)


class HTTPStatusError(TransportError):
    """The HTTP server answered with a status and no JSON-RPC message.

    `status` is the HTTP status code, `body` the start of the body (text),
    `headers` the response headers (lower-cased names).

    Attributes:
        status (int): The HTTP status code, such as 500.
        body (str): The start of the response body (a preview of a few
            hundred characters, decoded as UTF-8); empty when there was none
            or it was not read.
        headers (dict[str, str]): The response headers, with lower-cased
            names.
    """

    def __init__(self, message: str, *, status: int, body: str = "", headers: Mapping[str, str] | None = None) -> None:
        self.status = status
        self.body = body
        self.headers = dict(headers or {})
        super().__init__(message)


class AuthenticationError(HTTPStatusError):
    """401 or 403: the server wants (other) credentials.

    `www_authenticate` is the server's challenge header, if any.
    """

    @property
    def www_authenticate(self) -> str | None:
        """The response's `WWW-Authenticate` header (the server's
        challenge); None when it sent none."""
        return self.headers.get("www-authenticate")


class SessionExpired(HTTPStatusError):
    """404 on a request that carried an initialize-era session id: the server
    ended the session. The client starts a new one and retries once."""


class AuthorizationError(TransportError):
    """Getting a token failed: discovery, metadata, registration, the
    authorization response or the token endpoint. No request reached the MCP
    server with a token. Messages never contain tokens, secrets or codes."""


class AuthorizationRequired(AuthorizationError):
    """A person must authorize this client and the client has no way to reach
    one (no redirect handler). The message says how to supply one."""


class OAuthError(AuthorizationError):
    """The authorization server answered with an OAuth error.

    `error` is its error code (for example ``invalid_grant``), `description`
    its `error_description` (or None), `status` the HTTP status (or None for
    an error returned through the redirect).

    Attributes:
        error (str): The OAuth `error` code, such as ``invalid_grant``.
        description (str | None): The server's `error_description`; None
            when it gave none.
        status (int | None): The HTTP status of the answer; None for an
            error that came back through the redirect.
    """

    def __init__(self, message: str, *, error: str, description: str | None = None, status: int | None = None) -> None:
        self.error = error
        self.description = description
        self.status = status
        super().__init__(message)


# -- local decisions -------------------------------------------------------------


class RequestTimeout(McpError, TimeoutError):
    """No answer arrived in time. The request was cancelled on the server.

    `timeout` is the limit in seconds that ran out; `max_total_timeout` is set
    when the overall limit (with `reset_timeout_on_progress`) stopped it.

    Attributes:
        method (str | None): The method of the request that timed out, such
            as ``"tools/call"``; None when the wait was not for one request
            (waiting for a reconnect, for example).
        timeout (float | None): The limit that ran out, in seconds; None when
            not known.
        max_total_timeout (float | None): The overall limit in seconds, when
            that is what stopped the call; otherwise None.
    """

    def __init__(
        self, message: str, *, method: str | None = None, timeout: float | None = None,
        max_total_timeout: float | None = None,
    ) -> None:
        self.method = method
        self.timeout = timeout
        self.max_total_timeout = max_total_timeout
        super().__init__(message)


class Overloaded(McpError):
    """The call was refused at once, before anything was sent: `max_in_flight`
    calls were in flight and `max_queued` calls were already waiting for a
    slot (or for the connection to come back). Safe to retry later.

    `max_in_flight` and `max_queued` are the limits that were reached
    (`max_in_flight` is None when only calls waiting for a reconnect are
    bounded).

    Attributes:
        max_in_flight (int | None): The limit on calls in flight that was
            reached; None when no such limit applied.
        max_queued (int | None): The limit on calls waiting that was reached.

    Example::

        try:
            client.call_tool("search", {"q": "mcp"})
        except mcp_sync.Overloaded:
            return 503          # shed the request; the client stays healthy
    """

    def __init__(self, message: str, *, max_in_flight: int | None = None, max_queued: int | None = None) -> None:
        self.max_in_flight = max_in_flight
        self.max_queued = max_queued
        super().__init__(message)


class ProtocolError(McpError):
    """The server broke a rule of the protocol."""


class VersionNegotiationError(ProtocolError):
    """The client and server share no protocol version.

    `requested` is what the client asked for or allowed; `negotiated` is what
    an initialize-era server answered; `supported` what a server listed.

    Attributes:
        requested (Any): What the client asked for: the version it sent to
            `initialize` (a string), or the list of versions it allows.
        negotiated (str | None): The version an initialize-era server
            answered with; None when there was no such answer.
        supported (list[str] | None): The versions the server listed as
            supported; None when no such list came.
    """

    def __init__(
        self, message: str, *, requested: Any = None, negotiated: str | None = None,
        supported: list[str] | None = None,
    ) -> None:
        self.requested = requested
        self.negotiated = negotiated
        self.supported = supported
        super().__init__(message)


class InvalidResult(ProtocolError):
    """A result the client cannot accept (wrong shape, unknown `resultType`)."""


class OutputValidationError(InvalidResult):
    """`structuredContent` does not match the tool's `outputSchema`.

    `result` is the raw result dict; `errors` the validator's messages.

    Attributes:
        result (Mapping[str, Any]): The tool's result exactly as received.
        errors (list[str]): What is wrong, one message per problem found
            (``"structuredContent is missing"`` when there is none).
    """

    def __init__(self, message: str, *, result: Mapping[str, Any], errors: list[str]) -> None:
        self.result = result
        self.errors = errors
        super().__init__(message)


class PaginationError(ProtocolError):
    """A list did not end: a cursor repeated, or `max_pages` ran out."""


class UnsupportedMethod(McpError):
    """The negotiated protocol version has no such method, so nothing was sent.

    For example `ping()` on a 2026-07-28 connection, or `discover()` on an
    initialize-era one. `method` and `protocol_version` say which.

    Attributes:
        method (str): The method that was not sent, such as ``"ping"``.
        protocol_version (str): The protocol version the connection
            negotiated, such as ``"2026-07-28"``.
    """

    def __init__(self, method: str, protocol_version: str, hint: str = "") -> None:
        self.method = method
        self.protocol_version = protocol_version
        extra = f"; {hint}" if hint else ""
        super().__init__(f"{method} is not part of protocol version {protocol_version}{extra}")


class InputRequired(McpError):
    """The server needs input (elicitation, sampling, roots) that the client
    did not supply: no handler, `answer_input=False`, or one of the
    subclasses below.

    `result` is the last `input_required` result exactly as received;
    `input_requests` and `request_state` are its fields. To answer by hand,
    repeat the call with `input_responses=` and `request_state=`::

        try:
            client.call_tool("book_table", {"date": "friday"})
        except mcp_sync.InputRequired as exc:
            answers = {key: {"action": "accept", "content": {"name": "Ada", "guests": 2}}
                       for key in exc.input_requests}
            client.call_tool("book_table", {"date": "friday"}, **exc.retry_with(answers))

    Attributes:
        result (Mapping[str, Any]): The last `input_required` result, exactly
            as received.
    """

    def __init__(self, message: str, *, result: Mapping[str, Any]) -> None:
        self.result = result
        super().__init__(message)

    @property
    def input_requests(self) -> dict[str, Any]:
        """The result's `inputRequests`: each request the server makes (a
        JSON-RPC request object), by the key its answer must be sent under;
        empty when there are none."""
        requests = self.result.get("inputRequests")
        return dict(requests) if isinstance(requests, Mapping) else {}

    @property
    def request_state(self) -> str | None:
        """The result's opaque `requestState`, to be sent back unchanged with
        the answers; None when the server sent none."""
        state = self.result.get("requestState")
        return state if isinstance(state, str) else None

    def retry_with(self, input_responses: Mapping[str, Any] | None) -> dict[str, Any]:
        """The options that re-send the call with these answers and the
        server's `requestState` (exactly as received, or none).

        Args:
            input_responses: The answers, by the key of each of
                `input_requests`; None sends none.

        Returns:
            Keyword arguments for the same call: ``input_responses=`` and,
            when the server sent one, ``request_state=``.
        """
        options: dict[str, Any] = {"input_responses": dict(input_responses) if input_responses is not None else None}
        if self.request_state is not None:
            options["request_state"] = self.request_state
        return options


class NoInputHandler(InputRequired):
    """The server asked for kinds of input with no handler installed
    (`missing`, e.g. ``["form"]``). No handler ran.

    Attributes:
        missing (list[str]): The kinds with no handler, sorted: some of
            ``"form"``, ``"url"``, ``"sampling"`` and ``"roots"``.
    """

    def __init__(self, message: str, *, result: Mapping[str, Any], missing: list[str]) -> None:
        self.missing = missing
        super().__init__(message, result=result)


class InputHandlerError(InputRequired):
    """A handler raised, or answered something the protocol does not allow;
    nothing was sent for it. `handler` is its kind, `problem` says what.

    Attributes:
        handler (str): The kind of the handler that failed: ``"form"``,
            ``"url"``, ``"sampling"`` or ``"roots"``.
        problem (str): What went wrong: the `repr` of the exception the
            handler raised, or why its answer was refused.
    """

    def __init__(self, message: str, *, result: Mapping[str, Any], handler: str, problem: str) -> None:
        self.handler = handler
        self.problem = problem
        super().__init__(message, result=result)


class InputRoundsExceeded(InputRequired):
    """The server still asked for input after `rounds` answered rounds.

    Attributes:
        rounds (int): How many rounds of input were answered (the
            `max_input_rounds` limit that was reached).
    """

    def __init__(self, message: str, *, result: Mapping[str, Any], rounds: int) -> None:
        self.rounds = rounds
        super().__init__(message, result=result)


class MalformedInputRequest(InputRequired, ProtocolError):
    """An `input_required` result that cannot be answered: nothing to answer
    and no state, or a request without the parameters of its kind."""


class ToolError(McpError):
    """A tool ran and reported failure (`isError: true`); see `raise_for_error()`.

    `result` is the `CallToolResult`.

    Attributes:
        result (CallToolResult): The tool's result, with `is_error` True;
            its `content` usually says what went wrong.
    """

    def __init__(self, message: str, *, result: Any) -> None:
        self.result = result
        super().__init__(message)


class TaskCancelled(McpError):
    """The task was cancelled (by `Task.cancel()`, another client, or the
    server) before it produced a result.

    Example::

        try:
            task.wait()
        except mcp_sync.TaskCancelled as exc:
            print("task", exc.task_id, "was cancelled")

    Attributes:
        task_id (str): The task's id.
        status_message (str | None): The server's `statusMessage`, if any.
    """

    def __init__(self, message: str, *, task_id: str, status_message: str | None = None) -> None:
        self.task_id = task_id
        self.status_message = status_message
        super().__init__(message)


class ConfigError(McpError, ValueError):
    """A server config file (or mapping) that cannot be used: bad JSON, an
    unknown server name, an entry with neither `command` nor `url`, an
    unknown `type`, a missing environment variable. The message names the
    file and the server. See `mcp_sync.load_config()`."""


class RoutingError(McpError, LookupError):
    """A `ClientGroup` cannot tell which server a name belongs to: no server
    offers it (`candidates` is empty), or several do (`candidates` lists the
    qualified names to choose from).

    Attributes:
        candidates (list[str]): The qualified names (for a resource, the
            server names) to choose from; empty when no server offers it.
    """

    def __init__(self, message: str, *, candidates: list[str] | None = None) -> None:
        self.candidates = list(candidates or [])
        super().__init__(message)


class ExtensionNotDeclared(McpError):
    """The server did not declare the extension (or the extension setting)
    a call needs, so nothing was sent.

    Attributes:
        extension (str): The extension's identifier, such as
            ``"io.modelcontextprotocol/skills"``.
        setting (str | None): The setting that was missing (such as
            ``"directoryRead"``), or None when the extension itself was.
    """

    def __init__(self, extension: str, setting: str | None, message: str) -> None:
        self.extension = extension
        self.setting = setting
        super().__init__(message)


class SkillVerificationError(McpError):
    """A file of a skill failed a check of the skill's entry, so its content
    was not returned (Skills extension, `client.skills.read()`).

    Attributes:
        check (str): Which check: ``"unlisted"`` (the entry does not list
            the file; nothing was read), ``"size"``, ``"digest"``,
            ``"frontmatter"`` (SKILL.md's frontmatter differs from the
            entry's, or cannot be checked) or ``"limits"`` (over 512 files
            or 16 MiB per skill).
        skill (Skill): The entry the file was checked against.
        uri (str): The file's URI.
    """

    def __init__(self, check: str, skill: Any, uri: str, message: str) -> None:
        self.check = check
        self.skill = skill
        self.uri = uri
        super().__init__(message)


_E = TypeVar("_E", bound=BaseException)


def copy_error(exc: _E) -> _E:
    """A fresh copy of an error, attributes included, so that threads never
    share one (raising the same instance from many threads tangles its
    traceback); it has no traceback of its own until raised.

    The package's errors are rebuilt without their constructor, which takes
    keywords that `copy.copy` cannot give it. Any other exception (one a
    callback or the system raised) is rebuilt by `copy.copy`, which calls
    its constructor: the built-in classes keep state of theirs there
    (`SystemExit.code`, `UnicodeDecodeError.start`); one that cannot be
    copied so is returned as it is."""
    if isinstance(exc, McpError):
        new = exc.__class__.__new__(exc.__class__, *exc.args)
        new.__dict__.update(exc.__dict__)
        notes = exc.__dict__.get("__notes__")
        if isinstance(notes, list):  # a note one thread adds must not show on another's copy
            new.__dict__["__notes__"] = list(notes)
        new.args = exc.args
        new.__cause__ = exc.__cause__
        new.__suppress_context__ = exc.__suppress_context__
        return new
    try:
        return copy.copy(exc)
    except Exception:  # noqa: BLE001 - an exception that cannot be copied is raised as it is
        return exc
