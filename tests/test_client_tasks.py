"""The client as a task receiver (2025-11-25 core tasks, client side): a
server's `elicitation/create` or `sampling/createMessage` with
`params.task` is answered at once with a task, its handler runs on a
handler thread, and the server's `tasks/get`, `tasks/result`, `tasks/list`
and `tasks/cancel` are answered from the connection's `ClientTasks`.

The store on plain data; the engine with a played server (the handler
pool's bounds); and a stdio server of 2025-11-25 that plays scripts of
server requests (tests/servers/asks_as_tasks.py). The reference server's
`trigger-*-request-async` tools are in tests/interop/test_everything_tools.py."""

from __future__ import annotations

import json
import logging
import sys
import os
import threading
from pathlib import Path

import pytest

import mcp_sync
from mcp_sync import client_tasks
from mcp_sync.client_tasks import END_GRACE, MAX_TTL_MS, MAX_WAITERS, RELATED_TASK, ClientTasks
from mcp_sync.connection import Connection, new_id_counter
from mcp_sync.negotiation import initialize_capabilities
from mcp_sync.protocol.jsonrpc import Refusal
from mcp_sync.protocol.schemas import SchemaCache
from mcp_sync.server_requests import ServerRequests
from tests.helpers import wait_until
from tests.schema_check import SchemaChecker
from tests.scripted_engine import PlayedTransport

SERVER = str(Path(__file__).parent / "servers" / "asks_as_tasks.py")
SCHEMAS = SchemaChecker(Path(__file__).parent / "schemas")
FORM = {"type": "object", "properties": {"answer": {"type": "string"}}}


def valid(name: str, value: dict) -> bool:
    """`value` is a valid `name` of the 2025-11-25 schema."""
    errors = list(SCHEMAS._validator("2025-11-25", name).iter_errors(value))
    assert not errors, errors[0].message
    return True


class Replies:
    """The `Reply` of one request: what it was answered, once."""

    def __init__(self) -> None:
        self.answers: list[tuple[dict | None, dict | None]] = []

    def __call__(self, result=None, error=None) -> None:
        self.answers.append((result, error))


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def refused(call, *args) -> dict:
    with pytest.raises(Refusal) as info:
        call(*args)
    return info.value.error()


# -- the store -------------------------------------------------------------------------------------------



def declining_once(release: threading.Event):
    """A form handler that declines once `release` is set (within 10 s)."""

    def slow(params):
        assert release.wait(10)
        return {"action": "decline"}

    return slow

def test_a_task_is_created_working_with_an_unguessable_id_and_a_capped_ttl():
    tasks = ClientTasks()
    task_id, created = tasks.create({"ttl": 60000})
    assert valid("CreateTaskResult", created)
    task = created["task"]
    assert (task["taskId"], task["status"], task["ttl"], task["pollInterval"]) == (task_id, "working", 60000, 1000)
    assert task["createdAt"] == task["lastUpdatedAt"] and task["createdAt"].endswith("Z")
    assert len(task_id) >= 22  # 128 random bits, url-safe
    assert tasks.create({"ttl": 10 * MAX_TTL_MS})[1]["task"]["ttl"] == MAX_TTL_MS
    assert tasks.create({})[1]["task"]["ttl"] == MAX_TTL_MS
    assert len({tasks.create({})[0] for _ in range(20)}) == 20
    assert refused(tasks.create, {"ttl": "soon"})["code"] == -32602
    assert refused(tasks.create, {"ttl": -1})["code"] == -32602
    assert refused(tasks.create, True)["code"] == -32602


def test_get_result_and_list_of_a_completed_task():
    tasks = ClientTasks()
    task_id, _ = tasks.create({"ttl": 60000})
    waiting = Replies()
    tasks.result({"taskId": task_id}, waiting)
    assert waiting.answers == []  # held until the task ends: no thread waits meanwhile
    assert tasks.get({"taskId": task_id})["status"] == "working"
    answer = {"action": "accept", "content": {"answer": "yes"}, "_meta": {"kept": 1}}
    assert tasks.finish(task_id, result=answer)
    tagged = {"action": "accept", "content": {"answer": "yes"},
              "_meta": {"kept": 1, RELATED_TASK: {"taskId": task_id}}}
    assert waiting.answers == [(tagged, None)]
    got = tasks.get({"taskId": task_id})
    assert valid("GetTaskResult", got) and got["status"] == "completed"
    later = Replies()
    tasks.result({"taskId": task_id}, later)  # an ended task answers at once, as often as asked
    assert later.answers == [(tagged, None)]
    listed = tasks.list({})
    assert valid("ListTasksResult", listed) and listed == {"tasks": [got]}
    assert not tasks.finish(task_id, result={"action": "decline"})  # ended: nothing changes
    assert tasks.get({"taskId": task_id})["status"] == "completed"


