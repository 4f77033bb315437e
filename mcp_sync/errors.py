"""Every exception `mcp_sync` raises, in one hierarchy.

Catch the broad class or the precise one, as with `requests.exceptions`::

    McpError
    ├── ServerError                 the server answered with a JSON-RPC error
    │   ├── MethodNotFound          -32601
    │   ├── InvalidParams           -32602
    │   │   └── ResourceNotFound    -32602 on resources/read (2026-07-28), or -32002
    │   ├── HeaderMismatch          -32020
    │   ├── MissingClientCapability -32021
    │   └── UnsupportedProtocolVersion  -32022
    ├── TransportError              the channel failed; no answer came
    │   ├── ConnectionClosed        closed by close(), or the server went away
    │   │   └── ServerExited        the server process ended
    │   ├── ConnectError            the server could not be started or reached
    │   ├── InvalidMessage          the server sent something that is not JSON-RPC
    │   ├── MessageTooLarge         a message over the configured size limit
    │   └── HTTPStatusError         an HTTP answer with no JSON-RPC message in it
    │       ├── AuthenticationError 401 or 403
    │       └── SessionExpired      404 for an initialize-era session
    ├── RequestTimeout              no answer in time (also a TimeoutError)
    ├── ProtocolError               the server broke a rule of the protocol
    │   ├── VersionNegotiationError no protocol version both sides speak
    │   ├── InvalidResult           a result the client cannot accept
    │   │   └── OutputValidationError  structuredContent fails the tool's outputSchema
    │   └── PaginationError         a repeated cursor, or too many pages
    ├── UnsupportedMethod           the negotiated version has no such method
    ├── InputRequired               the server needs input the client cannot supply
    └── ToolError                   raised by CallToolResult.raise_for_error()

Only `ServerError` and its subclasses stand for something the server sent;
every other class is decided locally, so a local failure never looks like an
error from the peer. Bad arguments from the caller raise the ordinary
`TypeError`/`ValueError` at once, before anything is sent.
"""

from __future__ import annotations

from typing import Any, Mapping

__all__ = [
    "McpError",
    "ServerError",
    "MethodNotFound",
    "InvalidParams",
    "ResourceNotFound",
    "HeaderMismatch",
    "MissingClientCapability",
    "UnsupportedProtocolVersion",
    "TransportError",
    "ConnectionClosed",
    "ServerExited",
    "ConnectError",
    "InvalidMessage",
    "MessageTooLarge",
    "HTTPStatusError",
    "AuthenticationError",
    "SessionExpired",
    "RequestTimeout",
    "ProtocolError",
    "VersionNegotiationError",
    "InvalidResult",
    "OutputValidationError",
    "PaginationError",
    "UnsupportedMethod",
    "InputRequired",
    "ToolError",
    "server_error_from_wire",
]


class McpError(Exception):
    """The root of every exception this library raises."""


# -- errors the server sent -------------------------------------------------


def _kind_of(code: int) -> str:
    if code in (-32700, -32600):
        return "json_rpc"
    if code == -32603:
        return "execution"
    return "protocol"


class ServerError(McpError):
    """A JSON-RPC error response, with `code`, `message` and `data` exactly as sent.

    `kind` sorts the code: ``"json_rpc"`` (-32700, -32600), ``"execution"``
    (-32603) or ``"protocol"`` (everything else). `method` names the request
    that failed.

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
    """-32601: the server does not offer this method."""


class InvalidParams(ServerError):
    """-32602: the server refused the request's parameters."""


class ResourceNotFound(InvalidParams):
    """The resource does not exist: -32602 on `resources/read` (2026-07-28),
    or -32002 (the initialize era's code). `uri` is the resource asked for."""

    @property
    def uri(self) -> str | None:
        if isinstance(self.data, Mapping) and isinstance(self.data.get("uri"), str):
            return str(self.data["uri"])
        return None

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
        if isinstance(self.data, Mapping):
            return self.data.get("requiredCapabilities")
        return None


class UnsupportedProtocolVersion(ServerError):
    """-32022: the server does not speak the version the request carried.

    `supported` lists the versions it does speak (possibly empty).
    """

    @property
    def supported(self) -> list[str]:
        if isinstance(self.data, Mapping) and isinstance(self.data.get("supported"), list):
            return [v for v in self.data["supported"] if isinstance(v, str)]
        return []


