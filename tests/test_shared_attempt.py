"""Threads that need a server while it connects wait for that one connect
and share its outcome (`mcp_sync.shared_attempt.SharedAttempt`), in a
`ClientGroup` and in the shared clients of the web and worker integrations
(`mcp_sync.contrib._clients.Clients`). When that connect failed, each
waiting thread made its own after it, one after another: the N-th waited N
connect timeouts, and the server was started N times."""

from __future__ import annotations

import atexit
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import mcp_sync
from mcp_sync.config import load_config
from mcp_sync.contrib._clients import Clients
from mcp_sync.shared_attempt import SharedAttempt
from mcp_sync.testing import demo_server
from mcp_sync.waiting import wait_for_event
from tests.helpers import runs, wait_until


def leader_then_waiters(threads: list[threading.Thread], leading: Callable[[], bool]) -> None:
    """Start the first thread, and once `leading()` says its attempt runs,
    the others; return when they all wait for that attempt."""
    threads[0].start()
    wait_until(leading)
    for thread in threads[1:]:
        thread.start()
    wait_until(lambda: all(runs(thread, wait_for_event.__code__) for thread in threads[1:]))


def shared_by(threads: int, outcome: Callable[[], Any]) -> tuple[SharedAttempt[Any], list[str], list[Any]]:
    """(attempt, made, outcomes): `threads` threads run one `SharedAttempt` whose
    `make()` waits until they all wait for it, then returns (or raises)
    `outcome()`; what each thread got (its error, if it raised)."""
    attempt: SharedAttempt[Any] = SharedAttempt()
    release, made = threading.Event(), []
    outcomes: list[Any] = []

    def make() -> Any:
        made.append("x")
        release.wait(10)
        return outcome()

    def ask() -> None:
        try:
            outcomes.append(attempt.run(make))
        except mcp_sync.McpError as exc:
            outcomes.append(exc)

    started = [threading.Thread(target=ask) for _ in range(threads)]
    leader_then_waiters(started, lambda: bool(made))
    release.set()
    for thread in started:
        thread.join(10)
    return attempt, made, outcomes


def test_waiters_share_the_outcome_and_a_later_caller_tries_again():
    def failing() -> str:
        raise mcp_sync.ConnectError("nothing listens there")

    attempt, made, outcomes = shared_by(5, failing)
    assert made == ["x"]  # one attempt for all five
    assert [str(exc) for exc in outcomes] == ["nothing listens there"] * 5
    assert len({id(exc) for exc in outcomes}) == 5  # each thread its own copy
    assert attempt.run(lambda: "connected") == "connected"  # after the failure: a new attempt


def test_a_value_of_none_is_shared_too():
    # (The integrations' attempt gives None when close() ran while it
    # connected: a waiter in `warm()` must not connect again after it.)
    _, made, outcomes = shared_by(3, lambda: None)
    assert made == ["x"] and outcomes == [None, None, None]


def test_an_attempt_its_thread_left_by_an_interrupt_is_made_again_by_a_waiter():
    attempt: SharedAttempt[str] = SharedAttempt()
    started, release = threading.Event(), threading.Event()
    got: list[str] = []

    def interrupted() -> str:
        started.set()
        release.wait(10)
        raise KeyboardInterrupt

    def lead() -> None:
        with pytest.raises(KeyboardInterrupt):
            attempt.run(interrupted)

    leader = threading.Thread(target=lead)
    leader.start()
    assert started.wait(10)
    waiter = threading.Thread(target=lambda: got.append(attempt.run(lambda: "made by the waiter")))
    waiter.start()
    wait_until(lambda: runs(waiter, wait_for_event.__code__))
    release.set()
    leader.join(10)
    waiter.join(10)
    assert got == ["made by the waiter"]


def stalled_server(tmp_path: Path) -> tuple[list[str], Path, Callable[[], int]]:
    """(command, release, starts): a stdio server that neither answers nor
    ends until `release` exists, then exits; `starts()` counts its starts."""
    release = tmp_path / "release"
    starts = tmp_path / "starts"
    script = tmp_path / "stalled.py"
    script.write_text(
        "import os, sys, time\n"
        f"open({str(starts)!r}, 'a').write('x\\n')\n"
        f"while not os.path.exists({str(release)!r}):\n"
        "    time.sleep(0.01)\n"
        "sys.exit(3)\n")
    return [sys.executable, str(script)], release, lambda: len(starts.read_text().splitlines()) if starts.exists() else 0