def test_a_failed_task_gives_its_error_to_every_tasks_result():
    tasks = ClientTasks()
    task_id, _ = tasks.create({})
    first = Replies()
    tasks.result({"taskId": task_id}, first)
    error = {"code": -32603, "message": "client handler failed: ValueError('no')"}
    tasks.finish(task_id, error=error)
    second = Replies()
    tasks.result({"taskId": task_id}, second)
    assert first.answers == second.answers == [(None, error)]
    got = tasks.get({"taskId": task_id})
    assert (got["status"], got["statusMessage"]) == ("failed", error["message"])


def test_unknown_ids_and_cursors_are_invalid_params():
    tasks = ClientTasks()
    tasks.create({})
    assert refused(tasks.get, {"taskId": "nope"}) == {"code": -32602, "message": "Failed to retrieve task: Task not found"}
    assert refused(tasks.cancel, {"taskId": "nope"})["code"] == -32602
    assert refused(tasks.get, {})["code"] == -32602
    assert refused(tasks.get, None)["code"] == -32602
    assert refused(tasks.list, {"cursor": "next"})["code"] == -32602
    unknown = Replies()
    tasks.result({"taskId": "nope"}, unknown)
    assert unknown.answers == [(None, {"code": -32602, "message": "Failed to retrieve task: Task not found"})]


def test_cancel_ends_a_running_task_and_its_late_outcome_is_dropped():
    tasks = ClientTasks()
    task_id, _ = tasks.create({})
    waiting = Replies()
    tasks.result({"taskId": task_id}, waiting)
    cancelled = tasks.cancel({"taskId": task_id})
    assert valid("CancelTaskResult", cancelled) and cancelled["status"] == "cancelled"
    assert waiting.answers == [(None, {"code": -32603, "message": "the task was cancelled: its request has no result"})]
    assert not tasks.finish(task_id, result={"action": "accept", "content": {}})  # the handler ended after all
    assert tasks.get({"taskId": task_id})["status"] == "cancelled"
    # A task in a terminal status cannot be cancelled (-32602), whichever it is.
    assert refused(tasks.cancel, {"taskId": task_id}) == {
        "code": -32602, "message": "Cannot cancel task: already in terminal status 'cancelled'"}
    done, _ = tasks.create({})
    tasks.finish(done, result={"action": "decline"})
    assert "'completed'" in refused(tasks.cancel, {"taskId": done})["message"]


def test_an_ended_task_is_forgotten_after_its_ttl_and_grace_but_a_running_one_is_kept():
    clock = Clock()
    tasks = ClientTasks(clock=clock)
    ended, _ = tasks.create({"ttl": 100_000})
    running, _ = tasks.create({"ttl": 100_000})
    clock.now += 50
    tasks.finish(ended, result={"action": "decline"})  # ended at 50 s: kept to 110 s (its end + END_GRACE)
    clock.now += 59.999
    assert tasks.get({"taskId": ended})["status"] == "completed"
    clock.now += 0.002
    assert refused(tasks.get, {"taskId": ended})["code"] == -32602
    assert tasks.get({"taskId": running})["status"] == "working"  # its handler still runs
    waiting = Replies()
    tasks.result({"taskId": running}, waiting)
    tasks.finish(running, result={"action": "cancel"})
    assert waiting.answers[0][0]["action"] == "cancel"  # the waiter hears the end first
    assert [t["taskId"] for t in tasks.list({})["tasks"]] == [running]  # its ttl (to 200 s) is not over
    clock.now += END_GRACE  # 170 s: END_GRACE after its end, not its ttl
    assert [t["taskId"] for t in tasks.list({})["tasks"]] == [running]
    clock.now += 30  # 200 s: past its ttl and its grace
    assert [t["taskId"] for t in tasks.list({})["tasks"]] == []
    assert len(tasks) == 0