_BY_CODE: dict[int, type[ServerError]] = {
    -32601: MethodNotFound,
    -32602: InvalidParams,
    -32002: ResourceNotFound,
    -32020: HeaderMismatch,
    -32021: MissingClientCapability,
    -32022: UnsupportedProtocolVersion,
}


def server_error_from_wire(
    error: Any, *, method: str | None = None, invalid_params_means_not_found: bool = True,
) -> ServerError:
    """Build the precise `ServerError` subclass for a wire `error` object.

    -32602 on `resources/read` is `ResourceNotFound` where the revision says
    so (2026-07-28; pass `invalid_params_means_not_found=False` for the
    initialize era, whose not-found code is -32002).

    A malformed error object still becomes a `ServerError` (code -32603 when
    the code is not an integer) so that nothing the server said is lost.
    """
    if not isinstance(error, Mapping):
        return ServerError(-32603, f"malformed error object: {error!r}", method=method)
    code = error.get("code")
    if isinstance(code, bool) or not isinstance(code, int):
        return ServerError(-32603, f"malformed error object: {dict(error)!r}", method=method)
    message = error.get("message")
    text = message if isinstance(message, str) else repr(message)
    cls = _BY_CODE.get(code, ServerError)
    if code == -32602 and method == "resources/read" and invalid_params_means_not_found:
        cls = ResourceNotFound
    return cls(code, text, error.get("data"), method=method)


# -- transport failures --------------------------------------------------------


class TransportError(McpError):
    """The channel to the server failed, so no answer came."""


class ConnectionClosed(TransportError):
    """The connection is closed: by `close()`, or because the server went away."""


class ServerExited(ConnectionClosed):
    """The server process ended. `returncode` and `stderr_tail` say how."""

    def __init__(self, message: str, *, returncode: int | None, stderr_tail: list[str]) -> None:
        self.returncode = returncode
        self.stderr_tail = list(stderr_tail)
        super().__init__(message)


class ConnectError(TransportError):
    """The server could not be started or reached."""


class InvalidMessage(TransportError):
    """The server sent something that is not a JSON-RPC message."""


class MessageTooLarge(TransportError):
    """A message was larger than the configured limit (`limit`, in bytes)."""

    def __init__(self, message: str, *, limit: int) -> None:
        self.limit = limit
        super().__init__(message)


class HTTPStatusError(TransportError):
    """The HTTP server answered with a status and no JSON-RPC message.

    `status` is the HTTP status code, `body` the start of the body (text),
    `headers` the response headers (lower-cased names).
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
        return self.headers.get("www-authenticate")


class SessionExpired(HTTPStatusError):
    """404 on a request that carried an initialize-era session id: the server
    ended the session. The client starts a new one and retries once."""


# -- local decisions -------------------------------------------------------------


class RequestTimeout(McpError, TimeoutError):
    """No answer arrived in time. The request was cancelled on the server.

    `timeout` is the limit in seconds that ran out; `max_total_timeout` is set
    when the overall limit (with `reset_timeout_on_progress`) stopped it.
    """

    def __init__(
        self, message: str, *, method: str | None = None, timeout: float | None = None,
        max_total_timeout: float | None = None,
    ) -> None:
        self.method = method
        self.timeout = timeout
        self.max_total_timeout = max_total_timeout
        super().__init__(message)


class ProtocolError(McpError):
    """The server broke a rule of the protocol."""


class VersionNegotiationError(ProtocolError):
    """The client and server share no protocol version.

    `requested` is what the client asked for or allowed; `negotiated` is what
    an initialize-era server answered; `supported` what a server listed.
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
    """

    def __init__(self, method: str, protocol_version: str, hint: str = "") -> None:
        self.method = method
        self.protocol_version = protocol_version
        extra = f"; {hint}" if hint else ""
        super().__init__(f"{method} is not part of protocol version {protocol_version}{extra}")


class InputRequired(McpError):
    """The server needs input (elicitation, sampling, roots) the client cannot supply.

    `result` is the `input_required` result as received.
    """

    def __init__(self, message: str, *, result: Mapping[str, Any]) -> None:
        self.result = result
        super().__init__(message)


class ToolError(McpError):
    """A tool ran and reported failure (`isError: true`); see `raise_for_error()`.

    `result` is the `CallToolResult`.
    """

    def __init__(self, message: str, *, result: Any) -> None:
        self.result = result
        super().__init__(message)
