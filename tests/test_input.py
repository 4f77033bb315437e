"""Servers that ask back: input handlers in both eras, against the demo server
in-process, over stdio and over HTTP."""

import contextlib
import json
import threading
import time

import pytest

import mcp_sync
from mcp_sync.testing import HTTPServer, demo_server
from tests.helpers import demo_command

ERAS = ["2026-07-28", "2025-11-25", "2025-06-18"]


def form_answer(name="Ada", guests=3):
    def form(params):
        form.calls.append((params, threading.current_thread()))
        return {"action": "accept", "content": {"name": name, "guests": guests}}
    form.calls = []
    return form


def sampling(params):
    return {"role": "assistant", "content": {"type": "text", "text": "a short summary"}, "model": "test-model"}


def roots(params):
    return {"roots": [{"uri": "file:///home/ada/project", "name": "project"}, {"uri": "file:///tmp"}]}


def url(params):
    url.seen.append(params["url"])
    return {"action": "accept"}


url.seen = []


@pytest.fixture(params=["memory", "stdio", "http"])
def target(request):
    if request.param == "memory":
        yield demo_server()
    elif request.param == "stdio":
        yield demo_command()
    else:
        with HTTPServer(demo_server()) as httpd:
            yield httpd.url


@contextlib.contextmanager
def related_target(version):
    """A server whose questions the client can tie to the call that caused
    them: in-process for 2026-07-28 (input_required is always the call's own
    round), HTTP for the initialize era (the request arrives on the call's
    own response stream). Over a shared stream in the initialize era (stdio,
    in-process) nothing says which call a server request is for."""
    if version == "2026-07-28":
        yield demo_server()
    else:
        with HTTPServer(demo_server()) as httpd:
            yield httpd.url


@pytest.mark.parametrize("version", ERAS)
def test_every_kind_is_answered_where_it_belongs(target, version, request):
    form = form_answer()
    handlers = {"form": form, "url": url, "sampling": sampling, "roots": roots}
    with mcp_sync.connect(target, protocol=version, input_handlers=handlers) as client:
        assert client.call_tool("book_table", {"date": "friday"}).text == "Booked for 3 under Ada"
        # On the caller's thread: the call's own question (HTTP, 2026-07-28),
        # or, over a shared stream, the one call waiting adopts it.
        assert form.calls[0][1] is threading.current_thread()
        assert client.call_tool("summarize", {"text": "long text"}).text == "a short summary"
        assert client.call_tool("show_roots", {}).text == "file:///home/ada/project\nfile:///tmp"
        if version != "2025-06-18":  # URL mode arrived in 2025-11-25
            assert client.call_tool("login", {}).text == "login: accept"


@pytest.mark.parametrize("version", ERAS)
def test_two_questions_in_a_row(version):
    answers = iter(["FIRST", "SECOND"])

    def form(params):
        return {"action": "accept", "content": {"answer": next(answers)}} if "answer" in str(params) else \
            {"action": "accept", "content": {k: next(answers) for k in params["requestedSchema"]["properties"]}}

    with mcp_sync.connect(demo_server(), protocol=version, input_handlers={"form": form}) as client:
        assert client.call_tool("ask_twice", {}).text == "FIRST and SECOND"


def test_capabilities_follow_the_handlers():
    with mcp_sync.connect(demo_server()) as client:
        with pytest.raises(mcp_sync.MissingClientCapability) as info:
            client.call_tool("book_table", {"date": "friday"})
        assert info.value.required_capabilities == {"elicitation": {"form": {}}}
    with mcp_sync.connect(demo_server(), input_handlers={"sampling": sampling}) as client:
        with pytest.raises(mcp_sync.MissingClientCapability):
            client.call_tool("book_table", {"date": "friday"})
        assert client.call_tool("summarize", {"text": "x"}).text == "a short summary"


def test_per_request_handlers_win_and_add_capabilities():
    with mcp_sync.connect(demo_server(), input_handlers={"form": form_answer("Client")}) as client:
        assert client.call_tool("book_table", {"date": "fri"}).text == "Booked for 3 under Client"
        assert client.call_tool("book_table", {"date": "fri"},
                                input_handlers={"form": form_answer("Call", 5)}).text == "Booked for 5 under Call"
        assert client.call_tool("summarize", {"text": "x"}, input_handlers={"sampling": sampling}).text == "a short summary"