def test_a_task_whose_handler_overran_its_ttl_is_kept_for_the_next_poll():
    # Found in review: a person who took longer than the ttl lost the answer
    # at the first use of the table after it, before any poll could fetch it.
    clock = Clock()
    tasks = ClientTasks(clock=clock)
    task_id, _ = tasks.create({"ttl": 300_000})
    clock.now += 301  # the person took 5 min 1 s
    assert tasks.get({"taskId": task_id})["status"] == "working"
    tasks.finish(task_id, result={"action": "accept", "content": {}})
    clock.now += 1  # the server's next poll
    assert tasks.get({"taskId": task_id})["status"] == "completed"
    fetched = Replies()
    tasks.result({"taskId": task_id}, fetched)
    assert fetched.answers[0][0]["action"] == "accept"
    clock.now += END_GRACE
    assert refused(tasks.get, {"taskId": task_id})["code"] == -32602


def test_stale_waiters_make_room_and_a_reply_not_sent_is_not_a_fetch():
    tasks = ClientTasks(max_tasks=2)
    task_id, _ = tasks.create({})
    owed = [True] * MAX_WAITERS
    waiters = [Replies() for _ in range(MAX_WAITERS)]
    for n, waiter in enumerate(waiters):
        tasks.result({"taskId": task_id}, waiter, owed=lambda n=n: owed[n])
    owed[3] = False  # withdrawn by the server, or timed out
    late = Replies()
    tasks.result({"taskId": task_id}, late)  # room made by the stale one
    assert late.answers == []
    refused_now = Replies()
    tasks.result({"taskId": task_id}, refused_now)  # the rest are still owed
    assert refused_now.answers[0][1]["code"] == -32603
    # Nothing went out (every reply says so): the task's result was not fetched.
    other, _ = tasks.create({})
    unsent = []
    tasks.result({"taskId": other}, lambda result=None, error=None: unsent.append(result) or False)
    tasks.finish(other, result={"action": "decline"})
    tasks.finish(task_id, result={"action": "decline"})
    assert unsent and len(late.answers) == 1
    assert waiters[3].answers == []  # dropped as stale: never answered
    assert tasks._tasks[other].fetched is False and tasks._tasks[task_id].fetched is True


def test_a_full_table_makes_room_from_ended_tasks_and_refuses_when_all_run():
    tasks = ClientTasks(max_tasks=3)
    first, _ = tasks.create({})
    second, _ = tasks.create({})
    third, _ = tasks.create({})
    assert refused(tasks.create, {}) == {"code": -32603, "message": "too many client tasks: 3 are running already"}
    tasks.finish(first, result={"action": "decline"})
    tasks.finish(second, result={"action": "decline"})
    tasks.result({"taskId": second}, Replies())  # fetched: the first to go
    fourth, _ = tasks.create({})
    assert [t["taskId"] for t in tasks.list({})["tasks"]] == [first, third, fourth]
    fifth, _ = tasks.create({})  # then the oldest ended one, fetched or not
    assert [t["taskId"] for t in tasks.list({})["tasks"]] == [third, fourth, fifth]
    assert refused(tasks.create, {})["code"] == -32603
    tasks.forget(fifth)
    assert len(tasks) == 2


def test_the_waiters_of_one_task_are_bounded():
    tasks = ClientTasks()
    task_id, _ = tasks.create({})
    waiters = [Replies() for _ in range(MAX_WAITERS + 1)]
    for waiter in waiters:
        tasks.result({"taskId": task_id}, waiter)
    assert [w.answers for w in waiters[:MAX_WAITERS]] == [[]] * MAX_WAITERS
    assert waiters[-1].answers[0][1]["code"] == -32603


# -- what the client declares ---------------------------------------------------------------------------


def test_tasks_are_declared_in_2025_11_25_for_the_kinds_declared_only():
    both = initialize_capabilities({"elicitation": {"form": {}}, "sampling": {}}, "2025-11-25")
    assert both["tasks"] == {"list": {}, "cancel": {},
                             "requests": {"elicitation": {"create": {}}, "sampling": {"createMessage": {}}}}
    assert valid("ClientCapabilities", both)
    assert initialize_capabilities({"sampling": {}}, "2025-11-25")["tasks"]["requests"] == {
        "sampling": {"createMessage": {}}}
    assert "tasks" not in initialize_capabilities({"roots": {}}, "2025-11-25")
    assert "tasks" not in initialize_capabilities({"sampling": {}}, "2025-06-18")
    assert client_tasks.runs_as_task("url", both) and client_tasks.runs_as_task("sampling", both)
    assert not client_tasks.runs_as_task("roots", both)
    assert not client_tasks.offers("tasks/list", {"tasks": {"cancel": {}}})


