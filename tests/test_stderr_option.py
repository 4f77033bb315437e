"""`Stdio(stderr=...)`: where a stdio server's stderr lines go."""

import logging
import sys
import threading
import time

import pytest

import mcp_sync
from mcp_sync import Stdio
from mcp_sync.transports import stderr as stderr_module
from mcp_sync.transports.stderr import RateLimit, StderrLines
from tests.helpers import scripted

STATELESS = "2026-07-28"


def chatty(lines: int, **options) -> Stdio:
    """The scripted server, writing `lines` lines to stderr as it starts."""
    return Stdio(sys.executable, scripted("--stderr-lines", str(lines))[1:], **options)


def run(target: Stdio) -> None:
    # close() joins the stderr drain: every line was handled when it returns.
    with mcp_sync.connect(target, protocol=STATELESS) as client:
        assert client.call_tool("echo", {"text": "hi"}).text == "hi"


def test_log_sends_lines_to_the_logger_and_prints_nothing(caplog, capsys, no_leaks):
    with caplog.at_level(logging.INFO, logger="mcp_sync.server.stderr"):
        run(chatty(3, stderr="log"))
    records = [r.getMessage() for r in caplog.records if r.name == "mcp_sync.server.stderr"]
    assert len(records) == 3 and "chatty line 2" in records[-1]
    assert "chatty line" not in capsys.readouterr().err


def test_the_default_outside_a_notebook_is_the_logger(caplog, capsys, no_leaks):
    with caplog.at_level(logging.INFO, logger="mcp_sync.server.stderr"):
        run(chatty(2))
    assert len([r for r in caplog.records if r.name == "mcp_sync.server.stderr"]) == 2
    assert "chatty line" not in capsys.readouterr().err


def test_print_copies_each_line_to_sys_stderr(caplog, capsys, no_leaks):
    with caplog.at_level(logging.INFO, logger="mcp_sync.server.stderr"):
        run(chatty(250, stderr="print"))
    err = capsys.readouterr().err.splitlines()
    printed = [line for line in err if "chatty line" in line]
    assert len(printed) == 250  # an explicit "print" has no rate limit
    assert printed[0].startswith(f"[{__import__('os').path.basename(sys.executable)}] chatty line 0 ")
    assert not [r for r in caplog.records if r.name == "mcp_sync.server.stderr"]


def test_a_callable_gets_every_line_and_its_failures_are_logged(caplog, no_leaks):
    seen: list[str] = []

    def collect(line: str) -> None:
        seen.append(line)
        if len(seen) % 2:
            raise RuntimeError("user code failed")

    with caplog.at_level(logging.DEBUG, logger="mcp_sync.transport.stdio"):
        run(chatty(5, stderr=collect))
    assert [line.split(" x")[0] for line in seen] == [f"chatty line {i}" for i in range(5)]
    failures = [r for r in caplog.records if "stderr callback" in r.getMessage()]
    assert [r.levelno for r in failures] == [logging.WARNING, logging.DEBUG, logging.DEBUG]


def test_the_callable_runs_on_the_stderr_thread_not_the_reader(no_leaks):
    threads: set[str] = set()
    run(chatty(1, stderr=lambda line: threads.add(threading.current_thread().name)))
    (name,) = threads
    assert name.startswith("mcp-sync-stderr-")


def test_the_notebook_default_prints_at_a_limited_rate_and_summarises(monkeypatch, capsys, caplog, no_leaks):
    monkeypatch.setattr(stderr_module, "in_jupyter_kernel", lambda: True)
    started = time.monotonic()
    with caplog.at_level(logging.INFO, logger="mcp_sync.server.stderr"):
        run(chatty(1000))
    elapsed = time.monotonic() - started
    err = capsys.readouterr().err.splitlines()
    printed = [line for line in err if "chatty line" in line]
    summaries = [line for line in err if "of server stderr not shown" in line]
    assert len([line for line in err if "more server stderr than 20 lines a second" in line]) == 1
    # The burst of 100, and at 20 lines a second the few more the run's time allows.
    assert 100 <= len(printed) <= 100 + 20 * elapsed + 1
    hidden = sum(int(line.split("\u2026 ")[1].split()[0]) for line in summaries)
    assert summaries and len(printed) + hidden == 1000
    # The hidden lines are not lost to whoever configured logging.
    assert len([r for r in caplog.records if r.name == "mcp_sync.server.stderr"]) == hidden


