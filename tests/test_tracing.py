"""OpenTelemetry spans and metrics (`mcp_sync.tracing`), with the SDK's
in-memory exporter and metric reader.

Every test passes its own providers (`tracer_provider=`, `meter_provider=`):
the API lets the global provider be set only once per process, so nothing
here sets it. Where the global provider matters, the API's getter is
patched for the one test (monkeypatch restores it).
"""

from __future__ import annotations

import re
import sys
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import mcp_sync
from mcp_sync import tracing
from mcp_sync.testing import HTTPServer, Server, ToolContext, demo_server
from tests.helpers import demo_command

TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$")


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


@pytest.fixture
def meter():
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    yield provider, reader
    provider.shutdown()


def form(params: dict[str, Any]) -> dict[str, Any]:
    return {"action": "accept", "content": {"name": "Ada", "guests": 3}}


HANDSHAKE = ("server/discover", "initialize")


def requests_of(exporter: InMemorySpanExporter) -> list[Any]:
    """The finished spans of requests, the handshake's left out."""
    return [span for span in exporter.get_finished_spans() if span.name not in HANDSHAKE]


def finished(exporter: InMemorySpanExporter) -> dict[str, Any]:
    """The finished spans of requests by name (each name once in these tests)."""
    found = {}
    for span in requests_of(exporter):
        assert span.name not in found, f"two spans named {span.name}"
        found[span.name] = span
    return found


def traceparent_of(span: Any) -> str:
    """The trace and span ids a traceparent names (the flags left out)."""
    return f"{span.context.trace_id:032x}-{span.context.span_id:016x}"


def ids_in(traceparent: str | None) -> str | None:
    match = TRACEPARENT.match(traceparent or "")
    return f"{match[1]}-{match[2]}" if match else None


def durations(reader: InMemoryMetricReader) -> list[Any]:
    data = reader.get_metrics_data()
    points = []
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == "mcp.client.operation.duration":
                    assert metric.unit == "s"
                    points.extend(metric.data.data_points)
    return points


def test_names_and_attributes_follow_the_conventions(spans, meter):
    provider, exporter = spans
    with mcp_sync.connect(demo_server(), tracer_provider=provider, meter_provider=meter[0]) as client:
        client.call_tool("add", {"a": 2, "b": 3})
        client.get_prompt("greet", {"name": "Ada"})
        client.read_resource("demo://readme")
        client.list_tools()
    found = finished(exporter)
    assert set(found) == {"tools/call add", "prompts/get greet", "resources/read", "tools/list"}
    for span in found.values():
        assert span.kind is SpanKind.CLIENT
        assert span.status.status_code is StatusCode.UNSET
        assert span.attributes["mcp.protocol.version"] == "2026-07-28"
        assert span.attributes["jsonrpc.request.id"].isdigit()
        assert "network.transport" not in span.attributes  # in-process: neither a pipe nor TCP
    tool = found["tools/call add"].attributes
    assert tool["mcp.method.name"] == "tools/call"
    assert tool["gen_ai.tool.name"] == "add"
    assert tool["gen_ai.operation.name"] == "execute_tool"
    assert found["prompts/get greet"].attributes["gen_ai.prompt.name"] == "greet"
    # The URI is an attribute, kept out of the span name (high cardinality).
    assert found["resources/read"].attributes["mcp.resource.uri"] == "demo://readme"
    assert "gen_ai.operation.name" not in found["tools/list"].attributes
    ids = [int(span.attributes["jsonrpc.request.id"]) for span in found.values()]
    assert len(set(ids)) == 4
    points = durations(meter[1])
    by_method = {(p.attributes["mcp.method.name"], p.attributes.get("gen_ai.tool.name")): p for p in points}
    assert by_method[("tools/call", "add")].count == 1
    assert by_method[("tools/list", None)].count == 1
    assert list(by_method[("tools/call", "add")].explicit_bounds) == list(tracing.DURATION_BUCKETS)
    assert all("mcp.resource.uri" not in p.attributes for p in points)


