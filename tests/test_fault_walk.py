"""The fault walk: every fault of the project's hostile servers, and what the
user sees.

For each fault the walk states the exact error type, the time bound (the
call's timeout + 0.5 s; a fault that breaks the channel must fail calls
with a timeout five times longer within that bound, so well before their
own timeout) and what survives:

- *usable*: the fault fails (or spoils) one call; the next call on the same
  client succeeds, on the same server process.
- *every pending call failed*: the fault kills the connection; three calls
  in flight on three threads all get the error at once. Then a stateless
  (2026-07-28) stdio client starts the server again on the next call, and an
  initialize-era one fails fast with the same error (its session is gone).

Every public call goes through `attempt()`, which also checks the promise
behind all of this: nothing but an `McpError` (or `KeyboardInterrupt`)
ever comes out of the library.

The stdio faults come from `tests/servers/hostile_stdio.py`; the HTTP ones
from `tests/servers/hostile_http.py` (a `HostileFront` before a real test
server) plus the answers written by the functions below.
"""

from __future__ import annotations

import json
import logging
import re
import socket
import struct
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import mcp_sync
from mcp_sync import Stdio
from mcp_sync.errors import (
    ConnectError,
    ConnectionClosed,
    HTTPStatusError,
    InvalidMessage,
    McpError,
    MessageTooLarge,
    OutputValidationError,
    RequestTimeout,
    ServerError,
    ServerExited,
)
from mcp_sync.testing import HTTPServer, demo_server
from tests.helpers import wait_until
from tests.servers.hostile_http import FAULTS as HTTP_FAULTS
from tests.servers.hostile_http import HostileFront, wait_for_hangup
from tests.servers.hostile_stdio import BACKTRACKING_VALUE
from tests.servers.hostile_stdio import FAULTS as STDIO_FAULTS

HOSTILE_STDIO = str(Path(__file__).parent / "servers" / "hostile_stdio.py")
STATELESS = "2026-07-28"
ERAS = [STATELESS, "2025-11-25"]
TIMEOUT = 1.0  # the timeout of the call that meets the fault
SLACK = 0.5    # the bound: an error within TIMEOUT + SLACK
FAST = 0.5     # a call on a connection known to be dead fails within this
LINE_LIMIT = 64 * 1024  # max_line_bytes / max_response_bytes for the oversize faults
PENDING = 3


# -- the invariant: nothing but McpError ---------------------------------------------------


class Outcome:
    """What one public call did: its `value` or its `error`, and how long it took."""

    def __init__(self, value: Any, error: BaseException | None, seconds: float) -> None:
        self.value, self.error, self.seconds = value, error, seconds

    def __repr__(self) -> str:
        what = f"{type(self.error).__name__}: {self.error}" if self.error else f"returned {self.value!r}"
        return f"<{what} after {self.seconds:.2f} s>"


def attempt(call: Callable[[], Any]) -> Outcome:
    """Run one public call; fail the test if it raised anything but an
    `McpError` or `KeyboardInterrupt` (with the traceback, to find where)."""
    started = time.monotonic()
    try:
        value = call()
    except (Exception, KeyboardInterrupt) as exc:  # the invariant under test (pytest's own outcomes pass)
        seconds = time.monotonic() - started
        if not isinstance(exc, (McpError, KeyboardInterrupt)):
            stack = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
            pytest.fail(f"a public call raised {type(exc).__name__}, not an McpError:\n{stack}")
        return Outcome(None, exc, seconds)
    return Outcome(value, None, time.monotonic() - started)


def expect(outcome: Outcome, error: type[BaseException], bound: float, match: str | None = None) -> None:
    """The call failed with exactly `error` (not a subclass) within `bound` seconds."""
    assert type(outcome.error) is error, f"expected {error.__name__}, got {outcome}"
    assert issubclass(type(outcome.error), McpError)
    assert outcome.seconds < bound, f"{outcome} is past the bound of {bound:g} s"
    if match is not None:
        assert re.search(match, str(outcome.error)), f"{outcome} does not say {match!r}"


