"""`pollIntervalMs: 0` (a server suggesting to poll again at once) is a
value, not "unset": `Task.wait()` polls at its floor (`MIN_POLL_INTERVAL`,
so never a busy loop), not at the default of a second. Each wait between
polls is recorded where `wait()` makes it, so nothing here depends on
timing."""

from __future__ import annotations

import threading

import pytest

import mcp_sync
from mcp_sync import tasks
from mcp_sync.tasks import DEFAULT_POLL_INTERVAL, MIN_POLL_INTERVAL, Task
from mcp_sync.testing import Server, close_tasks, task_tool
from mcp_sync.testing._tasks import TaskStore
from mcp_sync.types import CallToolResult


def test_a_zero_interval_is_read_as_zero_and_a_missing_one_as_none():
    zero = Task(None, {"taskId": "t", "status": "working", "pollIntervalMs": 0}, CallToolResult.from_wire)
    old_zero = Task(None, {"taskId": "t", "status": "working", "pollInterval": 0}, CallToolResult.from_wire)
    unset = Task(None, {"taskId": "t", "status": "working"}, CallToolResult.from_wire)
    assert (zero.poll_interval, old_zero.poll_interval, unset.poll_interval) == (0.0, 0.0, None)


@pytest.fixture
def polled(monkeypatch):
    """A server whose tasks suggest `pollIntervalMs` of `interval_ms` and
    whose task tool "job" ends once the client has waited three times
    between polls; the seconds of each such wait, as asked."""
    made: list[Server] = []
    waits: list[float] = []
    released = threading.Event()
    real = tasks.wait_for_event

    def recording(event, seconds):
        waits.append(seconds)
        if len(waits) == 3:
            released.set()
        return real(event, seconds)

    monkeypatch.setattr(tasks, "wait_for_event", recording)

    def server(interval_ms: int) -> Server:
        # No notifications: wait() can only poll.
        made_server = Server(name="poller", change_notifications=False)
        made_server._task_store = TaskStore(poll_interval_ms=interval_ms)  # (what task_tool() would make)
        task_tool(made_server, "job", lambda args, ctx: "done" if released.wait(30) else "never released")
        made.append(made_server)
        return made_server

    yield server, waits
    released.set()
    for made_server in made:
        close_tasks(made_server)


@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
def test_a_zero_interval_polls_at_the_floor_not_at_the_default(polled, era):
    make, waits = polled
    with mcp_sync.connect(make(0), protocol=era, tasks=era != "2026-07-28") as client:
        task = client.call_tool("job", {}, task=True)
        assert task.poll_interval == 0.0
        assert task.wait(timeout=30).text == "done"
    # Before: every wait was DEFAULT_POLL_INTERVAL (0 read as "unset").
    assert len(waits) >= 3 and set(waits) == {MIN_POLL_INTERVAL}
    assert MIN_POLL_INTERVAL > 0 and DEFAULT_POLL_INTERVAL not in waits  # a floor: never a busy loop


def test_an_interval_below_the_floor_polls_at_the_floor_too(polled):
    # 0 and 1 ms are the same request ("as soon as you like"), met the same way.
    make, waits = polled
    with mcp_sync.connect(make(1), protocol="2026-07-28") as client:
        assert client.call_tool("job", {}, task=True).wait(timeout=30).text == "done"
    assert len(waits) >= 3 and set(waits) == {MIN_POLL_INTERVAL}