def asks(*flags: str) -> list[str]:
    return [sys.executable, SERVER, *flags]


@pytest.mark.parametrize(("kinds", "requests"), [
    (("form",), {"elicitation": {"create": {}}}),
    (("sampling",), {"sampling": {"createMessage": {}}}),
    (("form", "url", "sampling"), {"elicitation": {"create": {}}, "sampling": {"createMessage": {}}}),
    (("roots",), None),
])
def test_initialize_declares_tasks_for_the_installed_handlers(kinds, requests):
    handlers = {kind: (lambda params: {}) for kind in kinds}
    with mcp_sync.connect(asks(), input_handlers=handlers) as client:
        declared = json.loads(client.call_tool("capabilities").text)
    if requests is None:
        assert "tasks" not in declared
    else:
        assert declared["tasks"] == {"list": {}, "cancel": {}, "requests": requests}


# -- the engine: a played server, the handler pool ----------------------------------------------------------


def played(handlers, max_server_requests=16, declared=None, handler_timeout=None):
    requests = ServerRequests(handlers, SchemaCache())
    requests.declared = declared if declared is not None else initialize_capabilities(
        {"elicitation": {"form": {}}}, "2025-11-25")
    transport = PlayedTransport()
    conn = Connection(transport, new_id_counter(), on_server_request=requests.unrelated,
                      answers_at_once=requests.answers_at_once,
                      max_server_requests=max_server_requests, handler_timeout=handler_timeout)
    conn.start()
    transport.requests = requests  # for the tests that look at the table
    return conn, transport


def ask(transport, request_id, method, params):
    transport.sink.deliver({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})


def pool_busy(conn) -> int:
    """Jobs queued or running on the connection's handler pool and its task threads."""
    return conn._threads._handlers.active + conn._threads._tasks.active


def answers(transport, count) -> dict:
    """The next `count` answers the client sent, by request id."""
    found = {}
    for _ in range(count):
        message = transport.next_sent()
        found[message["id"]] = message.get("result", message.get("error"))
    return found


ELICIT = {"mode": "form", "message": "how many?", "requestedSchema": FORM}


def test_tasks_result_holds_no_handler_thread_so_a_small_pool_never_starves_the_task():
    # Two slots: the task's handler holds one. Five tasks/result come while
    # it runs, one after the other: each gives its slot back at once (a
    # waiting tasks/result holds none), so none is refused and a tasks/get
    # still finds a slot.
    release = threading.Event()

    def slow(params):
        assert release.wait(10)
        return {"action": "accept", "content": {"answer": "five"}}

    conn, transport = played({"form": slow}, max_server_requests=2)
    try:
        ask(transport, "e1", "elicitation/create", {**ELICIT, "task": {"ttl": 60000}})
        created = answers(transport, 1)["e1"]
        assert created["task"]["status"] == "working"
        task_id = created["task"]["taskId"]
        for n in range(5):
            ask(transport, f"r{n}", "tasks/result", {"taskId": task_id})
            assert wait_until(lambda: pool_busy(conn) == 1, 5), "a waiting tasks/result holds a pool slot"
        ask(transport, "g1", "tasks/get", {"taskId": task_id})
        assert answers(transport, 1) == {"g1": {**created["task"]}}  # the only answer so far
        release.set()
        results = answers(transport, 5)
        tagged = {"action": "accept", "content": {"answer": "five"}, "_meta": {RELATED_TASK: {"taskId": task_id}}}
        assert results == {f"r{n}": tagged for n in range(5)}
    finally:
        release.set()
        conn.close()


def test_a_waiting_tasks_result_and_its_task_are_bounded_by_the_handler_timeout():
    # The task fails once `handler_timeout` has passed since it was created
    # (found in review: a handler that never returned kept it working for
    # ever); its thread runs on until the handler returns (it cannot be
    # interrupted), holding its task thread.
    release = threading.Event()
    slow = declining_once(release)

    conn, transport = played({"form": slow}, handler_timeout=0.2)
    try:
        ask(transport, "e1", "elicitation/create", {**ELICIT, "task": {}})
        task_id = answers(transport, 1)["e1"]["task"]["taskId"]  # answered at once: no timeout for it
        ask(transport, "r1", "tasks/result", {"taskId": task_id})
        assert answers(transport, 1)["r1"] == {"code": -32603,
                                               "message": "the client's handler did not answer within 0.2 s"}
        ask(transport, "g1", "tasks/get", {"taskId": task_id})
        task = answers(transport, 1)["g1"]
        assert task["status"] == "failed", task
        assert task["statusMessage"] == "the client's handler did not answer within 0.2 s"
        assert pool_busy(conn) == 1  # the stuck handler still holds its thread
        release.set()
        assert wait_until(lambda: pool_busy(conn) == 0, 5)
        ask(transport, "r2", "tasks/result", {"taskId": task_id})  # the late outcome was dropped
        assert answers(transport, 1)["r2"] == {"code": -32603,
                                               "message": "the client's handler did not answer within 0.2 s"}
    finally:
        release.set()
        conn.close()