def in_threads(calls: list[Callable[[], Any]], limit: float = 30) -> list[Outcome]:
    """Run the calls at once, each on a thread of its own; a broken
    invariant on any thread fails the test here."""
    outcomes: list[Outcome | None] = [None] * len(calls)
    broken: list[BaseException] = []

    def run(index: int) -> None:
        try:
            outcomes[index] = attempt(calls[index])
        except BaseException as exc:  # noqa: BLE001 - pytest.fail() from attempt(), re-raised below
            broken.append(exc)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(limit)
    assert all(not t.is_alive() for t in threads), f"a call still hangs after {limit} s: {outcomes}"
    if broken:
        raise broken[0]
    done = [o for o in outcomes if o is not None]
    assert len(done) == len(calls)
    return done


def echo_works(client: mcp_sync.Client, text: str = "after") -> None:
    outcome = attempt(lambda: client.call_tool("echo", {"text": text}, timeout=10))
    assert outcome.error is None and outcome.value.text == text, outcome


def connected(target: Any, protocol: str, **options: Any) -> mcp_sync.Client:
    outcome = attempt(lambda: mcp_sync.connect(target, protocol=protocol, timeout=10, **options))
    assert outcome.error is None, outcome
    return outcome.value


def close(client: mcp_sync.Client) -> None:
    outcome = attempt(client.close)
    assert outcome.error is None, outcome


# -- stdio -----------------------------------------------------------------------------------


def hostile_stdio(fault: str, protocol: str, *options: str, max_line_bytes: int | None = None) -> mcp_sync.Client:
    """A client of hostile_stdio.py with this fault on its `hostile` tool."""
    extra = {"max_line_bytes": max_line_bytes} if max_line_bytes else {}
    target = Stdio(sys.executable, [HOSTILE_STDIO, "--fault", fault, *options], shutdown_timeout=0.5, **extra)
    return connected(target, protocol)


def pid_of(client: mcp_sync.Client) -> int:
    return client._conn.transport.pid  # type: ignore[union-attr]


def hostile_record(record: Path) -> list[dict[str, Any]]:
    """What hostile_stdio.py recorded having received: a summary of each
    message (method, id, tool name, requestId), its own format, not the
    pid-prefixed messages of `tests.helpers.recorded`."""
    if not record.exists():
        return []
    return [json.loads(line) for line in record.read_text().splitlines()]


def hostile_call_ids(record: Path) -> list[Any]:
    return [m["id"] for m in hostile_record(record) if m["method"] == "tools/call" and m["name"] == "hostile"]


def told(record: Path, request_id: Any) -> bool:
    return any(m["method"] == "notifications/cancelled" and m["requestId"] == request_id
               for m in hostile_record(record))


# Faults that kill the connection: (error type, what its message says, options).
CONNECTION_FAULTS: dict[str, tuple[type[McpError], str, dict[str, Any]]] = {
    "garbage": (InvalidMessage, "not JSON-RPC: not JSON: this is not json", {}),
    "not_an_object": (InvalidMessage, r"a JSON list", {}),
    "oversize": (MessageTooLarge, f"longer than max_line_bytes={LINE_LIMIT}", {"max_line_bytes": LINE_LIMIT}),
    # Half a line, then the process exits: reported as the exit it is.
    "death_mid_line": (ServerExited, r"exited in the middle of a message", {}),
    "death_mid_call": (ServerExited, r"exited with code 3 \(stderr: died mid-call\)", {}),
    "deep_json": (InvalidMessage, "nested too deeply", {}),
}


@pytest.mark.parametrize("protocol", ERAS)
@pytest.mark.parametrize("fault", sorted(CONNECTION_FAULTS))
def test_a_stdio_fault_that_kills_the_connection_fails_every_pending_call(fault, protocol, tmp_path):
    error, match, options = CONNECTION_FAULTS[fault]
    record = tmp_path / "record"
    client = hostile_stdio(fault, protocol, "--pending", str(PENDING), "--record", str(record),
                           max_line_bytes=options.get("max_line_bytes"))
    try:
        first = pid_of(client)
        # A timeout far off, so that an error within TIMEOUT + SLACK is the fault's, not the clock's.
        outcomes = in_threads([lambda: client.call_tool("hostile", {}, timeout=5 * TIMEOUT)] * PENDING)
        assert len(hostile_call_ids(record)) == PENDING  # all three were in flight when it struck
        for outcome in outcomes:
            expect(outcome, error, TIMEOUT + SLACK, match)
        # The next call reconnects: a new server process (and, in the
        # initialize era, a new handshake).
        echo_works(client)
        assert pid_of(client) != first
    finally:
        close(client)