def test_stdio_is_a_pipe(spans):
    provider, exporter = spans
    with mcp_sync.connect(demo_command(), tracer_provider=provider) as client:
        client.call_tool("echo", {"text": "hi"})
    span = finished(exporter)["tools/call echo"]
    assert span.attributes["network.transport"] == "pipe"
    assert "server.address" not in span.attributes


def test_http_attributes_and_the_context_the_server_sees(spans):
    provider, exporter = spans
    with HTTPServer(demo_server()) as httpd:
        with mcp_sync.connect(httpd.url, protocol="2025-11-25", tracer_provider=provider) as client:
            client.call_tool("echo", {"text": "hi"})
            session_id = client.session_id
        sent = [r.json for r in httpd.requests if isinstance(r.json, dict) and r.json.get("method") == "tools/call"]
    span = finished(exporter)["tools/call echo"]
    assert session_id and span.attributes["mcp.session.id"] == session_id
    assert span.attributes["mcp.protocol.version"] == "2025-11-25"
    assert span.attributes["network.transport"] == "tcp"
    assert span.attributes["network.protocol.name"] == "http"
    assert span.attributes["server.address"] == "127.0.0.1"
    assert span.attributes["server.port"] == int(httpd.url.split(":")[2].split("/")[0])
    [message] = sent
    assert span.attributes["jsonrpc.request.id"] == str(message["id"])
    # The server continues the trace: the request carries this span as parent.
    assert ids_in(message["params"]["_meta"]["traceparent"]) == traceparent_of(span)


def test_the_handshake_has_spans(spans):
    provider, exporter = spans
    with mcp_sync.connect(demo_server(), tracer_provider=provider):
        pass
    with HTTPServer(demo_server()) as httpd:
        with mcp_sync.connect(httpd.url, protocol="2025-11-25", tracer_provider=provider):
            pass
    discover, initialize = exporter.get_finished_spans()
    assert discover.name == "server/discover" and initialize.name == "initialize"
    assert discover.attributes["mcp.protocol.version"] == "2026-07-28"
    assert initialize.attributes["mcp.protocol.version"] == "2025-11-25"
    assert initialize.attributes["network.transport"] == "tcp"
    for span in (discover, initialize):
        assert span.kind is SpanKind.CLIENT and span.status.status_code is StatusCode.UNSET
        assert span.attributes["jsonrpc.request.id"] == "1"


def test_errors_set_status_and_error_type(spans, meter):
    provider, exporter = spans
    with mcp_sync.connect(demo_server(), tracer_provider=provider, meter_provider=meter[0]) as client:
        assert client.call_tool("fail", {"message": "no luck"}).is_error
        with pytest.raises(mcp_sync.ServerError) as unknown:
            client.get_prompt("no_such_prompt")
        with pytest.raises(mcp_sync.RequestTimeout):
            client.call_tool("sleep", {"seconds": 5}, timeout=0.2)
    found = finished(exporter)
    tool_error = found["tools/call fail"]
    assert tool_error.status.status_code is StatusCode.ERROR
    assert tool_error.attributes["error.type"] == "tool_error"
    rpc = found["prompts/get no_such_prompt"]
    assert rpc.status.status_code is StatusCode.ERROR
    assert rpc.status.description == unknown.value.message  # the JSON-RPC error's message
    assert rpc.attributes["error.type"] == str(unknown.value.code)
    assert rpc.attributes["rpc.response.status_code"] == str(unknown.value.code)
    assert [event.name for event in rpc.events] == ["exception"]
    timeout = found["tools/call sleep"]
    assert timeout.status.status_code is StatusCode.ERROR
    assert timeout.attributes["error.type"] == "mcp_sync.errors.RequestTimeout"
    types = {p.attributes["mcp.method.name"] + " " + p.attributes.get("error.type", "-") for p in durations(meter[1])}
    assert {"tools/call tool_error", f"prompts/get {unknown.value.code}",
            "tools/call mcp_sync.errors.RequestTimeout"} <= types


