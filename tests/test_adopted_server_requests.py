"""Over stdio in the initialize era a server request cannot say which call
it belongs to. While exactly one call waits, the client-level handler runs
on that call's thread (its thread-locals and `contextvars` with it); with
several calls in flight, on a handler thread as before. Per-call handlers
answer only requests known to be the call's."""

from __future__ import annotations

import contextvars
import threading

import pytest

import mcp_sync
from tests.helpers import demo_command, wait_until

OLDER = ["2025-11-25", "2025-06-18"]
REQUEST_ID = contextvars.ContextVar("request_id", default=None)


class Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple[str, object]] = []

    def form(self, params):
        self.seen.append((threading.current_thread().name, REQUEST_ID.get()))
        return {"action": "accept", "content": {"guests": 3, "name": "Ada"}}


@pytest.mark.parametrize("version", OLDER)
def test_with_one_call_waiting_the_handler_runs_on_its_thread_with_its_context(version):
    recorder = Recorder()
    with mcp_sync.connect(demo_command(), protocol=version, input_handlers={"form": recorder.form}) as client:
        REQUEST_ID.set("req-42")
        threading.current_thread().name = "the-callers-thread"
        try:
            assert client.call_tool("book_table", {"date": "sunday"}).text == "Booked for 3 under Ada"
            assert client.call_tool("book_table", {"date": "monday"}, timeout=30).text == "Booked for 3 under Ada"
        finally:
            threading.current_thread().name = "MainThread"
    assert recorder.seen == [("the-callers-thread", "req-42")] * 2


@pytest.mark.parametrize("version", OLDER)
def test_with_several_calls_in_flight_the_handler_runs_on_a_handler_thread(version):
    recorder = Recorder()
    client = mcp_sync.connect(demo_command(), protocol=version, input_handlers={"form": recorder.form})
    ended = []
    sleeper = threading.Thread(target=lambda: ended.append(_call_until_closed(client)))
    try:
        sleeper.start()
        wait_until(lambda: client._conn.in_flight == 1)  # registered with the connection, not just admitted
        REQUEST_ID.set("req-7")
        assert client.call_tool("book_table", {"date": "sunday"}).text == "Booked for 3 under Ada"
    finally:
        client.close()
        sleeper.join()
    assert len(recorder.seen) == 1
    thread_name, context = recorder.seen[0]
    assert thread_name.startswith("mcp-sync-handler") and context is None
    assert ended == ["closed"]


def _call_until_closed(client) -> str:
    try:
        client.call_tool("sleep", {"seconds": 60}, timeout=90)
    except mcp_sync.ConnectionClosed:
        return "closed"
    return "returned"


@pytest.mark.parametrize("version", OLDER)
def test_a_per_call_handler_never_answers_a_request_it_cannot_be_sure_of(version):
    recorder = Recorder()
    called = []

    def per_call(params):
        called.append(params)
        return {"action": "decline"}

    with mcp_sync.connect(demo_command(), protocol=version, input_handlers={"form": recorder.form}) as client:
        text = client.call_tool("book_table", {"date": "sunday"}, input_handlers={"form": per_call}).text
    assert text == "Booked for 3 under Ada" and called == []
    assert [name for name, _ in recorder.seen] == [threading.current_thread().name]


@pytest.mark.parametrize("version", OLDER)
def test_a_failing_handler_on_the_callers_thread_tells_the_server_as_a_handler_thread_would(version):
    def broken(params):
        raise RuntimeError("no keyboard")

    with mcp_sync.connect(demo_command(), protocol=version, input_handlers={"form": broken}) as client:
        result = client.call_tool("book_table", {"date": "sunday"})
        # The server got an error answer and its tool reported it; the call itself did not fail.
        assert result.is_error and "no keyboard" in result.text
        assert client.call_tool("echo", {"text": "still fine"}).text == "still fine"


@pytest.mark.parametrize("version", OLDER)
def test_requests_for_the_client_rather_than_a_person_stay_on_the_handler_threads(version):
    # roots/list (and ping) are answered at once by the handler threads: a
    # caller busy with a question, or holding a lock its roots handler
    # needs, must not hold them up.
    threads = []

    def roots(params):
        threads.append(threading.current_thread().name)
        return {"roots": [{"uri": "file:///srv"}]}

    with mcp_sync.connect(demo_command(), protocol=version, input_handlers={"roots": roots}) as client:
        assert client.call_tool("show_roots", {}).text == "file:///srv"
    assert len(threads) == 1 and threads[0].startswith("mcp-sync-handler")
