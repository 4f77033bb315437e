"""Tasks (the io.modelcontextprotocol/tasks extension): the `Task` handle over
stdio, Streamable HTTP and in-process, in both protocol eras, against the
test server's task tools (`demo_server(tasks=True)`)."""

from __future__ import annotations

import datetime
import json
import threading
import time

import pytest

import mcp_sync
from mcp_sync.tasks import EXTENSION, Task
from mcp_sync.testing import HTTPServer, Server, close_tasks, demo_server
from mcp_sync.testing._tasks import add_task_tools
from mcp_sync.types import CallToolResult

from .helpers import GENEROUS, demo_command

STATELESS, LEGACY = "2026-07-28", "2025-11-25"
ERAS = [STATELESS, LEGACY]
ACCEPT = {"action": "accept", "content": {"confirm": True, "name": "Ada"}}


@pytest.fixture(scope="module")
def httpd():
    server = demo_server(tasks=True)
    with HTTPServer(server) as http:
        yield http
    close_tasks(server)


@pytest.fixture(scope="module")
def memory_server():
    server = demo_server(tasks=True)
    yield server
    close_tasks(server)


@pytest.fixture(params=["stdio", "http"])
def transport(request):
    return request.param


@pytest.fixture(params=ERAS)
def era(request):
    return request.param


@pytest.fixture
def connect(transport, era, httpd, memory_server):
    """Connects over the transport in the era; the initialize era declares
    tasks at connect (its only way), 2026-07-28 per call."""
    made = []

    def open_client(**options):
        options.setdefault("tasks", era == LEGACY)
        target = {"stdio": demo_command("--tasks"), "http": httpd.url, "memory": memory_server}[transport]
        client = mcp_sync.connect(target, protocol=era, **options)
        made.append(client)
        return client

    yield open_client
    for client in made:
        client.close()


def test_task_handle_and_wait(connect):
    client = connect()
    task = client.call_tool("slow_compute", {"seconds": 0.2, "value": "forty-two"}, task=True)
    assert isinstance(task, Task)
    assert isinstance(task.id, str) and task.id
    assert task.status == "working" and not task.done
    assert isinstance(task.created_at, datetime.datetime) and isinstance(task.last_updated_at, datetime.datetime)
    assert task.ttl == 300.0 and task.poll_interval == 0.05
    result = task.wait(timeout=10)
    assert isinstance(result, CallToolResult) and result.text == "forty-two" and not result.is_error
    assert task.status == "completed" and task.done
    assert task.wait(timeout=1) is result  # settled: the same result again, nothing sent


def test_refresh_reports_progress_to_completion(connect):
    client = connect()
    task = client.call_tool("slow_compute", {"seconds": 0.1}, task=True)
    deadline = time.monotonic() + 10
    seen = set()
    while not task.refresh().done:
        seen.add(task.status)
        assert time.monotonic() < deadline, "the task never completed"
        time.sleep(task.poll_interval or 0.05)
    assert task.status == "completed" and seen <= {"working"}
    assert task.status_message == "computing for 0.1 s"
    assert task.raw["result"]["content"][0]["text"] == "computed after 0.1 s"


def test_cancel_is_idempotent(connect):
    client = connect()
    task = client.call_tool("slow_compute", {"seconds": 30}, task=True)
    task.cancel()
    task.cancel()
    assert task.refresh().status == "cancelled"
    with pytest.raises(mcp_sync.TaskCancelled) as info:
        task.wait(timeout=5)
    assert info.value.task_id == task.id
    task.cancel()  # on a finished task too


def test_input_mid_task_is_answered_on_the_waiting_thread(connect):
    asked_on = []

    def form(params):
        asked_on.append((threading.current_thread(), params["message"]))
        return ACCEPT

    client = connect(input_handlers={"form": form})
    task = client.call_tool("confirm_delete", {"filename": "/tmp/x"}, task=True)
    waiter_result = []
    waiter = threading.Thread(target=lambda: waiter_result.append(task.wait(timeout=10)))
    waiter.start()
    waiter.join(15)
    assert waiter_result and waiter_result[0].text == "deleted /tmp/x"
    assert asked_on == [(waiter, "Delete /tmp/x?")]


def test_two_questions_at_once_are_both_answered(connect):
    client = connect(input_handlers={"form": lambda params: ACCEPT})
    assert client.call_tool("multi_input", {}, task=True, wait=True, timeout=10).text == "Ada Ada"


def test_failed_task_raises_the_servers_error(connect):
    client = connect()
    with pytest.raises(mcp_sync.ServerError) as info:
        client.call_tool("protocol_error_job", {}, task=True, wait=True, timeout=10)
    assert info.value.code == -32603 and "the job crashed" in info.value.message
    assert info.value.data == {"job": "protocol_error_job"}