def test_the_rate_limit_with_a_clock():
    now = [0.0]
    limit = RateLimit(rate=2, burst=3, clock=lambda: now[0])
    assert [limit.allow() for _ in range(4)] == [True, True, True, False]
    now[0] += 0.5  # one more line's worth
    assert [limit.allow(), limit.allow()] == [True, False]
    now[0] += 100  # refills to the burst, no further
    assert sum(limit.allow() for _ in range(10)) == 3


def test_a_summary_comes_before_the_next_shown_line(capsys):
    now = [0.0]
    lines = StderrLines("print", "/usr/bin/server", limit=RateLimit(1, 1, clock=lambda: now[0]))
    for text in ("a", "b", "c"):
        lines.line(text)
    now[0] += 1
    lines.line("d")
    lines.finish()
    assert capsys.readouterr().err.splitlines() == [
        "[server] a",
        "[server] \u2026 more server stderr than 1 line a second: the rest is counted, not shown",
        "[server] \u2026 2 lines of server stderr not shown",
        "[server] d",
    ]


def test_one_line_not_shown_is_counted_in_the_singular(capsys):
    now = [0.0]
    lines = StderrLines("print", "server", limit=RateLimit(1, 1, clock=lambda: now[0]))
    lines.line("a")
    lines.line("b")
    lines.finish()
    assert capsys.readouterr().err.splitlines()[-1] == "[server] \u2026 1 line of server stderr not shown"


def test_jupyter_detection(monkeypatch):
    class ZMQInteractiveShell:
        pass

    class Kernel(ZMQInteractiveShell):
        pass

    class TerminalInteractiveShell:
        pass

    fake_ipython = type(sys)("IPython")
    monkeypatch.setitem(sys.modules, "IPython", fake_ipython)
    monkeypatch.delitem(sys.modules, "ipykernel", raising=False)
    fake_ipython.get_ipython = Kernel  # type: ignore[attr-defined]
    assert not stderr_module.in_jupyter_kernel()  # no ipykernel loaded
    monkeypatch.setitem(sys.modules, "ipykernel", type(sys)("ipykernel"))
    assert stderr_module.in_jupyter_kernel()
    fake_ipython.get_ipython = TerminalInteractiveShell  # type: ignore[attr-defined]
    assert not stderr_module.in_jupyter_kernel()
    fake_ipython.get_ipython = lambda: None  # type: ignore[attr-defined]
    assert not stderr_module.in_jupyter_kernel()


@pytest.mark.parametrize("bad, error", [("loud", ValueError), (3, TypeError)])
def test_bad_values_are_refused_up_front(bad, error):
    with pytest.raises(error, match="stderr must be 'log', 'print' or a callable"):
        Stdio(sys.executable, ["-c", "pass"], stderr=bad)


class GatedHandler(logging.Handler):
    """A logging handler that holds every line until `gate` is set, and
    notes which thread each line reached it on."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.lines: list[str] = []
        self.threads: set[str] = set()

    def emit(self, record: logging.LogRecord) -> None:
        self.gate.wait(30)
        self.threads.add(threading.current_thread().name)
        self.lines.append(record.getMessage())


def gated_logger():
    handler = GatedHandler()
    logger = logging.getLogger("mcp_sync.server.stderr")
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    return handler, lambda: (logger.removeHandler(handler), logger.setLevel(old_level))


def test_a_logging_handler_that_blocks_never_holds_up_a_response(no_leaks):
    # The reader reads stderr and stdout; the lines reach logging on a
    # thread of their own, so a handler that blocks (a network log handler
    # whose peer is down) delays no response.
    handler, undo = gated_logger()
    try:
        with mcp_sync.connect(chatty(3, stderr="log"), protocol=STATELESS, timeout=5) as client:
            for n in range(5):
                assert client.call_tool("echo", {"text": f"call {n}"}).text == f"call {n}"
            assert handler.lines == []  # all still held by the handler
            handler.gate.set()
    finally:
        handler.gate.set()
        undo()
    assert [line.split("] ", 1)[1].split(" x")[0] for line in handler.lines] == [
        "chatty line 0", "chatty line 1", "chatty line 2"]
    assert not any(name.startswith("mcp-sync-reader") for name in handler.threads), handler.threads


def test_a_destination_slower_than_the_server_loses_no_line(no_leaks):
    # 5,000 lines (over 500 KB) against a handler that takes none until the
    # hand-off is full: the reader stops reading stderr meanwhile, and once
    # the handler moves, every line arrives, in order.
    from tests.helpers import wait_until

    handler, undo = gated_logger()
    try:
        with mcp_sync.connect(chatty(5000, stderr="log"), protocol=STATELESS, timeout=30) as client:
            transport = client._conn.transport
            assert wait_until(lambda: transport._handoff is not None and transport._handoff.full(), 10)
            handler.gate.set()
            assert client.call_tool("echo", {"text": "still here"}).text == "still here"
            # Every line arrives while the client is open. (close() gives a
            # destination still busy a bounded time, then counts what is
            # left: a loaded machine forwarding the last 2,800 lines could
            # be cut short there, which is not what this test is about.)
            assert wait_until(lambda: len(handler.lines) >= 5000, 30), len(handler.lines)
    finally:
        handler.gate.set()
        undo()
    numbers = [int(line.split("chatty line ")[1].split()[0]) for line in handler.lines]
    assert numbers == list(range(5000))


class Destination:
    """Stands in for `StderrLines`: records lines, raises on "bad", blocks
    on "hold" until `release` is set."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.finished = threading.Event()
        self.holding = threading.Event()  # set once "hold" reached the destination
        self.release = threading.Event()

    def line(self, text: str) -> None:
        if text == "hold":
            self.holding.set()
            self.release.wait(30)
        if text == "bad":
            raise ValueError("a logging filter that raises")
        self.lines.append(text)

    def finish(self) -> None:
        self.finished.set()