@pytest.mark.parametrize("protocol", ERAS)
def test_a_server_that_dies_mid_line_is_reported_as_exited(protocol):
    client = hostile_stdio("death_mid_line", protocol)
    try:
        outcome = attempt(lambda: client.call_tool("hostile", {}, timeout=TIMEOUT))
        expect(outcome, ServerExited, TIMEOUT + SLACK)
        assert outcome.error.returncode == 3  # type: ignore[union-attr]
        assert "died mid-line" in outcome.error.stderr_tail  # type: ignore[union-attr]
    finally:
        close(client)


# Faults that spoil one call: (error type or None when the call returns,
# what the error or the returned text says, whether the client must tell the
# server it gave up, the call's timeout).
REQUEST_FAULTS: dict[str, tuple[type[McpError] | None, str, bool, float]] = {
    "hang": (RequestTimeout, "timed out after 1 s", True, TIMEOUT),
    "wrong_id": (RequestTimeout, "timed out after 1 s", True, TIMEOUT),
    "duplicate_id": (None, "^first$", False, TIMEOUT),
    "result_and_error": (ServerError, r"-32000 \(tools/call\): both result and error", False, TIMEOUT),
    "unknown_request": (None, r'"code": -32601', False, TIMEOUT),
    # Work the client must keep up with: 20 000 notifications, 10 MB of stderr.
    "flood": (None, "^20000$", False, 5.0),
    "huge_stderr": (None, "^after 10 MB of stderr$", False, 5.0),
    # structuredContent that the tool's outputSchema pattern "(x+x+)+y"
    # backtracks on (forever with `re`, minutes with `regex` unbounded): the
    # match is cut off at the call's deadline and the result is refused,
    # not hung on.
    "backtracking_pattern": (OutputValidationError, r"'\(x\+x\+\)\+y' had not finished matching when the call's deadline came",
                             False, TIMEOUT),
}


@pytest.mark.parametrize("protocol", ERAS)
@pytest.mark.parametrize("fault", sorted(REQUEST_FAULTS))
def test_a_stdio_fault_that_spoils_one_call_leaves_the_client_usable(fault, protocol, tmp_path, caplog):
    error, match, tells, timeout = REQUEST_FAULTS[fault]
    record = tmp_path / "record"
    client = hostile_stdio(fault, protocol, "--record", str(record))
    progress: list[float] = []
    try:
        first = pid_of(client)
        if fault == "backtracking_pattern":
            # The client knows the tool's definition (its outputSchema), as after any listing.
            listed = attempt(client.list_tools)
            assert listed.error is None, listed
        with caplog.at_level(logging.WARNING, logger="mcp_sync.client"):
            outcome = attempt(lambda: client.call_tool("hostile", {}, timeout=timeout,
                                                       progress=lambda p: progress.append(p.progress)))
        if error is None:
            assert outcome.error is None, outcome
            assert re.search(match, outcome.value.text), outcome.value.text
            assert outcome.seconds < timeout
        else:
            expect(outcome, error, timeout + SLACK, match)
        if error is RequestTimeout:
            assert outcome.seconds >= timeout - 0.05, f"{outcome} came before the timeout"
        if tells:
            (call_id,) = hostile_call_ids(record)
            assert wait_until(lambda: told(record, call_id), timeout=5), (
                f"the server was not told: {hostile_record(record)}")
        if fault == "flood":
            assert progress and progress[-1] == 19998  # the latest progress the server sent gets through
        if fault == "huge_stderr":
            assert len(client._conn.transport.stderr_tail) <= 20  # type: ignore[union-attr]
        if fault == "backtracking_pattern":
            # Cut off at the call's deadline (timeout=1 s), not before: the
            # server answered at once, so the pattern had the whole second.
            assert outcome.seconds >= timeout - 0.1, outcome
            assert outcome.error.result["structuredContent"] == {"value": BACKTRACKING_VALUE}  # type: ignore[union-attr]
            assert "value: the pattern '(x+x+)+y'" in outcome.error.errors[0]  # type: ignore[union-attr]
            assert "call_tool({'name': 'hostile'}" in str(outcome.error)  # what to do next
            assert "'(x+x+)+y'" in caplog.text  # one warning names it
        # The same process answers the next call, with its own answer.
        echo_works(client)
        assert pid_of(client) == first
    finally:
        close(client)