def test_tool_error_is_a_completed_task_with_is_error(connect):
    client = connect()
    task = client.call_tool("failing_job", {}, task=True)
    result = task.wait(timeout=10)
    assert result.is_error and result.text == "the job failed" and task.status == "completed"


def test_sixteen_threads_wait_on_sixteen_tasks(connect):
    client = connect()
    tasks = [client.call_tool("slow_compute", {"seconds": 0.05 * (i % 4), "value": f"v{i}"}, task=True)
             for i in range(16)]
    results: dict[int, str] = {}
    errors = []

    def wait(i):
        try:
            results[i] = tasks[i].wait(timeout=20).text
        except Exception as exc:  # reported below, with the thread's index
            errors.append((i, exc))

    threads = [threading.Thread(target=wait, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors
    assert results == {i: f"v{i}" for i in range(16)}


def test_two_threads_on_one_task_get_the_same_result(connect):
    client = connect()
    task = client.call_tool("slow_compute", {"seconds": 0.3, "value": "shared"}, task=True)
    got = []
    threads = [threading.Thread(target=lambda: got.append(task.wait(timeout=10))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(15)
    assert len(got) == 2 and got[0] is got[1] and got[0].text == "shared"


def test_two_threads_on_a_failing_task_get_the_same_error_each_their_own(connect):
    client = connect()
    task = client.call_tool("protocol_error_job", {}, task=True)
    got = []

    def wait():
        try:
            task.wait(timeout=10)
        except mcp_sync.ServerError as exc:
            got.append(exc)

    threads = [threading.Thread(target=wait) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(15)
    # The same error for both, each its own copy (one traceback each).
    assert len(got) == 2 and got[0] is not got[1]
    assert [(type(e), e.code, e.message, e.data) for e in got] == [(type(got[0]), -32603, got[0].message, got[0].data)] * 2
    assert "the job crashed" in got[0].message


def test_wait_true_is_bounded_by_the_calls_timeout(connect):
    client = connect()
    started = time.monotonic()
    with pytest.raises(mcp_sync.RequestTimeout):
        client.call_tool("slow_compute", {"seconds": 30}, task=True, wait=True, timeout=0.5)
    assert time.monotonic() - started < 0.5 + GENEROUS  # its 0.5 s, not the task's 30 s


def test_task_wait_timeout_leaves_the_task_running(connect):
    client = connect()
    task = client.call_tool("slow_compute", {"seconds": 30}, task=True)
    with pytest.raises(mcp_sync.RequestTimeout):
        task.wait(timeout=0.2)
    assert task.refresh().status == "working"
    task.cancel()


def test_required_task_tool_without_tasks_says_to_pass_task_true(connect):
    client = connect(tasks=False)
    with pytest.raises(mcp_sync.MissingClientCapability) as info:
        client.call_tool("failing_job", {})
    assert "task=True" in str(info.value) and info.value.code == -32021
    assert EXTENSION in info.value.required_capabilities["extensions"]


def test_a_task_tool_without_tasks_runs_as_a_plain_call(connect):
    client = connect(tasks=False)
    result = client.call_tool("slow_compute", {"seconds": 0, "value": "plain"})
    assert result.text == "plain"


def test_a_client_declaring_tasks_gets_plain_results_from_call_tool(connect):
    client = connect(tasks=True)
    result = client.call_tool("slow_compute", {"seconds": 0.1, "value": "waited"})
    assert isinstance(result, CallToolResult) and result.text == "waited"


def test_task_true_on_a_tool_answered_at_once_is_a_settled_handle(connect):
    client = connect()
    task = client.call_tool("echo", {"text": "now"}, task=True)
    assert task.id is None and task.status == "completed"
    assert task.wait().text == "now"
    task.cancel()
    assert task.refresh() is task


@pytest.mark.parametrize("transport", ["http", "memory"])
def test_get_task_reattaches_from_a_second_client(connect):
    first, second = connect(), connect()
    task = first.call_tool("slow_compute", {"seconds": 0.3, "value": "again"}, task=True)
    attached = second.get_task(task.id)
    assert attached.id == task.id and attached.status in ("working", "completed")
    assert attached.wait(timeout=10).text == "again"


@pytest.mark.parametrize("transport", ["http"])
def test_task_requests_carry_mcp_method_and_mcp_name(connect, httpd):
    client = connect()
    task = client.call_tool("slow_compute", {"seconds": 0.1}, task=True)
    task.refresh()
    task.wait(timeout=10)
    task.cancel()
    seen = {(r.json or {}).get("method"): r.headers for r in httpd.requests
            if ((r.json or {}).get("params") or {}).get("taskId") == task.id}
    assert set(seen) == {"tasks/get", "tasks/cancel"}
    for method, headers in seen.items():
        assert headers["Mcp-Method"] == method and headers["Mcp-Name"] == task.id


@pytest.mark.parametrize("transport", ["http"])
@pytest.mark.parametrize("era", [STATELESS])
def test_the_extension_is_declared_per_call_in_2026(connect, httpd):
    client = connect()
    client.call_tool("slow_compute", {"seconds": 0, "value": "a"})
    client.call_tool("slow_compute", {"seconds": 0, "value": "b"}, task=True).wait(timeout=10)

    def declared(value):
        for r in httpd.requests:
            params = (r.json or {}).get("params") or {}
            if (params.get("arguments") or {}).get("value") == value:
                caps = params["_meta"]["io.modelcontextprotocol/clientCapabilities"]
                return EXTENSION in caps.get("extensions", {})
        raise AssertionError(f"no call with value {value!r}")

    assert declared("a") is False and declared("b") is True


@pytest.mark.parametrize("transport", ["stdio"])
@pytest.mark.parametrize("era", [LEGACY])
def test_per_call_tasks_in_the_initialize_era_need_connect_tasks(connect):
    client = connect(tasks=False)
    with pytest.raises(ValueError, match="tasks=True to connect"):
        client.call_tool("slow_compute", {"seconds": 0}, task=True)


@pytest.mark.parametrize("transport", ["memory"])
def test_unknown_task_id_is_invalid_params(connect):
    client = connect(tasks=True)
    with pytest.raises(mcp_sync.InvalidParams):
        client.get_task("no-such-task")


def test_bad_arguments_are_refused_before_sending():
    with mcp_sync.connect(demo_server(tasks=True)) as client:
        with pytest.raises(TypeError):
            client.call_tool("slow_compute", {}, task="yes")  # type: ignore[call-overload]
        with pytest.raises(TypeError):
            client.get_task("")
        with pytest.raises(ValueError):
            client.call_tool("slow_compute", {"seconds": 0}, task=True).wait(timeout=-1)


def test_older_field_names_are_read():
    task = Task(None, {"taskId": "t", "status": "working", "ttl": 1000, "pollInterval": 200,
                       "createdAt": "2025-11-25T10:30:00Z"}, CallToolResult.from_wire)
    assert task.ttl == 1.0 and task.poll_interval == 0.2
    assert task.created_at == datetime.datetime(2025, 11, 25, 10, 30, tzinfo=datetime.timezone.utc)
    newer = Task(None, {"taskId": "t", "status": "working", "ttlMs": None, "pollIntervalMs": 500,
                        "ttl": 9, "pollInterval": 9}, CallToolResult.from_wire)
    assert newer.ttl is None and newer.poll_interval == 0.5


def test_an_unknown_status_is_an_invalid_result():
    with pytest.raises(mcp_sync.InvalidResult):
        Task(None, {"taskId": "t", "status": "sleeping"}, CallToolResult.from_wire)


def test_a_multi_round_call_that_becomes_a_task_on_its_last_round(connect):
    asked = []

    def form(params):
        asked.append(params["message"])
        return {"action": "accept", "content": {"name": "Ada"}}

    client = connect(input_handlers={"form": form})
    task = client.call_tool("test_tool_with_task", {}, task=True)
    assert isinstance(task.id, str) and asked == ["What is your name?"]
    assert task.wait(timeout=10).text == "Hello, Ada!"


def test_a_task_request_is_sent_again_once_after_a_connection_reset(monkeypatch):
    # A server whose keep-alive timeout equals its poll interval (uvicorn's 5 s,
    # FastMCP's 5 s) resets the pooled connection just as the next poll reuses
    # it. tasks/get is a pure read, tasks/cancel and tasks/update are
    # idempotent: each is sent once more.
    with mcp_sync.connect(demo_server(tasks=True), tasks=True) as client:
        task = client.call_tool("slow_compute", {"seconds": 0.1}, task=True)
        assert task.status == "working"
        conn = client._conn
        original = conn.send_request
        failures = {"left": 1, "sent": 0}

        def flaky(method, params=None, **kw):
            failures["sent"] += 1
            if method.startswith("tasks/") and failures["left"]:
                failures["left"] -= 1
                raise mcp_sync.ConnectError("POST failed: [Errno 104] Connection reset by peer")
            return original(method, params, **kw)

        monkeypatch.setattr(conn, "send_request", flaky)
        assert task.refresh().status in ("working", "completed")
        assert failures == {"left": 0, "sent": 2}
        failures["left"] = 2
        with pytest.raises(mcp_sync.ConnectError):  # a second failure in a row is the caller's
            task.cancel()


def test_tasks_work_with_the_result_cache_on():
    # tasks/get carries a `ttlMs` (the task's), which must not make it cacheable.
    with mcp_sync.connect(demo_server(tasks=True), cache=True) as client:
        task = client.call_tool("slow_compute", {"seconds": 0.1, "value": "fresh"}, task=True)
        assert task.refresh().status == "working"
        assert task.wait(timeout=10).text == "fresh"


@pytest.mark.parametrize("transport", ["http"])
@pytest.mark.parametrize("era", [STATELESS])
def test_wait_follows_notifications_instead_of_polling(connect, httpd):
    client = connect(input_handlers={"form": lambda params: ACCEPT})
    task = client.call_tool("confirm_delete", {"filename": "n.txt"}, task=True)
    assert task.wait(timeout=10).text == "deleted n.txt"
    mine = [r.json for r in httpd.requests if r.json and json.dumps(r.json).find(task.id) >= 0]
    methods = [m["method"] for m in mine if "method" in m]
    assert "subscriptions/listen" in methods and "tasks/update" in methods
    assert "tasks/get" not in methods  # every state came as a notification
    listen = next(m for m in mine if m.get("method") == "subscriptions/listen")
    assert EXTENSION in listen["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]["extensions"]


@pytest.mark.parametrize("era", [STATELESS])
def test_wait_polls_when_the_server_offers_no_notifications(era):
    server = Server(name="quiet", change_notifications=False)
    add_task_tools(server)
    with mcp_sync.connect(server, protocol=era) as client:
        task = client.call_tool("slow_compute", {"seconds": 0.1, "value": "polled"}, task=True)
        assert task.wait(timeout=10).text == "polled"
        assert server.served("tasks/get") >= 1
    close_tasks(server)


def test_a_tasks_rounds_of_input_are_bounded_by_max_input_rounds():
    # A task's questions were answered without limit (25 here), though
    # max_input_rounds bounds a call's.
    from mcp_sync.testing import task_tool

    server = Server(name="nagging")
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}

    def nagging(args, ctx):
        for i in range(25):
            if ctx.cancelled.is_set():
                return "cancelled"
            ctx.elicit(f"question {i}", schema)
        return "answered all"

    task_tool(server, "nagging", nagging)
    asked = []

    def form(params):
        asked.append(params["message"])
        return {"action": "accept", "content": {"ok": True}}

    try:
        with mcp_sync.connect(server, protocol=STATELESS, input_handlers={"form": form}, max_input_rounds=3) as client:
            task = client.call_tool("nagging", {}, task=True)
            with pytest.raises(mcp_sync.InputRoundsExceeded) as info:
                task.wait(timeout=30)
            assert info.value.rounds == 3 and asked == ["question 0", "question 1", "question 2"]
            task.cancel()
    finally:
        close_tasks(server)


def test_a_persons_answer_is_sent_though_the_wait_timed_out_while_they_answered(memory_server):
    # As for a call, the wait's timeout pauses while a person answers: the
    # answer was dropped (RequestTimeout before tasks/update), and the
    # person asked again at the next wait().
    asked = []

    def slow_person(params):
        asked.append(params["message"])
        started = time.monotonic()
        threading.Event().wait(1.5)  # longer than the wait's whole timeout, below
        assert time.monotonic() - started >= 1.5
        return ACCEPT

    with mcp_sync.connect(memory_server, protocol=STATELESS, input_handlers={"form": slow_person}) as client:
        task = client.call_tool("confirm_delete", {"filename": "/tmp/x"}, task=True)
        assert task.wait(timeout=1.0).text == "deleted /tmp/x"
    assert asked == ["Delete /tmp/x?"]


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("exc", [SystemExit(2), pytest.fail.Exception("assertion in the job")],
                         ids=["SystemExit", "Failed"])
def test_a_task_tool_raising_a_base_exception_completes_with_is_error(era, exc):
    # Its thread used to die with the exception and leave the task
    # "working": every wait() ran to its timeout.
    from mcp_sync.testing import task_tool

    def job(args, ctx):
        raise exc

    server = Server(name="failing")
    task_tool(server, "job", job)
    try:
        with mcp_sync.connect(server, protocol=era, tasks=era == LEGACY) as client:
            task = client.call_tool("job", {}, task=True)
            result = task.wait(timeout=10)
            assert result.is_error and result.text == str(exc) and task.status == "completed"
    finally:
        close_tasks(server)
