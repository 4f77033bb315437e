"""OpenTelemetry spans and metrics for requests, after the semantic
conventions for MCP (optional: the `otel` extra).

What it owns: deciding once per client whether anything is traced, the
client span of each request (named `{mcp.method.name} {target}`), a child
span for each `input_required` round after the first, the W3C trace context
a request carries in `_meta`, and the `mcp.client.operation.duration`
histogram. What it must not know: how a request is built or sent (that is
the request pipeline's, which calls this hook around each request), nor
anything of the transports beyond the kind of target.

The cost when nothing is traced is nil: `for_client()` answers None when
`opentelemetry` is not importable or no provider is configured (the API's
default proxy or no-op ones), and the client then never calls here again.
The decision is taken when the client is built: configure OpenTelemetry
before connecting, or pass `tracer_provider=`/`meter_provider=`.

Spans of one request, on the calling thread (where the whole request runs,
input handlers included)::

    tools/call book_table          CLIENT  round 1 (jsonrpc.request.id 2)
    └── tools/call book_table      CLIENT  round 2 (jsonrpc.request.id 3)

The outer span covers the whole user-visible call; an event
`mcp_sync.input_required` marks each round the server asked for input. Each
round carries the context of its own span in `_meta`, so the server's span
for each round is a child of the span that sent it.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Callable
from urllib.parse import urlsplit

from .errors import ServerError

if TYPE_CHECKING:
    from .pipeline import Call

#: What a request's spans are told of the session when they end: the
#: protocol version and the HTTP session id (each None when unknown).
Describe = Callable[[], "tuple[str | None, str | None]"]

__all__ = ["for_client", "handshake", "ClientTracer", "DURATION_BUCKETS"]

#: The bucket boundaries the conventions give for the duration histogram.
DURATION_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)
#: What the span name may end with, per method (a resource URI is left out
#: of the name by default, as the conventions ask: it is high-cardinality).
_TARGET_OF = {"tools/call": ("name", "gen_ai.tool.name"), "prompts/get": ("name", "gen_ai.prompt.name")}
_URI_METHODS = frozenset({"resources/read", "resources/subscribe", "resources/unsubscribe"})
_NETWORK = {"stdio": "pipe", "streamable-http": "tcp", "sse": "tcp"}
_W3C_KEYS = ("traceparent", "tracestate", "baggage")

#: Set once `opentelemetry` failed to import in this process.
_missing = False
#: The request whose ids are being drawn on this thread (see `_NotingIds`).
_current: contextvars.ContextVar[_Traced | None] = contextvars.ContextVar("mcp_sync_traced", default=None)


def for_client(kind: str, url: Any, describe: Describe, tracer_provider: Any = None,
               meter_provider: Any = None) -> ClientTracer | None:
    """The client's tracer, or None when nothing would be recorded: the
    package is missing, or neither a tracer nor a meter provider is set
    (explicitly, or globally with the OpenTelemetry API)."""
    global _missing
    if _missing and tracer_provider is None and meter_provider is None:
        return None
    try:
        from opentelemetry import metrics, trace
    except ImportError:
        if tracer_provider is not None or meter_provider is not None:
            raise ValueError("tracer_provider/meter_provider need the opentelemetry-api package "
                             "(pip install 'mcp-sync-client[otel]')") from None
        # Python does not remember a failed import: without this, every
        # new client would search the path for the package again.
        _missing = True
        return None
    if tracer_provider is None:
        tracer_provider = trace.get_tracer_provider()
        if isinstance(tracer_provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
            tracer_provider = None
    elif not callable(getattr(tracer_provider, "get_tracer", None)):
        raise TypeError("tracer_provider must be an OpenTelemetry TracerProvider")
    if meter_provider is None:
        meter_provider = metrics.get_meter_provider()
        # The API's default is a proxy (a private class) until one is set.
        if isinstance(meter_provider, metrics.NoOpMeterProvider) or type(meter_provider).__name__ == "_ProxyMeterProvider":
            meter_provider = None
    elif not callable(getattr(meter_provider, "get_meter", None)):
        raise TypeError("meter_provider must be an OpenTelemetry MeterProvider")
    if tracer_provider is None and meter_provider is None:
        return None
    return ClientTracer(kind, url, describe, tracer_provider, meter_provider)


class ClientTracer:
    """Traces a client's requests; built by `for_client()` when something
    records. Shared by the client's threads: per-request state lives in a
    `_Traced` of its own."""

    def __init__(self, kind: str, url: Any, describe: Describe, tracer_provider: Any, meter_provider: Any) -> None:
        from opentelemetry import propagate, trace

        from ._version import __version__

        self._trace = trace
        self._propagate = propagate
        self.tracer = tracer_provider.get_tracer("mcp_sync", __version__) if tracer_provider is not None else None
        self.duration = None
        if meter_provider is not None:
            meter = meter_provider.get_meter("mcp_sync", __version__)
            self.duration = meter.create_histogram(
                "mcp.client.operation.duration", unit="s",
                description="The duration of the MCP request as observed on the client, from sending it "
                            "until its final response",
                explicit_bucket_boundaries_advisory=list(DURATION_BUCKETS))
        # What does not change for the life of the client.
        self.describe = describe
        self.static: dict[str, Any] = {}
        if kind in _NETWORK:
            self.static["network.transport"] = _NETWORK[kind]
        if isinstance(url, str):
            self.static["network.protocol.name"] = "http"
            parts = urlsplit(url)
            if parts.hostname:
                self.static["server.address"] = parts.hostname
                self.static["server.port"] = parts.port or (443 if parts.scheme == "https" else 80)

    def noting_ids(self, ids: Iterator[int]) -> Iterator[int]:
        """The client's request-id counter, noting each id drawn for a traced
        request on that request's span (`jsonrpc.request.id`). The engine
        draws the id on the caller's thread when it sends, so the id of the
        last attempt is the one kept."""
        return _NotingIds(ids)

    def request(self, method: str, params: Mapping[str, Any] | None,
                run: Callable[[Callable[[Call], dict[str, Any]]], dict[str, Any]],
                send_once: Callable[[Call], dict[str, Any]]) -> dict[str, Any]:
        """Run a request as `run(send_once)`, each round in its span."""
        traced = _Traced(self, method, params, send_once)
        return traced.run(run)

    def handshake(self, method: str, version: str) -> AbstractContextManager[None]:
        """The span of a handshake request, proposing `version`."""
        traced = _Traced(self, method, None, None)
        traced.attributes["mcp.protocol.version"] = version
        return traced.scope()


def handshake(tracer: ClientTracer | None, method: str, version: str) -> AbstractContextManager[Any]:
    """A span for `server/discover` or `initialize`, which the client sends
    outside its request path (nothing when `tracer` is None). They carry no
    trace context: the handshake builds its own `_meta`."""
    if tracer is None:
        return contextlib.nullcontext()
    return tracer.handshake(method, version)


class _NotingIds:
    def __init__(self, ids: Iterator[int]) -> None:
        self._ids = ids

    def __iter__(self) -> Iterator[int]:
        return self

    def __next__(self) -> int:
        request_id = next(self._ids)
        traced = _current.get()
        if traced is not None:
            traced.sent(request_id)
        return request_id


class _Traced:
    """One user-visible request: its span, its rounds, its outcome."""

    def __init__(self, tracer: ClientTracer, method: str, params: Mapping[str, Any] | None,
                 send_once: Callable[[Call], dict[str, Any]] | None) -> None:
        self.tracer = tracer
        self.send_round = send_once
        self.method = method
        self.name = method
        attributes: dict[str, Any] = {"mcp.method.name": method, **tracer.static}
        params = params or {}
        target = _TARGET_OF.get(method)
        if target is not None and isinstance(params.get(target[0]), str):
            attributes[target[1]] = params[target[0]]
            self.name = f"{method} {params[target[0]]}"
        if method == "tools/call":
            attributes["gen_ai.operation.name"] = "execute_tool"
        if method in _URI_METHODS and isinstance(params.get("uri"), str):
            attributes["mcp.resource.uri"] = params["uri"]
        self.attributes = attributes
        self.outer: Any = None  # the request's span (None: metrics only)
        self.span: Any = None  # the span of the round being sent
        self.rounds = 0
        self.error: dict[str, Any] = {}  # error.type (and the code) once it failed

    def run(self, run: Callable[[Callable[[Call], dict[str, Any]]], dict[str, Any]]) -> dict[str, Any]:
        with self.scope():
            result = run(self.send_once)
            if _is_tool_error(self.method, result):
                # A failed tool answers with a result, not an error: the
                # conventions still count it as one.
                self.error = {"error.type": "tool_error"}
            return result

    @contextlib.contextmanager
    def scope(self) -> Iterator[None]:
        """The request's span, current on this thread for the body, ended
        with the outcome (`self.error`, or the exception raised); and its
        duration recorded."""
        tracer = self.tracer
        trace = tracer._trace
        started = time.monotonic()
        outer = None
        if tracer.tracer is not None:
            outer = tracer.tracer.start_span(self.name, kind=trace.SpanKind.CLIENT, attributes=self.attributes)
        self.outer = self.span = outer
        token = _current.set(self)
        try:
            with _active(trace, outer):
                yield
            if self.error and outer is not None:
                outer.set_status(trace.Status(trace.StatusCode.ERROR))
        except BaseException as exc:
            self.error = _error_attributes(exc)
            if outer is not None:
                _fail(trace, outer, exc, self.error)
            raise
        finally:
            _current.reset(token)
            session = self._session_attributes()
            if outer is not None:
                outer.set_attributes({**session, **self.error})
                outer.end()
            if tracer.duration is not None:
                metric = {**self.attributes, **session, **self.error}
                # Attributes of one call only are kept off the metric.
                metric.pop("mcp.session.id", None)
                metric.pop("mcp.resource.uri", None)
                tracer.duration.record(time.monotonic() - started, metric)

    def send_once(self, call: Call) -> dict[str, Any]:
        """One round: the first in the request's own span, each later one
        (after the server asked for input) in a child span."""
        self.rounds += 1
        outer = self.outer
        if self.rounds == 1 or outer is None:
            return self._send(call, outer)
        trace = self.tracer._trace
        assert self.tracer.tracer is not None
        child = self.tracer.tracer.start_span(
            self.name, kind=trace.SpanKind.CLIENT,
            attributes={**self.attributes, "mcp_sync.input.round": self.rounds})
        self.span = child
        try:
            with _active(trace, child):
                result = self._send(call, child)
            if _is_tool_error(self.method, result):
                child.set_attribute("error.type", "tool_error")
                child.set_status(trace.Status(trace.StatusCode.ERROR))
            return result
        except BaseException as exc:
            _fail(trace, child, exc, _error_attributes(exc))
            raise
        finally:
            child.set_attributes(self._session_attributes())
            child.end()
            self.span = outer

    def _send(self, call: Call, span: Any) -> dict[str, Any]:
        if span is not None:
            call = self._with_context(call)
        assert self.send_round is not None
        result = self.send_round(call)
        outer = self.outer
        if outer is not None and result.get("resultType") == "input_required":
            asked = result.get("inputRequests")
            methods = sorted({str(r.get("method")) for r in asked.values() if isinstance(r, Mapping)}) \
                if isinstance(asked, Mapping) else []
            outer.add_event("mcp_sync.input_required",
                            {"mcp_sync.input.round": self.rounds, "mcp_sync.input.methods": methods})
        return result

    def _with_context(self, call: Call) -> Call:
        """The call with this round's context in `_meta`, unless the caller
        set one (`trace_context=`, or `traceparent` in `meta=` or the
        params' `_meta`): the caller's wins."""
        options = call.options
        if options.get("trace_context") is not None:
            return call
        for layer in (options.get("meta"), (call.params or {}).get("_meta")):
            if isinstance(layer, Mapping) and "traceparent" in layer:
                return call
        carrier: dict[str, str] = {}
        self.tracer._propagate.inject(carrier)
        # Only the W3C keys go in `_meta` (SEP-414); other propagators' are left out.
        context = {key: carrier[key] for key in _W3C_KEYS if key in carrier}
        if "traceparent" not in context:
            return call
        return call._replace(options={**options, "trace_context": context})

    def sent(self, request_id: int) -> None:
        if self.span is not None:
            self.span.set_attribute("jsonrpc.request.id", str(request_id))

    def _session_attributes(self) -> dict[str, Any]:
        found: dict[str, Any] = {}
        version, session_id = self.tracer.describe()
        if version is not None:
            found["mcp.protocol.version"] = version
        if session_id:
            found["mcp.session.id"] = session_id
        return found


def _active(trace: Any, span: Any) -> AbstractContextManager[Any]:
    """The span as the current one while a round runs (nothing for None)."""
    if span is None:
        return contextlib.nullcontext()
    manager: AbstractContextManager[Any] = trace.use_span(
        span, end_on_exit=False, record_exception=False, set_status_on_exception=False)
    return manager


def _is_tool_error(method: str, result: Mapping[str, Any]) -> bool:
    return method == "tools/call" and result.get("isError") is True


def _error_attributes(exc: BaseException) -> dict[str, Any]:
    """`error.type` per the conventions: the JSON-RPC error code when the
    server answered one (and `rpc.response.status_code`), else the
    exception's fully qualified class name."""
    if isinstance(exc, ServerError):
        return {"error.type": str(exc.code), "rpc.response.status_code": str(exc.code)}
    kind = type(exc)
    return {"error.type": f"{kind.__module__}.{kind.__qualname__}"}


def _fail(trace: Any, span: Any, exc: BaseException, error: Mapping[str, Any]) -> None:
    span.set_attributes(dict(error))
    # The status description is the JSON-RPC error's message when there is one.
    description = exc.message if isinstance(exc, ServerError) else str(exc)
    span.set_status(trace.Status(trace.StatusCode.ERROR, description))
    span.record_exception(exc)
