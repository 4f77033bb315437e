"""Tasks in 2025-11-25's core protocol (`params.task`, `tasks/get`,
`tasks/result`, `tasks/list`, `tasks/cancel`, `notifications/tasks/status`),
against a stdio server of that revision (tests/servers/core_tasks.py). The
reference server's task tool is in tests/interop/test_everything_protocol.py."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

import mcp_sync
from mcp_sync import Task
from tests.helpers import recorded, wait_until
from tests.schema_check import SchemaChecker

SERVER = str(Path(__file__).parent / "servers" / "core_tasks.py")
SCHEMAS = SchemaChecker(Path(__file__).parent / "schemas")


def core_tasks(*flags: str, record: Path | None = None) -> list[str]:
    return [sys.executable, SERVER, *flags, *(["--record", str(record)] if record else [])]


def sent(record: Path) -> list[dict]:
    return [message for _, message in recorded(record)]


def test_a_task_goes_out_with_params_task_and_every_message_follows_the_schema(tmp_path):
    record = tmp_path / "record"
    with mcp_sync.connect(core_tasks(record=record)) as client:
        task = client.call_tool("work", {"until": "released"}, task=True)
        assert isinstance(task, Task) and task.id == "task-1" and task.status == "working"
        assert task.ttl == 60.0 and task.poll_interval == 0.05
        client.call_tool("release")
        assert task.refresh().status == "completed"
        assert task.wait(timeout=10).text == "done task-1"
    messages = sent(record)
    call = next(m for m in messages if m.get("method") == "tools/call")
    assert call["params"]["task"] == {}
    # Core tasks declare no extension: the client's capabilities say nothing of tasks.
    initialize = next(m for m in messages if m.get("method") == "initialize")
    assert "extensions" not in initialize["params"]["capabilities"] or \
        "io.modelcontextprotocol/tasks" not in initialize["params"]["capabilities"]["extensions"]
    assert [m["method"] for m in messages if m.get("method", "").startswith("tasks/")] == ["tasks/get", "tasks/result"]
    for message in messages:
        assert SCHEMAS.check(None, message, version="2025-11-25") is None


def test_a_status_notification_wakes_the_waiter(tmp_path):
    # The server suggests polling once an hour: a waiter bounded by 10 s can
    # only finish by hearing notifications/tasks/status.
    with mcp_sync.connect(core_tasks("--notify")) as client:
        task = client.call_tool("work", {"until": "released"}, task=True)
        results = []
        waiter = threading.Thread(target=lambda: results.append(task.wait(timeout=10)))
        waiter.start()
        client.call_tool("release")
        waiter.join()
    assert [r.text for r in results] == ["done task-1"]


def test_a_task_that_failed_with_an_error_raises_it_for_every_waiter():
    with mcp_sync.connect(core_tasks()) as client:
        task = client.call_tool("work", {"outcome": "rpc-error"}, task=True)
        for _ in range(2):
            with pytest.raises(mcp_sync.ServerError) as info:
                task.wait(timeout=10)
            assert info.value.message == "the work failed" and info.value.method == "tasks/result"
        assert task.status == "failed"


def test_waiting_again_on_a_failed_task_raises_a_fresh_error_each_time():
    # One instance raised again and again would gather every raise's frames
    # in its traceback (and hand one traceback to many threads).
    with mcp_sync.connect(core_tasks()) as client:
        task = client.call_tool("work", {"outcome": "rpc-error"}, task=True)
        raised, depths = [], []
        for _ in range(50):
            with pytest.raises(mcp_sync.ServerError) as info:
                task.wait(timeout=10)
            raised.append(info.value)
            tb, depth = info.value.__traceback__, 0
            while tb is not None:
                tb, depth = tb.tb_next, depth + 1
            depths.append(depth)
    assert len(set(depths[1:])) == 1  # (the first is the one from the request) none gathered since
    assert len({id(error) for error in raised}) == 50
    assert {(type(e), e.code, e.message, e.method) for e in raised} == {
        (mcp_sync.ServerError, raised[0].code, "the work failed", "tasks/result")}


def test_a_task_whose_tool_failed_returns_the_error_result():
    with mcp_sync.connect(core_tasks()) as client:
        result = client.call_tool("work", {"outcome": "tool-error"}, task=True).wait(timeout=10)
    assert result.is_error and result.text == "it broke"


def test_a_tool_that_runs_only_as_a_task_is_run_as_one_even_before_it_was_listed(tmp_path):
    record = tmp_path / "record"
    with mcp_sync.connect(core_tasks(record=record)) as client:
        assert client.call_tool("must").text == "done task-1"
        assert client.call_tool("must", timeout=10).text == "done task-2"
        assert client.call_tool("must").text == "done task-3"  # known now: still not a plain call
    methods = [m.get("method") for m in sent(record)]
    assert methods.count("tools/list") == 1  # listed once, to learn it runs only as a task
    calls = [m for m in sent(record) if m.get("method") == "tools/call"]
    assert [c["params"].get("task") for c in calls] == [{}, {}, {}]


def test_wait_true_returns_the_result_and_list_tasks_lists_them():
    with mcp_sync.connect(core_tasks()) as client:
        result = client.call_tool("work", {}, task=True, wait=True)
        assert result.text == "done task-1"
        task = client.call_tool("work", {"until": "released"}, task=True)
        listed = client.list_tasks()
        assert [(t.id, t.status) for t in listed] == [("task-1", "completed"), ("task-2", "working")]
        task.cancel()
        assert task.status == "cancelled"
        with pytest.raises(mcp_sync.TaskCancelled):
            task.wait(timeout=10)
        task.cancel()  # -32602 for a finished task: not an error


def test_a_server_without_tasks_refuses_task_true_before_anything_is_sent(tmp_path):
    record = tmp_path / "record"
    with mcp_sync.connect(core_tasks("--no-tasks", record=record)) as client:
        with pytest.raises(mcp_sync.ExtensionNotDeclared, match="offers no tasks"):
            client.call_tool("work", {}, task=True)
        with pytest.raises(mcp_sync.ExtensionNotDeclared, match="tasks/list"):
            client.list_tasks()
        assert client.call_tool("work").text == "at once"
    assert [m.get("method") for m in sent(record)].count("tools/call") == 1


def test_list_tasks_needs_the_list_capability():
    with mcp_sync.connect(core_tasks("--no-list")) as client:
        with pytest.raises(mcp_sync.ExtensionNotDeclared, match="tasks.list"):
            client.list_tasks()
        assert client.call_tool("work", {}, task=True).wait(timeout=10).text == "done task-1"


def test_a_task_augmented_call_that_times_out_is_not_cancelled_by_notification(tmp_path):
    # Only tasks/cancel may cancel a task-augmented request, and its task id
    # never arrived: nothing is sent for it.
    record = tmp_path / "record"
    with mcp_sync.connect(core_tasks("--slow-create", "1", record=record)) as client:
        with pytest.raises(mcp_sync.RequestTimeout):
            client.call_tool("work", {}, task=True, timeout=0.2)
        client.list_tools()  # answered after the server read everything sent before it
    methods = [m.get("method") for m in sent(record)]
    assert "notifications/cancelled" not in methods


def test_an_error_from_tasks_result_for_a_task_still_running_is_not_its_outcome(tmp_path):
    # A server that does not hold tasks/result open answers it with an error
    # while the task runs: the waiter polls on and gets the result.
    record = tmp_path / "record"
    with mcp_sync.connect(core_tasks("--eager-error", record=record)) as client:
        task = client.call_tool("work", {"until": "input"}, task=True)
        assert task.status == "input_required"
        results = []
        waiter = threading.Thread(target=lambda: results.append(task.wait(timeout=20)))
        waiter.start()
        wait_until(lambda: [m.get("method") for m in sent(record)].count("tasks/result") >= 2)
        client.call_tool("release")
        waiter.join()
    assert [r.text for r in results] == ["done task-1"] and task.status == "completed"


def test_an_error_from_tasks_result_sent_before_the_task_ended_is_not_its_outcome(tmp_path):
    # The task completes right after the server answered tasks/result with
    # an error: the status the waiter reads next is terminal, but the error
    # was about a task still running, so the outcome is fetched afresh.
    record = tmp_path / "record"
    with mcp_sync.connect(core_tasks("--eager-error", "--end-after-error", record=record)) as client:
        task = client.call_tool("work", {"until": "input"}, task=True)
        assert task.wait(timeout=20).text == "done task-1" and task.status == "completed"
    assert [m.get("method") for m in sent(record)].count("tasks/result") == 2


def test_a_task_cancelled_while_its_waiter_holds_tasks_result_raises_task_cancelled(tmp_path):
    record = tmp_path / "record"
    with mcp_sync.connect(core_tasks(record=record)) as client:
        task = client.call_tool("work", {"until": "input"}, task=True)
        errors = []

        def wait():
            try:
                task.wait(timeout=20)
            except mcp_sync.McpError as exc:
                errors.append(exc)

        waiter = threading.Thread(target=wait)
        waiter.start()
        wait_until(lambda: "tasks/result" in [m.get("method") for m in sent(record)])
        task.cancel()
        waiter.join()
    assert len(errors) == 1 and isinstance(errors[0], mcp_sync.TaskCancelled), errors
    with pytest.raises(mcp_sync.TaskCancelled):
        task.wait(timeout=1)


def test_without_tasks_on_offer_a_tool_that_says_required_is_called_plainly(tmp_path):
    record = tmp_path / "record"
    with mcp_sync.connect(core_tasks("--no-tasks", record=record)) as client:
        assert next(t for t in client.list_tools() if t.name == "must").task_support == "required"
        with pytest.raises(mcp_sync.MethodNotFound, match="must requires a task"):
            client.call_tool("must")
    call = next(m for m in sent(record) if m.get("method") == "tools/call")
    assert "task" not in call["params"]


def test_the_listing_before_a_first_call_comes_after_the_calls_own_checks(tmp_path):
    record = tmp_path / "record"
    with mcp_sync.connect(core_tasks(record=record)) as client:
        with pytest.raises(ValueError):
            client.call_tool("work", timeout=-1)
        with pytest.raises(TypeError):
            client.call_tool("work", 5)
        client.list_tasks()  # read by the server after anything the refused calls might have sent
        assert client.call_tool("work", timeout=10).text == "at once"
    methods = [m.get("method") for m in sent(record)]
    assert methods.index("tasks/list") < methods.index("tools/list") < methods.index("tools/call")
    assert methods.count("tools/list") == 1