def asking_server(seen: list[str | None]) -> Server:
    """A server whose tool asks one question and notes the traceparent of
    every request that runs it (once per round in the 2026-07-28 era)."""
    server = Server(name="asking")

    @server.tool(input_schema={"type": "object"})
    def book(args: dict[str, Any], ctx: ToolContext) -> str:
        seen.append(ctx.meta.get("traceparent"))
        answer = ctx.elicit("Under which name?", {"type": "object", "properties": {"name": {"type": "string"}}})
        return f"booked for {(answer.get('content') or {}).get('name')}"

    return server


def test_an_input_round_is_a_child_span_and_carries_its_own_context(spans):
    provider, exporter = spans
    seen: list[str | None] = []
    with mcp_sync.connect(asking_server(seen), tracer_provider=provider, input_handlers={"form": form}) as client:
        assert client.call_tool("book", {}).text == "booked for Ada"
    [outer] = [s for s in requests_of(exporter) if "mcp_sync.input.round" not in s.attributes]
    [child] = [s for s in requests_of(exporter) if "mcp_sync.input.round" in s.attributes]
    assert outer.name == child.name == "tools/call book"
    assert child.parent is not None and child.parent.span_id == outer.context.span_id
    assert child.context.trace_id == outer.context.trace_id
    assert child.kind is SpanKind.CLIENT and child.attributes["mcp_sync.input.round"] == 2
    # Each round is its own JSON-RPC request.
    assert int(child.attributes["jsonrpc.request.id"]) > int(outer.attributes["jsonrpc.request.id"])
    # The outer span covers the whole call, the round inside it.
    assert outer.start_time <= child.start_time and child.end_time <= outer.end_time
    [event] = outer.events
    assert event.name == "mcp_sync.input_required"
    assert event.attributes["mcp_sync.input.round"] == 1
    assert list(event.attributes["mcp_sync.input.methods"]) == ["elicitation/create"]
    # The server saw each round under the span that sent it.
    assert [ids_in(parent) for parent in seen] == [traceparent_of(outer), traceparent_of(child)]