def test_a_handoff_goes_on_after_a_line_its_destination_refused():
    destination = Destination()
    handoff = stderr_module.Handoff(destination, "srv")
    for text in ("one", "bad", "two"):
        handoff.line(text)
    handoff.finish()
    assert destination.finished.wait(5)
    assert destination.lines == ["one", "two"]
    assert not handoff.full() and handoff.has_room()


def test_a_handoff_stopped_at_close_forwards_no_more_and_says_how_many(caplog):
    destination = Destination()
    handoff = stderr_module.Handoff(destination, "srv", max_chars=20)
    handoff.line("hold")
    for n in range(5):
        handoff.line(f"line {n}")
    assert handoff.full() and not handoff.has_room()  # the reader would pause here
    assert destination.holding.wait(5)
    thread = handoff.thread
    handoff.stop(0.05)  # the destination still holds the first line
    destination.release.set()
    assert thread is not None
    thread.join(5)
    assert destination.lines == ["hold"]  # nothing after the stop
    assert "5 stderr lines of server srv were not logged" in caplog.text


def test_a_handoff_whose_thread_could_not_start_tries_again(monkeypatch):
    from tests.helpers import NoThread

    destination = Destination()
    handoff = stderr_module.Handoff(destination, "srv", max_chars=10)
    monkeypatch.setattr(stderr_module.threading, "Thread", NoThread)
    handoff.line("a line longer than ten characters")
    assert handoff.thread is None and handoff.full()
    monkeypatch.undo()
    assert not handoff.has_room()  # and it started the thread
    handoff.finish()
    assert destination.finished.wait(5)
    assert destination.lines == ["a line longer than ten characters"]


def test_a_servers_last_stderr_lines_are_logged_before_its_exit_is(no_leaks):
    # The reader hands stderr lines to a thread of their own; when the
    # server exits, its report waits (briefly) for the lines queued, so a
    # log reads in the order things happened even with a slow handler.
    order = []

    class Recorder(logging.Handler):
        def __init__(self, slow):
            super().__init__(logging.DEBUG)
            self.slow = slow

        def emit(self, record):
            if self.slow:
                time.sleep(0.1)  # a destination slower than the reader, not the test waiting
            order.append((record.name, record.getMessage()))

    slow, fast = Recorder(True), Recorder(False)
    stderr_logger, connection_logger = logging.getLogger("mcp_sync.server.stderr"), logging.getLogger(
        "mcp_sync.connection")
    levels = stderr_logger.level, connection_logger.level
    stderr_logger.addHandler(slow)
    connection_logger.addHandler(fast)
    stderr_logger.setLevel(logging.INFO)
    connection_logger.setLevel(logging.DEBUG)
    try:
        with mcp_sync.connect([sys.executable, "-m", "mcp_sync.testing.server"]) as client:
            with pytest.raises(mcp_sync.ServerExited):
                client.call_tool("crash")
    finally:
        stderr_logger.removeHandler(slow)
        connection_logger.removeHandler(fast)
        stderr_logger.setLevel(levels[0])
        connection_logger.setLevel(levels[1])
    crash = next(i for i, (name, text) in enumerate(order) if "crashing on purpose" in text
                 and name == "mcp_sync.server.stderr")
    failed = next(i for i, (name, text) in enumerate(order) if text.startswith("transport failed"))
    assert crash < failed, order