def test_the_walk_covers_every_stdio_fault():
    assert set(STDIO_FAULTS) == set(CONNECTION_FAULTS) | set(REQUEST_FAULTS)


# -- HTTP ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def upstream():
    httpd = HTTPServer(demo_server()).start()
    yield httpd
    httpd.close()


def _json_answer(sock: socket.socket, body: bytes, status: bytes = b"200 OK",
                 content_type: bytes = b"application/json") -> None:
    """A whole answer, after which the front closes the socket (so it says so)."""
    sock.sendall(b"HTTP/1.1 " + status + b"\r\nContent-Type: " + content_type +
                 b"\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % len(body) + body)


def _result(message: dict[str, Any], text: str, request_id: Any = None) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": message.get("id") if request_id is None else request_id,
                       "result": {"content": [{"type": "text", "text": text}]}}).encode()


def garbage_status_line(front: HostileFront, sock: socket.socket, message: dict[str, Any]) -> None:
    sock.sendall(b"HTTPX/9 what is this\r\n\r\n")


def closed_mid_body(front: HostileFront, sock: socket.socket, message: dict[str, Any]) -> None:
    body = _result(message, "cut")
    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
                 + body[: len(body) // 2])


def reset_before_answering(front: HostileFront, sock: socket.socket, message: dict[str, Any]) -> None:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with RST


def hang_before_headers(front: HostileFront, sock: socket.socket, message: dict[str, Any]) -> None:
    wait_for_hangup(front, sock)


def html_500(front: HostileFront, sock: socket.socket, message: dict[str, Any]) -> None:
    body = b"<html><body><h1>Internal Server Error</h1>" + b"<p>stack trace</p>" * 5000 + b"</body></html>"
    _json_answer(sock, body, status=b"500 Internal Server Error", content_type=b"text/html")


def oversize_body(front: HostileFront, sock: socket.socket, message: dict[str, Any]) -> None:
    _json_answer(sock, _result(message, "x" * (4 * LINE_LIMIT)))


def oversize_chunked_body(front: HostileFront, sock: socket.socket, message: dict[str, Any]) -> None:
    body = _result(message, "x" * (4 * LINE_LIMIT))
    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
                 b"Connection: close\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))


def deep_json_body(front: HostileFront, sock: socket.socket, message: dict[str, Any]) -> None:
    _json_answer(sock, b"[" * 100_000 + b"]" * 100_000)


def deep_json_event(front: HostileFront, sock: socket.socket, message: dict[str, Any]) -> None:
    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
                 b"data: " + b"[" * 100_000 + b"\n\n")


def wrong_id_body(front: HostileFront, sock: socket.socket, message: dict[str, Any]) -> None:
    _json_answer(sock, _result(message, "misrouted", request_id=999_999))


def sse_cut_mid_event(front: HostileFront, sock: socket.socket, message: dict[str, Any]) -> None:
    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"
                 b'data: {"jsonrpc": "2.0", "id": ')


def sse_ends_without_answer(front: HostileFront, sock: socket.socket, message: dict[str, Any]) -> None:
    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n: just a comment\n\n")


def result_and_error_body(front: HostileFront, sock: socket.socket, message: dict[str, Any]) -> None:
    answer = json.loads(_result(message, "and also an error"))
    answer["error"] = {"code": -32000, "message": "both result and error"}
    _json_answer(sock, json.dumps(answer).encode())