def test_an_input_round_that_fails_marks_both_spans(spans):
    provider, exporter = spans

    def broken(params: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("no keyboard")

    with mcp_sync.connect(demo_server(), tracer_provider=provider, input_handlers={"form": broken}) as client:
        with pytest.raises(mcp_sync.InputHandlerError):
            client.call_tool("book_table", {"date": "friday"})
    [span] = requests_of(exporter)  # the handler failed before a second round was sent
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["error.type"] == "mcp_sync.errors.InputHandlerError"


def test_the_callers_span_is_the_parent(spans):
    provider, exporter = spans
    with mcp_sync.connect(demo_server(), tracer_provider=provider) as client:
        with provider.get_tracer("app").start_as_current_span("handle order"):
            client.call_tool("echo", {"text": "hi"})
    found = finished(exporter)
    assert found["tools/call echo"].parent.span_id == found["handle order"].context.span_id


def test_trace_context_wins(spans):
    provider, exporter = spans
    given = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01", "tracestate": "rojo=1"}
    with HTTPServer(demo_server()) as httpd:
        with mcp_sync.connect(httpd.url, tracer_provider=provider) as client:
            client.call_tool("echo", {"text": "a"}, trace_context=given)
            client.call_tool("add", {"a": 1, "b": 1}, meta={"traceparent": given["traceparent"]})
            client.call_tool("fail", {"message": "m"})  # nothing given: the span's own context
        metas = [r.json["params"]["_meta"] for r in httpd.requests
                 if isinstance(r.json, dict) and r.json.get("method") == "tools/call"]
    assert metas[0]["traceparent"] == given["traceparent"] and metas[0]["tracestate"] == "rojo=1"
    assert metas[1]["traceparent"] == given["traceparent"]
    found = finished(exporter)
    assert set(found) == {"tools/call echo", "tools/call add", "tools/call fail"}  # all traced
    assert ids_in(metas[2]["traceparent"]) == traceparent_of(found["tools/call fail"])


def http_metas(**options: Any) -> list[dict[str, Any]]:
    with HTTPServer(demo_server()) as httpd:
        with mcp_sync.connect(httpd.url, **options) as client:
            client.call_tool("echo", {"text": "a"})
            tracer = client._pipeline.tracer
        assert tracer is None or options
        return [r.json["params"].get("_meta", {}) for r in httpd.requests
                if isinstance(r.json, dict) and r.json.get("method") == "tools/call"]


def test_nothing_without_a_provider():
    # The API's default global providers are proxies: nothing is set up.
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    with mcp_sync.connect(demo_server()) as client:
        assert client._pipeline.tracer is None
    [meta] = http_metas()
    assert "traceparent" not in meta


def test_a_meter_alone_records_durations_and_sends_no_context(meter):
    [meta] = http_metas(meter_provider=meter[0])
    assert "traceparent" not in meta
    [point] = [p for p in durations(meter[1]) if p.attributes["mcp.method.name"] == "tools/call"]
    assert point.count == 1 and point.attributes["network.transport"] == "tcp"


def test_a_global_provider_is_used(spans, monkeypatch):
    provider, exporter = spans
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: provider)
    with mcp_sync.connect(demo_server()) as client:
        client.call_tool("echo", {"text": "hi"})
    assert set(finished(exporter)) == {"tools/call echo"}


def test_without_the_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # import fails
    monkeypatch.setattr(tracing, "_missing", False)  # restored afterwards, as the import
    with mcp_sync.connect(demo_server()) as client:
        assert client._pipeline.tracer is None
        assert client.call_tool("echo", {"text": "hi"}).text == "hi"
    assert tracing._missing  # the next client does not try the import again
    with pytest.raises(ValueError, match=r"opentelemetry-api"):
        mcp_sync.connect(demo_server(), tracer_provider=object())


def test_a_provider_of_the_wrong_type_is_refused():
    with pytest.raises(TypeError, match="tracer_provider"):
        mcp_sync.connect(demo_server(), tracer_provider="yes")
    with pytest.raises(TypeError, match="meter_provider"):
        mcp_sync.connect(demo_server(), meter_provider=42)


def test_concurrent_calls_keep_their_own_spans(spans):
    import threading

    provider, exporter = spans
    with mcp_sync.connect(demo_server(), tracer_provider=provider) as client:
        def work(n: int) -> None:
            for i in range(20):
                client.call_tool("echo", {"text": f"{n}-{i}"})
        threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    done = requests_of(exporter)
    assert len(done) == 80
    assert all(span.parent is None for span in done)
    assert len({span.attributes["jsonrpc.request.id"] for span in done}) == 80


def test_the_benchmarks_bypass_removes_exactly_the_hook(spans):
    """The `tracing_off_cost` benchmark compares the client with a copy of
    `_request` compiled without the hook: that copy must still work and
    must be the one without spans."""
    from benchmarks.clients import _without_tracing_hook

    provider, exporter = spans
    with mcp_sync.connect(demo_server(), tracer_provider=provider, input_handlers={"form": form}) as client:
        pipeline = client._pipeline
        hooked = pipeline.calls._send
        pipeline.calls._send = _without_tracing_hook(pipeline)
        assert client.call_tool("book_table", {"date": "friday"}).text == "Booked for 3 under Ada"
        assert requests_of(exporter) == []
        pipeline.calls._send = hooked
        client.call_tool("echo", {"text": "hi"})
    assert set(finished(exporter)) == {"tools/call echo"}