def test_a_request_without_params_task_is_answered_as_before_and_undeclared_tasks_are_refused():
    conn, transport = played({"form": lambda params: {"action": "decline"}})
    try:
        ask(transport, "e1", "elicitation/create", ELICIT)
        assert answers(transport, 1) == {"e1": {"action": "decline"}}
    finally:
        conn.close()
    # A client that declared no tasks (a 2025-06-18 session, say) answers a
    # task-augmented request as a plain one and knows no tasks/* methods.
    conn, transport = played({"form": lambda params: {"action": "decline"}}, declared={"elicitation": {"form": {}}})
    try:
        ask(transport, "e2", "elicitation/create", {**ELICIT, "task": {"ttl": 1000}})
        ask(transport, "g1", "tasks/get", {"taskId": "x"})
        got = answers(transport, 2)
        assert got["e2"] == {"action": "decline"} and got["g1"]["code"] == -32601
    finally:
        conn.close()


def test_a_task_that_finds_the_pool_full_is_refused_rather_than_created():
    release = threading.Event()
    slow = declining_once(release)

    conn, transport = played({"form": slow}, max_server_requests=1)
    try:
        ask(transport, "e1", "elicitation/create", {**ELICIT, "task": {}})
        task_id = answers(transport, 1)["e1"]["task"]["taskId"]
        ask(transport, "e2", "elicitation/create", {**ELICIT, "task": {}})  # the one slot is the first task's
        assert answers(transport, 1)["e2"] == {"code": -32603, "message": "too many server requests in progress"}
        release.set()
        assert wait_until(lambda: pool_busy(conn) == 0, 5)
        ask(transport, "r1", "tasks/result", {"taskId": task_id})
        assert answers(transport, 1)["r1"]["action"] == "decline"
    finally:
        release.set()
        conn.close()


def test_polls_ping_and_new_tasks_are_answered_while_every_task_thread_waits_for_a_person():
    # Found in review: four task handlers waiting for a person took the four
    # handler threads, and tasks/get, tasks/cancel, ping and the next
    # CreateTaskResult waited behind them. Now those are answered where they
    # arrive, and task handlers have threads of their own.
    release = threading.Event()

    def person(params):
        if params["message"] == "plain":
            return {"action": "decline"}
        assert release.wait(10)  # "hold", and the tasks
        return {"action": "decline"}

    conn, transport = played({"form": person})
    try:
        ids = []
        for n in range(4):
            ask(transport, f"e{n}", "elicitation/create", {**ELICIT, "task": {}})
            ids.append(answers(transport, 1)[f"e{n}"]["task"]["taskId"])
        assert wait_until(lambda: conn._threads._tasks.threads == 4, 5)  # every task thread waits
        ask(transport, "plain", "elicitation/create", {**ELICIT, "message": "plain"})  # a handler thread's
        assert answers(transport, 1) == {"plain": {"action": "decline"}}
        for n in range(4):  # and now every handler thread waits for a person too
            ask(transport, f"hold{n}", "elicitation/create", {**ELICIT, "message": "hold"})
        assert wait_until(lambda: conn._threads._handlers.threads == 4 and conn._threads._handlers.active == 4, 5)
        ask(transport, "g1", "tasks/get", {"taskId": ids[0]})
        transport.sink.deliver({"jsonrpc": "2.0", "id": "p1", "method": "ping"})
        ask(transport, "c1", "tasks/cancel", {"taskId": ids[1]})
        ask(transport, "l1", "tasks/list", {})
        ask(transport, "e4", "elicitation/create", {**ELICIT, "task": {}})  # queued for a task thread
        got = answers(transport, 5)
        assert got["g1"]["status"] == "working" and got["p1"] == {} and got["c1"]["status"] == "cancelled"
        assert len(got["l1"]["tasks"]) == 4 and got["e4"]["task"]["status"] == "working"
        assert not release.is_set()  # all of it while the four still wait
    finally:
        release.set()
        conn.close()