def one_connect_for_five_threads(connect: Callable[[], Any], release: Path, starts: Callable[[], int]) -> None:
    """Five threads `connect()` while the first connect stalls; once they
    all wait, the server exits: every thread gets the error, and the server
    was started as often as one connect starts it."""
    errors: list[BaseException] = []

    def use() -> None:
        try:
            connect()
        except mcp_sync.McpError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=use) for _ in range(5)]
    leader_then_waiters(threads, lambda: starts() == 1)
    release.touch()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads)
    assert len(errors) == 5 and len({type(exc) for exc in errors}) == 1
    first = starts()
    with pytest.raises(type(errors[0])):
        connect()  # one connect on its own, to count its starts
    assert first == starts() - first


def test_an_attempt_whose_thread_never_started_is_not_left_running():
    # A Ctrl-C as `start` starts the thread that makes the value: the
    # attempt was published as running, nobody ran it, and every later
    # caller waited on it (for good without a deadline).
    import time

    attempt: SharedAttempt[str] = SharedAttempt()

    def interrupted(run: Callable[[], None]) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        attempt.run(lambda: "made", deadline=time.monotonic() + 30, start=interrupted)
    assert attempt.run(lambda: "again", deadline=time.monotonic() + 5,
                       start=lambda run: threading.Thread(target=run).start()) == "again"


def test_a_group_connects_a_server_once_for_the_threads_that_wait_for_it(tmp_path):
    command, release, starts = stalled_server(tmp_path)
    with mcp_sync.ClientGroup({"stalled": command}, timeout=60, probe_timeout=60) as group:
        one_connect_for_five_threads(lambda: group.client("stalled"), release, starts)


def test_shared_clients_connect_a_server_once_for_the_threads_that_wait_for_it(tmp_path):
    command, release, starts = stalled_server(tmp_path)
    config = load_config({"mcpServers": {"stalled": {"command": command[0], "args": command[1:]}}})
    clients = Clients(lambda: (config, {"timeout": 60, "probe_timeout": 60}))
    try:
        one_connect_for_five_threads(lambda: clients.get("stalled"), release, starts)
    finally:
        clients.close()


def test_a_group_replaces_a_client_its_user_closed():
    # group.client() handed out the closed client for good: every call
    # raised ConnectionClosed, "connect() makes a new one".
    with mcp_sync.ClientGroup({"demo": demo_server()}) as group:
        first = group.client("demo")
        with first:
            assert first.call_tool("echo", {"text": "hi"}).text == "hi"
        second = group.client("demo")
        assert second is not first and second.call_tool("echo", {"text": "again"}).text == "again"
        assert group.call_tool("demo.echo", {"text": "routed"}).text == "routed"


def test_shared_clients_keep_nothing_for_a_name_not_configured():
    # Each unknown name left a lock behind for good (a web app asked for
    # names from requests: memory grew with every one).
    config = load_config({"mcpServers": {"demo": {"command": sys.executable,
                                                  "args": ["-m", "mcp_sync.testing.server"]}}})
    clients = Clients(lambda: (config, {}))
    for name in ("nope", "other", "nope"):
        with pytest.raises(mcp_sync.ConfigError, match="no server named"):
            clients.get(name)
    assert clients._connects == {}
    clients.close()


def test_one_exit_hook_closes_every_registry():
    # Each registry (each Flask app, each Celery MCP) registered an atexit
    # callback of its own, never removed.
    from mcp_sync.contrib import _clients

    unregistered = []
    real = atexit.register
    atexit.register = lambda *args, **kwargs: unregistered.append(args) or real(*args, **kwargs)  # type: ignore
    try:
        made = [Clients(lambda: (load_config({"mcpServers": {}}), {})) for _ in range(50)]
    finally:
        atexit.register = real  # type: ignore
    assert unregistered == []
    closed = []
    for clients in made:
        clients.close = lambda clients=clients: closed.append(clients)  # type: ignore[method-assign]
    _clients._close_at_exit()
    assert all(any(each is clients for each in closed) for clients in made)