# name: (fault, error type, what its message says, HTTP options)
HTTP_ANSWER_FAULTS: dict[str, tuple[Callable[..., None], type[McpError], str, dict[str, Any]]] = {
    "garbage_status_line": (garbage_status_line, ConnectError, "not an HTTP/1.x status line", {}),
    "closed_mid_body": (closed_mid_body, ConnectError, "body ended .* short", {}),
    "reset_before_answering": (reset_before_answering, ConnectError, "reset by peer", {}),
    "html_500": (html_500, HTTPStatusError, "HTTP 500: Internal Server Error stack trace", {}),  # its text, not its markup
    "oversize_body": (oversize_body, MessageTooLarge, f"over max_response_bytes={LINE_LIMIT}",
                      {"max_response_bytes": LINE_LIMIT}),
    "oversize_chunked_body": (oversize_chunked_body, MessageTooLarge, f"over max_response_bytes={LINE_LIMIT}",
                              {"max_response_bytes": LINE_LIMIT}),
    "deep_json_body": (deep_json_body, InvalidMessage, "nested too deeply", {}),
    "deep_json_event": (deep_json_event, InvalidMessage, "nested too deeply", {}),
    "wrong_id_body": (wrong_id_body, InvalidMessage, "answered request .* with something else", {}),
    # The SSE parser dispatches an unterminated last event on purpose (see
    # mcp_sync/protocol/sse.py), so half an event is a message that is not JSON.
    "sse_cut_mid_event": (sse_cut_mid_event, InvalidMessage, "SSE event .* is not JSON-RPC", {}),
    "sse_ends_without_answer": (sse_ends_without_answer, ConnectionClosed, "ended before the response", {}),
    "result_and_error_body": (result_and_error_body, ServerError, "-32000", {}),
}


@pytest.mark.parametrize("protocol", ERAS)
@pytest.mark.parametrize("fault", sorted(HTTP_FAULTS) + ["hang_before_headers"])
def test_an_http_answer_that_stalls_times_out_on_time_and_the_client_stays_usable(upstream, fault, protocol):
    hostile = HTTP_FAULTS.get(fault, hang_before_headers)
    with HostileFront(upstream.url, {"tools/call": hostile}) as front:
        client = connected(front.url, protocol)
        try:
            outcome = attempt(lambda: client.call_tool("echo", {"text": "x"}, timeout=TIMEOUT))
            expect(outcome, RequestTimeout, TIMEOUT + SLACK)
            assert outcome.seconds >= TIMEOUT - 0.05
            assert front.hung_up.wait(5), "the client kept the stalled answer's connection open"
            front.faults.clear()
            echo_works(client)
        finally:
            close(client)


@pytest.mark.parametrize("protocol", ERAS)
@pytest.mark.parametrize("fault", sorted(HTTP_ANSWER_FAULTS))
def test_a_broken_http_answer_fails_that_call_and_the_client_stays_usable(upstream, fault, protocol):
    hostile, error, match, options = HTTP_ANSWER_FAULTS[fault]
    with HostileFront(upstream.url, {"tools/call": hostile}) as front:
        client = connected(front.url, protocol, **options)
        try:
            expect(attempt(lambda: client.call_tool("echo", {"text": "x"}, timeout=TIMEOUT)),
                   error, TIMEOUT + SLACK, match)
            front.faults.clear()
            echo_works(client)
        finally:
            close(client)


@pytest.mark.parametrize("protocol", ERAS)
def test_an_http_server_that_drops_every_connection_fails_every_pending_call(upstream, protocol):
    """Three calls in flight; the server resets all three connections at once."""
    everyone_in = threading.Barrier(PENDING, timeout=10)

    def drop_when_all_arrived(front: HostileFront, sock: socket.socket, message: dict[str, Any]) -> None:
        everyone_in.wait()
        reset_before_answering(front, sock, message)

    with HostileFront(upstream.url, {"tools/call": drop_when_all_arrived}) as front:
        client = connected(front.url, protocol)
        try:
            outcomes = in_threads([lambda: client.call_tool("echo", {"text": "x"}, timeout=5 * TIMEOUT)] * PENDING)
            for outcome in outcomes:
                expect(outcome, ConnectError, TIMEOUT + SLACK, "reset by peer")
            front.faults.clear()
            echo_works(client)
        finally:
            close(client)


def test_without_reconnect_an_initialize_era_connection_killed_by_a_fault_stays_failed(tmp_path):
    target = Stdio(sys.executable, [HOSTILE_STDIO, "--fault", "death_mid_call"], shutdown_timeout=0.5)
    client = mcp_sync.connect(target, protocol="2025-11-25", reconnect=False, timeout=5)
    try:
        expect(attempt(lambda: client.call_tool("hostile", {}, timeout=TIMEOUT)), ServerExited, TIMEOUT + SLACK)
        # The session died with the process: every later call says why, at once.
        expect(attempt(lambda: client.call_tool("echo", {"text": "x"}, timeout=TIMEOUT)), ServerExited, FAST)
    finally:
        close(client)