def test_in_the_initialize_era_a_per_call_handler_needs_its_kind_declared_at_connect():
    with mcp_sync.connect(demo_server(), protocol="2025-11-25", input_handlers={"form": form_answer("Client")}) as client:
        # Declared at connect: a per-call handler for it is accepted (on a
        # shared pipe the client's own answers, see test_concurrent_callers...).
        assert client.call_tool("book_table", {"date": "fri"},
                                input_handlers={"form": form_answer("Call", 5)}).text.startswith("Booked for")
        sent_before = client.stats().bytes_sent
        with pytest.raises(ValueError, match=r"did not declare sampling.*pass input_handlers=\{'sampling': \.\.\.\} to connect\(\)"):
            client.call_tool("summarize", {"text": "x"}, input_handlers={"sampling": sampling})
        assert client.stats().bytes_sent == sent_before  # refused before anything was sent
        assert client.call_tool("book_table", {"date": "fri"}).text == "Booked for 3 under Client"


def test_answer_input_false_and_answering_by_hand():
    with mcp_sync.connect(demo_server(), input_handlers={"form": form_answer()}) as client:
        with pytest.raises(mcp_sync.InputRequired) as info:
            client.call_tool("book_table", {"date": "friday"}, answer_input=False)
        exc = info.value
        assert type(exc) is mcp_sync.InputRequired
        (key, request), = exc.input_requests.items()
        assert request["method"] == "elicitation/create"
        answers = {key: {"action": "accept", "content": {"name": "By Hand", "guests": 1}}}
        result = client.call_tool("book_table", {"date": "friday"}, **exc.retry_with(answers))
        assert result.text == "Booked for 1 under By Hand"


def test_declared_but_unhandled_kind_raises_before_anything_runs():
    with mcp_sync.connect(demo_server(), client_capabilities={"elicitation": {"form": {}}},
                          input_handlers={"sampling": sampling}) as client:
        with pytest.raises(mcp_sync.NoInputHandler) as info:
            client.call_tool("book_table", {"date": "friday"})
        assert info.value.missing == ["form"] and info.value.request_state


def test_declared_but_unhandled_in_the_initialize_era_is_refused_to_the_server():
    with mcp_sync.connect(demo_server(), protocol="2025-11-25", client_capabilities={"elicitation": {}}) as client:
        result = client.call_tool("book_table", {"date": "friday"})
    assert result.is_error and "Method not found: elicitation/create" in result.text


@pytest.mark.parametrize("version", ERAS)
def test_an_invalid_answer_fails_the_call_and_is_never_sent(version):
    def bad(params):
        return {"action": "accept", "content": {"name": "Ada", "guests": "many"}}

    with related_target(version) as target, \
            mcp_sync.connect(target, protocol=version, input_handlers={"form": bad}) as client:
        with pytest.raises(mcp_sync.InputHandlerError) as info:
            client.call_tool("book_table", {"date": "friday"})
        assert info.value.handler == "form" and "guests" in info.value.problem
        assert client.call_tool("echo", {"text": "still usable"}).text == "still usable"


@pytest.mark.parametrize("version", ERAS)
def test_a_handler_that_raises_fails_the_call(version):
    def broken(params):
        raise RuntimeError("no keyboard here")

    with related_target(version) as target, \
            mcp_sync.connect(target, protocol=version, input_handlers={"form": broken}) as client:
        with pytest.raises(mcp_sync.InputHandlerError, match="no keyboard here"):
            client.call_tool("book_table", {"date": "friday"})


@pytest.mark.parametrize("version", ERAS)
def test_an_answer_json_cannot_carry_fails_the_call_and_is_never_sent(version):
    # NaN (what a model's arguments may hold): the answer could not be
    # written; the server waited for it, and the call with it, for ever.
    def nan(params):
        return {"action": "accept", "content": {"name": "Ada", "guests": 2}, "_meta": {"score": float("nan")}}

    with related_target(version) as target, \
            mcp_sync.connect(target, protocol=version, input_handlers={"form": nan}) as client:
        with pytest.raises(mcp_sync.InputHandlerError) as info:
            client.call_tool("book_table", {"date": "friday"}, timeout=30)
        assert info.value.handler == "form"
        # (Python 3.12 adds the value: "... not JSON compliant: nan".)
        assert info.value.problem.startswith("the answer cannot be sent as JSON: Out of range float values are not "
                                             "JSON compliant")
        assert client.call_tool("echo", {"text": "still usable"}).text == "still usable"