def test_withdrawn_tasks_result_requests_do_not_count_toward_the_waiters():
    # Found in review: a tasks/result the server withdrew stayed a waiter,
    # and after MAX_WAITERS of them every new one was refused.
    release = threading.Event()
    slow = declining_once(release)

    conn, transport = played({"form": slow})
    table = transport.requests.tasks
    try:
        ask(transport, "e1", "elicitation/create", {**ELICIT, "task": {}})
        task_id = answers(transport, 1)["e1"]["task"]["taskId"]
        for n in range(MAX_WAITERS):
            ask(transport, f"r{n}", "tasks/result", {"taskId": task_id})
            assert len(table._tasks[task_id].waiters) == n + 1  # answered where it arrived: waiting now
            transport.sink.deliver({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                    "params": {"requestId": f"r{n}"}})
        ask(transport, "last", "tasks/result", {"taskId": task_id})  # not refused: it waits
        assert len(table._tasks[task_id].waiters) == 1
        release.set()
        assert answers(transport, 1) == {"last": {"action": "decline",
                                                  "_meta": {RELATED_TASK: {"taskId": task_id}}}}
        assert table._tasks[task_id].fetched
    finally:
        release.set()
        conn.close()


def _slow_create(monkeypatch):
    """`ClientTasks.create` held until `gate` is set: (entered, gate, done)."""
    entered, gate, done = threading.Event(), threading.Event(), threading.Event()
    real = ClientTasks.create

    def create(self, task):
        entered.set()
        assert gate.wait(10)
        try:
            return real(self, task)
        finally:
            done.set()

    monkeypatch.setattr(ClientTasks, "create", create)
    return entered, gate, done


def test_a_request_withdrawn_before_its_task_was_answered_runs_no_handler(monkeypatch):
    # Found in review: the CreateTaskResult was dropped (the request was
    # withdrawn meanwhile) yet the person was asked, for a task nobody knew.
    entered, gate, done = _slow_create(monkeypatch)
    asked = []
    conn, transport = played({"form": lambda params: asked.append(params) or {"action": "decline"}})
    try:
        reader = threading.Thread(target=ask, args=(transport, "e1", "elicitation/create", {**ELICIT, "task": {}}))
        reader.start()
        assert entered.wait(10)
        transport.sink.deliver({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "e1"}})
        gate.set()
        reader.join(10)
        assert done.is_set() and not reader.is_alive()
        assert wait_until(lambda: pool_busy(conn) == 0, 5)
        transport.sink.deliver({"jsonrpc": "2.0", "id": "p1", "method": "ping"})
        assert answers(transport, 1) == {"p1": {}}  # nothing went out before it
        assert asked == [] and len(transport.requests.tasks) == 0
    finally:
        gate.set()
        conn.close()


def test_a_request_whose_connection_closed_before_its_task_was_answered_runs_no_handler(monkeypatch):
    entered, gate, done = _slow_create(monkeypatch)
    asked = []
    conn, transport = played({"form": lambda params: asked.append(params) or {"action": "decline"}})
    try:
        reader = threading.Thread(target=ask, args=(transport, "e1", "elicitation/create", {**ELICIT, "task": {}}))
        reader.start()
        assert entered.wait(10)
        closer = threading.Thread(target=conn.close)
        closer.start()
        assert wait_until(lambda: conn.closed, 5)
        gate.set()
        reader.join(10)
        closer.join(10)
        assert done.is_set() and not reader.is_alive() and not closer.is_alive()
        assert asked == [] and len(transport.requests.tasks) == 0
    finally:
        gate.set()
        conn.close()


# -- end to end: a stdio server of 2025-11-25 ---------------------------------------------------------------


