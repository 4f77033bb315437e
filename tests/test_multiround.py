"""The multi round-trip loop on plain data: a scripted `send` plays the server."""

import threading

import pytest

import mcp_sync
from mcp_sync.multiround import answer_rounds
from mcp_sync.protocol.schemas import SchemaCache
from tests.helpers import GENEROUS, SLACK

FORM = {"method": "elicitation/create", "params": {
    "mode": "form", "message": "Your name?",
    "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}}
SAMPLE = {"method": "sampling/createMessage", "params": {
    "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 5}}
ROOTS = {"method": "roots/list", "params": {}}
URL = {"method": "elicitation/create", "params": {"mode": "url", "message": "Log in", "url": "https://example.com/login"}}


def need(requests=None, state=None):
    result = {"resultType": "input_required"}
    if requests is not None:
        result["inputRequests"] = requests
    if state is not None:
        result["requestState"] = state
    return result


class Server:
    """Answers each send with the next scripted result and records the params."""

    def __init__(self, *results):
        self.results = list(results)
        self.sent = []

    def __call__(self, params, limit=None):
        self.sent.append(params)
        return self.results.pop(0)


def run(server, handlers=None, **kw):
    options = dict(handlers=handlers or {}, answer_input=True, max_rounds=10, input_responses=None,
                   request_state=None, schemas=SchemaCache(), max_total_timeout=600)
    options.update(kw)
    return answer_rounds(server, "tools/call", {"name": "t", "arguments": {"a": 1}}, **options)


def form(params):
    return {"action": "accept", "content": {"name": "Ada"}}


def test_one_round_with_state_echoed_exactly():
    server = Server(need({"k": FORM}, state="opaque \u00e9 state=="), {"content": [], "done": True})
    assert run(server, {"form": form})["done"]
    first, second = server.sent
    assert "inputResponses" not in first and "requestState" not in first
    assert second["inputResponses"] == {"k": {"action": "accept", "content": {"name": "Ada"}}}
    assert second["requestState"] == "opaque \u00e9 state=="
    assert second["arguments"] == {"a": 1} and second["name"] == "t"


def test_no_state_means_none_is_sent():
    server = Server(need({"k": FORM}), {"content": []})
    run(server, {"form": form})
    assert "requestState" not in server.sent[1]


def test_handlers_run_in_key_order_one_at_a_time_on_the_calling_thread():
    order = []

    def record(kind):
        def handler(params):
            order.append((kind, threading.current_thread()))
            return {"form": {"action": "accept", "content": {"name": "x"}},
                    "sampling": {"role": "assistant", "content": {"type": "text", "text": "x"}, "model": "m"},
                    "roots": {"roots": [{"uri": "file:///tmp"}]},
                    "url": {"action": "accept"}}[kind]
        return handler

    server = Server(need({"c": ROOTS, "a": SAMPLE, "b": FORM, "d": URL}), {"content": []})
    run(server, {k: record(k) for k in ("form", "url", "sampling", "roots")})
    assert [k for k, _ in order] == ["sampling", "form", "roots", "url"]
    assert {t for _, t in order} == {threading.current_thread()}
    assert set(server.sent[1]["inputResponses"]) == {"a", "b", "c", "d"}


def test_a_missing_handler_runs_nothing():
    ran = []
    server = Server(need({"a": FORM, "b": SAMPLE, "c": ROOTS}, state="s"))
    with pytest.raises(mcp_sync.NoInputHandler) as info:
        run(server, {"form": lambda p: ran.append(p) or {"action": "decline"}})
    assert info.value.missing == ["roots", "sampling"] and ran == []
    assert info.value.request_state == "s" and set(info.value.input_requests) == {"a", "b", "c"}
    assert len(server.sent) == 1


@pytest.mark.parametrize("answer,problem", [
    ({"action": "maybe"}, "action"),
    ({"action": "accept"}, "content"),
    ({"action": "accept", "content": {"name": 5}}, "requestedSchema"),
    ({"action": "accept", "content": {}}, "requestedSchema"),
    ("not a dict", "object"),
])
def test_an_invalid_form_answer_fails_and_sends_nothing(answer, problem):
    server = Server(need({"k": FORM}))
    with pytest.raises(mcp_sync.InputHandlerError) as info:
        run(server, {"form": lambda p: answer})
    assert info.value.handler == "form" and problem in info.value.problem
    assert len(server.sent) == 1


@pytest.mark.parametrize("kind,request_,answer", [
    ("sampling", SAMPLE, {"role": "robot", "content": {"type": "text", "text": "x"}, "model": "m"}),
    ("sampling", SAMPLE, {"role": "assistant", "content": {"type": "text", "text": "x"}}),
    ("sampling", SAMPLE, {"role": "assistant", "content": "text", "model": "m"}),
    ("roots", ROOTS, {"roots": [{"uri": "https://not-a-file"}]}),
    ("roots", ROOTS, {"roots": "none"}),
])
def test_invalid_sampling_and_roots_answers(kind, request_, answer):
    with pytest.raises(mcp_sync.InputHandlerError) as info:
        run(Server(need({"k": request_})), {kind: lambda p: answer})
    assert info.value.handler == kind


def test_a_handler_that_raises():
    def broken(params):
        raise RuntimeError("no keyboard")

    with pytest.raises(mcp_sync.InputHandlerError) as info:
        run(Server(need({"k": FORM})), {"form": broken})
    assert "no keyboard" in info.value.problem and isinstance(info.value.__cause__, RuntimeError)


def test_keyboard_interrupt_in_a_handler_propagates_as_is():
    def interrupted(params):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(Server(need({"k": FORM})), {"form": interrupted})


def test_round_limit():
    server = Server(*[need({"k": FORM}, state=str(i)) for i in range(4)])
    with pytest.raises(mcp_sync.InputRoundsExceeded) as info:
        run(server, {"form": form}, max_rounds=3)
    assert info.value.rounds == 3 and info.value.request_state == "3"
    assert len(server.sent) == 4


def test_state_only_rounds_are_resent_and_counted():
    server = Server(need(state="working"), need(state="still"), {"content": [], "ok": 1})
    assert run(server)["ok"] == 1
    assert [p.get("requestState") for p in server.sent] == [None, "working", "still"]
    assert all("inputResponses" not in p for p in server.sent)


@pytest.mark.parametrize("result", [
    need(),                                   # nothing to answer and no state
    need({"k": {"method": "tools/call", "params": {}}}),
    need({"k": {"method": "elicitation/create", "params": {"mode": "form"}}}),
    need({"k": {"method": "sampling/createMessage", "params": {"messages": []}}}),
    need({"k": "not an object"}),
    {"resultType": "input_required", "inputRequests": [1]},
    {"resultType": "input_required", "requestState": 5},
])
def test_malformed_input_required(result):
    with pytest.raises(mcp_sync.MalformedInputRequest) as info:
        run(Server(result), {"form": form, "sampling": form})
    assert isinstance(info.value, mcp_sync.ProtocolError) and isinstance(info.value, mcp_sync.InputRequired)


def test_answer_input_false_raises_with_the_result():
    result = need({"k": FORM}, state="s")
    with pytest.raises(mcp_sync.InputRequired) as info:
        run(Server(result), {"form": form}, answer_input=False)
    assert type(info.value) is mcp_sync.InputRequired and info.value.result == result


def test_answering_by_hand():
    server = Server({"content": []})
    run(server, input_responses={"k": {"action": "decline"}}, request_state="s1")
    assert server.sent[0]["inputResponses"] == {"k": {"action": "decline"}}
    assert server.sent[0]["requestState"] == "s1"


def test_retry_with_helper():
    exc = mcp_sync.InputRequired("x", result=need({"k": FORM}, state="st"))
    assert exc.retry_with({"k": {"action": "cancel"}}) == {"input_responses": {"k": {"action": "cancel"}},
                                                          "request_state": "st"}
    assert mcp_sync.InputRequired("x", result=need({"k": FORM})).retry_with({}) == {"input_responses": {}}


def test_only_mrtr_methods_may_answer_input_required():
    with pytest.raises(mcp_sync.InvalidResult):
        answer_rounds(Server(need({"k": FORM})), "tools/list", {}, handlers={"form": form}, answer_input=True,
                      max_rounds=10, input_responses=None, request_state=None, schemas=SchemaCache(),
                      max_total_timeout=None)


def test_no_round_goes_out_once_the_persons_time_passed_max_total_timeout():
    # docs/input.md: while a handler runs "only max_total_timeout bounds the
    # whole call". The handler returns after the bound: the call ends there,
    # and the answers are not sent in a round past it.
    import time

    def slow(params):
        time.sleep(0.3)  # (a person typing: past the 0.1 s bound, whatever the machine's load)
        return form(params)

    server = Server(need({"k": FORM}, state="s"), {"content": [], "done": True})
    with pytest.raises(mcp_sync.RequestTimeout) as info:
        run(server, {"form": slow}, max_total_timeout=0.1)
    assert info.value.max_total_timeout == 0.1 and info.value.method == "tools/call"
    assert len(server.sent) == 1


def test_a_state_only_pause_never_outlasts_max_total_timeout(monkeypatch):
    import time

    from mcp_sync import multiround

    # A long pause, so that a bound with SLACK tells "stopped at the bound" from "paused".
    monkeypatch.setattr(multiround, "STATE_ONLY_DELAY", 60.0)
    server = Server(need(state="working"), {"content": [], "done": True})
    started = time.monotonic()
    with pytest.raises(mcp_sync.RequestTimeout):
        run(server, max_total_timeout=0.01)
    elapsed = time.monotonic() - started
    assert len(server.sent) == 1
    # The pause stops at the bound (0.01 s), not STATE_ONLY_DELAY (60 s here) later.
    assert elapsed < 0.01 + SLACK < multiround.STATE_ONLY_DELAY


@pytest.mark.parametrize("where", ["call", "client"])
def test_the_round_after_the_persons_answer_waits_no_longer_than_max_total_timeout(where):
    # The checks between rounds let a round sent just before the bound wait
    # its whole per-request timeout: the server working on for 30 s held
    # a max_total_timeout=1 call 30 s. Each round waits what is left.
    import time

    from mcp_sync.testing import Server

    server = Server()

    @server.tool(description="asks, then works until cancelled")
    def ask_then_work(args, ctx):
        ctx.elicit("name?", {"type": "object", "properties": {"n": {"type": "string"}}})
        ctx.cancelled.wait(30)
        return "done"

    def form(request):
        threading.Event().wait(0.3)  # a person answering (counts against the bound)
        return {"action": "accept", "content": {"n": "x"}}

    on_call = {"max_total_timeout": 1.0, "timeout": 60} if where == "call" else {}
    on_client = {"max_total_timeout": 1.0, "timeout": 60} if where == "client" else {}
    with mcp_sync.connect(server, protocol="2026-07-28", input_handlers={"form": form}, **on_client) as client:
        started = time.monotonic()
        with pytest.raises(mcp_sync.RequestTimeout) as caught:
            client.call_tool("ask_then_work", {}, **on_call)
        assert time.monotonic() - started < 1.0 + GENEROUS  # (its 1 s; not the 30 s the server works)
        assert caught.value.max_total_timeout == 1.0