@pytest.mark.parametrize("version", ERAS[1:])
def test_over_a_shared_stream_a_failing_handler_is_an_error_answer_to_the_server(version):
    """Initialize era over stdio: the question belongs to no call, so the
    handler's failure cannot fail one; the server is told instead, and no
    half-valid answer is sent."""
    def bad(params):
        return {"action": "accept", "content": {"name": "Ada", "guests": "many"}}

    with mcp_sync.connect(demo_command(), protocol=version, input_handlers={"form": bad}) as client:
        # The demo tool reports the client's error answer as its own failure.
        result = client.call_tool("book_table", {"date": "friday"})
        assert result.is_error and "client handler failed" in result.text and "guests" in result.text
        assert client.call_tool("echo", {"text": "still usable"}).text == "still usable"


def test_the_round_limit():
    def form(params):
        return {"action": "accept", "content": {k: "x" for k in params["requestedSchema"]["properties"]}}

    with mcp_sync.connect(demo_server(), input_handlers={"form": form}, max_input_rounds=1) as client:
        with pytest.raises(mcp_sync.InputRoundsExceeded) as info:
            client.call_tool("ask_twice", {})
        assert info.value.rounds == 1
        assert client.call_tool("ask_twice", {}, max_input_rounds=2).text == "x and x"


@pytest.mark.parametrize("version", ["2026-07-28", "2025-11-25"])
def test_a_slow_person_does_not_time_out_the_call(version):
    def slow(params):
        time.sleep(0.8)  # a person typing, longer than the call's timeout
        return {"action": "accept", "content": {"name": "Slow", "guests": 2}}

    with related_target(version) as target, \
            mcp_sync.connect(target, protocol=version, input_handlers={"form": slow}) as client:
        assert client.call_tool("book_table", {"date": "x"}, timeout=0.5).text == "Booked for 2 under Slow"


def test_a_question_the_server_withdraws_is_not_answered():
    release = threading.Event()

    def late(params):
        release.wait(2)  # answered only after the server gave up
        return {"action": "accept", "content": {"answer": "too late"}}

    with mcp_sync.connect(demo_server(), protocol="2025-11-25", input_handlers={"form": late}) as client:
        timer = threading.Timer(0.5, release.set)
        timer.start()
        try:
            assert client.call_tool("nag", {"cancel_after": 0.2}).text == "gave up"
        finally:
            timer.join()


@pytest.mark.parametrize("version,where,strict", [
    ("2026-07-28", "stdio", True),    # input_required: always the caller's own round
    ("2025-11-25", "http", True),     # the server request arrives on the caller's own POST stream
    ("2025-11-25", "stdio", False),   # one shared pipe: nothing says whose; the client's handlers answer
])
def test_concurrent_callers_get_their_own_answers(version, where, strict):
    def form(params):
        who = threading.current_thread().name
        return {"action": "accept", "content": {"name": who, "guests": 2}}

    errors = []
    with HTTPServer(demo_server()) as httpd:
        target = httpd.url if where == "http" else demo_command()
        with mcp_sync.connect(target, protocol=version, input_handlers={"form": form}) as client:
            def work():
                me = threading.current_thread().name
                for _ in range(5):
                    got = client.call_tool("book_table", {"date": "x"}).text
                    # Over the shared pipe a question is answered on the
                    # caller's thread only while it is the one call waiting
                    # (so the question is its own), else on a handler
                    # thread: never on another caller's.
                    ok = got == f"Booked for 2 under {me}" if strict else \
                        got in (f"Booked for 2 under {me}",) or got.startswith("Booked for 2 under mcp-sync-handler")
                    if not ok:
                        errors.append((me, got))

            pool = [threading.Thread(target=work, name=f"caller-{n}") for n in range(8)]
            for t in pool:
                t.start()
            for t in pool:
                t.join(timeout=120)
    assert errors == []