class Person:
    """Input handlers that record what they were asked and on which thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.asked: list[tuple[str, dict, str]] = []

    def _record(self, kind, params):
        with self.lock:
            self.asked.append((kind, params, threading.current_thread().name))

    def form(self, params):
        self._record("form", params)
        if params["message"] == "break":
            raise ValueError("the person walked away")
        return {"action": "accept", "content": {"answer": f"re: {params['message']}"}}

    def sampling(self, params):
        self._record("sampling", params)
        return {"role": "assistant", "content": {"type": "text", "text": "sampled"}, "model": "m"}


def script(client, *steps) -> list:
    return json.loads(client.call_tool("script", {"steps": list(steps)}, timeout=30).text)


def elicit(message, ttl=60000):
    return {"method": "elicitation/create",
            "params": {"mode": "form", "message": message, "requestedSchema": FORM, "task": {"ttl": ttl}}}


def test_an_elicitation_as_a_task_is_polled_then_fetched():
    person = Person()
    with mcp_sync.connect(asks(), input_handlers={"form": person.form}) as client:
        [created], polled, [result], [listed] = script(
            client, {"send": [elicit("which colour?")]}, {"poll": "$task1"},
            {"send": [{"method": "tasks/result", "params": {"taskId": "$task1"}}]},
            {"send": [{"method": "tasks/list"}]})
    task = created["result"]["task"]
    assert valid("CreateTaskResult", created["result"]) and task["status"] == "working" and task["ttl"] == 60000
    assert polled[-1] == "completed" and set(polled) <= {"working", "completed"}
    assert result == {"result": {"action": "accept", "content": {"answer": "re: which colour?"},
                                 "_meta": {RELATED_TASK: {"taskId": task["taskId"]}}}}
    assert [(t["taskId"], t["status"]) for t in listed["result"]["tasks"]] == [(task["taskId"], "completed")]
    (kind, params, thread), = person.asked
    # The handler sees the question a plain request would bring, on a handler thread.
    assert params == {"mode": "form", "message": "which colour?", "requestedSchema": FORM}
    assert thread.startswith("mcp-sync-handler-")


def test_a_sampling_request_as_a_task():
    person = Person()
    with mcp_sync.connect(asks(), input_handlers={"sampling": person.sampling}) as client:
        [created], [result] = script(
            client,
            {"send": [{"method": "sampling/createMessage",
                       "params": {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
                                  "maxTokens": 5, "task": {}}}]},
            {"send": [{"method": "tasks/result", "params": {"taskId": "$task1"}}]})
    task_id = created["result"]["task"]["taskId"]
    assert created["result"]["task"]["ttl"] == MAX_TTL_MS  # none asked: the most kept
    assert result["result"] == {"role": "assistant", "content": {"type": "text", "text": "sampled"}, "model": "m",
                                "_meta": {RELATED_TASK: {"taskId": task_id}}}


def test_a_handler_that_raises_fails_the_task_with_the_error_a_plain_request_gets():
    person = Person()
    with mcp_sync.connect(asks(), input_handlers={"form": person.form}) as client:
        [created], [result], [got] = script(
            client, {"send": [elicit("break")]},
            {"send": [{"method": "tasks/result", "params": {"taskId": "$task1"}}]},
            {"send": [{"method": "tasks/get", "params": {"taskId": "$task1"}}]})
        # The same question without a task: answered with the same error, at once.
        [[plain]] = script(client, {"send": [{"method": "elicitation/create", "params": {
            "mode": "form", "message": "break", "requestedSchema": FORM}}]})
    assert created["result"]["task"]["status"] == "working"
    error = {"code": -32603,
             "message": "client handler failed: the form handler failed: ValueError('the person walked away')"}
    assert result == {"error": error} and plain == {"error": error}
    assert (got["result"]["status"], got["result"]["statusMessage"]) == ("failed", error["message"])


def test_eight_questions_as_tasks_at_once_each_get_their_own_answer():
    person = Person()
    questions = [f"question {n}" for n in range(8)]
    with mcp_sync.connect(asks(), input_handlers={"form": person.form}) as client:
        created, results = script(
            client, {"send": [elicit(q) for q in questions]},
            {"send": [{"method": "tasks/result", "params": {"taskId": f"$task{n + 1}"}} for n in range(8)]})
    assert all(c["result"]["task"]["status"] == "working" for c in created)
    ids = [c["result"]["task"]["taskId"] for c in created]
    assert len(set(ids)) == 8
    # The n-th task created answers the n-th tasks/result; each carries the
    # answer to its own question (the tasks were created in the order sent).
    by_task = {r["result"]["_meta"][RELATED_TASK]["taskId"]: r["result"]["content"]["answer"] for r in results}
    assert sorted(by_task.values()) == sorted(f"re: {q}" for q in questions)
    asked = {params["message"] for _, params, _ in person.asked}
    assert asked == set(questions)
    assert len(person.asked) == 8


def test_tasks_result_waits_for_the_running_handler():
    gate = threading.Event()

    class OpenGate(logging.Handler):
        def emit(self, record):
            if "tasks/result is out" in record.getMessage():
                gate.set()

    def slow(params):
        assert gate.wait(10), "the server's log message never came"
        return {"action": "accept", "content": {"answer": "at last"}}

    opener = OpenGate()
    server_log = logging.getLogger("mcp_sync.server")
    level = server_log.level
    server_log.addHandler(opener)
    server_log.setLevel(logging.INFO)
    try:
        with mcp_sync.connect(asks(), input_handlers={"form": slow}) as client:
            [created], sent, [got], logged, [result] = script(
                client, {"send": [elicit("slow")]},
                {"send": [{"method": "tasks/result", "params": {"taskId": "$task1"}}], "wait": False},
                {"send": [{"method": "tasks/get", "params": {"taskId": "$task1"}}]},
                {"log": "tasks/result is out"}, {"collect": True})
    finally:
        server_log.removeHandler(opener)
        server_log.setLevel(level)
    assert got["result"]["status"] == "working"  # answered while tasks/result was held
    assert result["result"]["content"] == {"answer": "at last"}


def test_a_cancelled_task_stays_cancelled():
    release = threading.Event()

    def slow(params):
        release.wait(10)
        return {"action": "accept", "content": {"answer": "too late"}}

    with mcp_sync.connect(asks(), input_handlers={"form": slow}) as client:
        try:
            [created], [cancelled], [result], [again] = script(
                client, {"send": [elicit("slow")]},
                {"send": [{"method": "tasks/cancel", "params": {"taskId": "$task1"}}]},
                {"send": [{"method": "tasks/result", "params": {"taskId": "$task1"}}]},
                {"send": [{"method": "tasks/cancel", "params": {"taskId": "$task1"}}]})
        finally:
            release.set()
    assert cancelled["result"]["status"] == "cancelled" and valid("CancelTaskResult", cancelled["result"])
    assert result == {"error": {"code": -32603, "message": "the task was cancelled: its request has no result"}}
    assert again["error"]["code"] == -32602


def test_close_while_a_task_handler_runs_leaves_no_thread(no_leaks):
    started = threading.Event()
    seen_closed = []
    client = mcp_sync.connect(asks(), input_handlers={"form": lambda params: answer_once_closed(params)})

    def answer_once_closed(params):
        started.set()
        # Returns once close() has begun: the handler is running while it runs.
        seen_closed.append(wait_until(lambda: client.status == "closed", 10))
        return {"action": "decline"}

    try:
        [created], sent = script(client, {"send": [elicit("hold on")]},
                                 {"send": [{"method": "tasks/result", "params": {"taskId": "$task1"}}],
                                  "wait": False})
        assert created["result"]["task"]["status"] == "working"
        assert started.wait(10)
    finally:
        client.close()
    assert seen_closed == [True]


def test_close_drops_the_tasks():
    # Found in review: the table (the person's answers) stayed reachable from
    # a closed client until a new initialize.
    client = mcp_sync.connect(asks(), input_handlers={"form": lambda params: {"action": "accept",
                                                                            "content": {"answer": "secret"}}})
    try:
        script(client, {"send": [elicit("one")]},
               {"send": [{"method": "tasks/result", "params": {"taskId": "$task1"}}]})
        assert len(client._pipeline.server_requests.tasks) == 1
    finally:
        client.close()
    assert len(client._pipeline.server_requests.tasks) == 0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork()")
def test_a_fork_child_gets_a_fresh_table_even_if_its_lock_was_held():
    client = mcp_sync.connect(asks(), input_handlers={"form": lambda params: {"action": "decline"}})
    try:
        tasks = client._pipeline.server_requests.tasks
        held, stop = threading.Event(), threading.Event()

        def in_finish():  # a handler thread inside the table at the fork
            with tasks._lock:
                held.set()
                stop.wait(10)

        holder = threading.Thread(target=in_finish, daemon=True)
        holder.start()
        assert held.wait(10)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            try:
                fresh = client._pipeline.server_requests.tasks
                ok = fresh is not tasks and fresh._lock.acquire(timeout=2)
                os.write(write, b"ok" if ok else b"stuck")
            finally:
                os._exit(0)
        os.close(write)
        with os.fdopen(read, "rb") as child:
            said = child.read()
        os.waitpid(pid, 0)
        stop.set()
        holder.join(10)
        assert said == b"ok"
    finally:
        client.close()