def test_defaults_helper_answers_the_defaults_form():
    with mcp_sync.connect(demo_server(), input_handlers={"form": mcp_sync.handlers.defaults_form}) as client:
        content = json.loads(client.call_tool("defaults_form", {}).text)
    assert content and all(value is not None for value in content.values())


def test_prompts_and_resources_ask_too():
    handlers = {"form": lambda p: {"action": "accept", "content": {k: ("Ada" if s.get("type") == "string" else True)
                                                                   for k, s in p["requestedSchema"]["properties"].items()}}}
    with mcp_sync.connect(demo_server(), input_handlers=handlers) as client:
        assert "Ada" in client.get_prompt("personal_greeting").messages[0].content.text
        assert client.read_resource("demo://secret/7").text != "not revealed"


def test_bad_handler_options():
    with pytest.raises(ValueError):
        mcp_sync.connect(demo_server(), input_handlers={"telepathy": lambda p: {}})
    with pytest.raises(TypeError):
        mcp_sync.connect(demo_server(), input_handlers={"form": "not callable"})
    with pytest.raises(ValueError):
        mcp_sync.connect(demo_server(), max_input_rounds=0)
    with mcp_sync.connect(demo_server()) as client:
        with pytest.raises(ValueError):
            client.list_tools(input_responses={})
        with pytest.raises(TypeError):
            client.call_tool("echo", {}, request_state=5)


@pytest.mark.parametrize("version", ["2026-07-28", "2025-11-25"])
def test_a_blocked_handler_stalls_no_other_caller_and_nothing_leaks(version):
    release = threading.Event()
    asked = threading.Event()

    def person(params):
        asked.set()
        release.wait(30)
        return {"action": "accept", "content": {"name": "Patient", "guests": 2}}

    with HTTPServer(demo_server()) as httpd:
        with mcp_sync.connect(httpd.url, protocol=version, input_handlers={"form": person}) as client:
            results = []
            waiting = threading.Thread(target=lambda: results.append(client.call_tool("book_table", {"date": "x"}).text))
            waiting.start()
            assert asked.wait(10)
            for n in range(20):  # meanwhile other calls go through
                assert client.call_tool("echo", {"text": str(n)}).text == str(n)
            release.set()
            waiting.join(timeout=30)
            assert results == ["Booked for 2 under Patient"]
        echo_calls = [r.json["params"] for r in httpd.requests
                      if r.json and r.json.get("method") == "tools/call" and r.json["params"]["name"] == "echo"]
    assert len(echo_calls) == 20
    assert not any("inputResponses" in p or "requestState" in p for p in echo_calls)


def test_max_total_timeout_bounds_a_paused_call():
    def slow(params):
        time.sleep(0.6)
        return {"action": "accept", "content": {k: "late" for k in params["requestedSchema"]["properties"]}}

    with related_target("2025-11-25") as target, \
            mcp_sync.connect(target, protocol="2025-11-25", input_handlers={"form": slow}) as client:
        with pytest.raises(mcp_sync.RequestTimeout) as info:
            client.call_tool("ask_twice", {}, timeout=0.5, max_total_timeout=0.8)
        assert info.value.max_total_timeout == 0.8


def test_max_total_timeout_bounds_a_paused_call_in_the_stateless_era_too():
    # The same promise as above, over multi round-trip requests: the
    # answer given past the bound is not sent in one more round.
    def slow(params):
        time.sleep(0.6)  # (past the 0.3 s bound, whatever the machine's load)
        return {"action": "accept", "content": {"name": "Late", "guests": 2}}

    with HTTPServer(demo_server()) as httpd, \
            mcp_sync.connect(httpd.url, protocol="2026-07-28", input_handlers={"form": slow}) as client:
        with pytest.raises(mcp_sync.RequestTimeout) as info:
            client.call_tool("book_table", {"date": "x"}, max_total_timeout=0.3)
        assert info.value.max_total_timeout == 0.3
        calls = [r.json["params"] for r in httpd.requests if r.json and r.json.get("method") == "tools/call"]
    assert len(calls) == 1 and "inputResponses" not in calls[0]
