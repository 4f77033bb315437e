"""What many test modules share: waiting for a condition, the command
lines of the test servers, a thread that cannot start, reaping forked
children. Plain functions: test modules import them from here (pytest's
fixtures stay in conftest.py, which no test module imports).
"""

import collections
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
SCRIPTED = str(HERE / "servers" / "scripted.py")

#: What a wall-clock upper bound allows on top of the time it checks for: a
#: loaded CI machine may leave a ready thread unscheduled this long. A bound
#: that proves "did not wait for X" keeps X well above its bound plus this.
SLACK = 1.0

#: The multi-second margin of a bound on work that crosses processes or
#: sockets (a subprocess's exit, a server's close, a round of negotiation)
#: on a loaded two-CPU machine: it takes well under a second when healthy.
#: Only for ruling out a wait of 10 s or more (a 30 s timeout, a 600 s
#: tool): a bound that must stay below a shorter wait uses SLACK.
GENEROUS = 5.0


def scripted(*args: str) -> list[str]:
    """The command line of the scripted stdio server with these options."""
    return [sys.executable, SCRIPTED, *args]


def next_event(sub, kinds, timeout: float = 10.0):
    """The next event of a subscription that is one of `kinds`, skipping
    others (`sub.next` raises `RequestTimeout` when none comes in time)."""
    limit = time.monotonic() + timeout
    while True:
        event = sub.next(timeout=max(limit - time.monotonic(), 0.01))
        if isinstance(event, kinds):
            return event


def process_alive(pid: int) -> bool:
    """Is `pid` running? A zombie (dead, not yet reaped by whoever adopted it) is not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return not os.path.isdir("/proc")  # gone meanwhile; without /proc, kill() is all we know


def reap(pids, timeout: float):
    """Exit codes of forked children, waited for until `timeout`; a child
    still running then is killed and reported as hung (None)."""
    codes = {}
    deadline = time.monotonic() + timeout
    while len(codes) < len(pids) and time.monotonic() < deadline:
        for pid in pids:
            if pid in codes:
                continue
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                codes[pid] = os.waitstatus_to_exitcode(status)
        time.sleep(0.02)
    for pid in pids:
        if pid not in codes:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            codes[pid] = None
    return [codes[pid] for pid in pids]


def wait_until(predicate, timeout: float = 10.0, interval: float = 0.01) -> bool:
    """Poll `predicate` until it is true or `timeout` runs out; its result.

    For conditions the code under test offers no event for (a counter on
    another thread); never a stand-in for an outcome the test asserts on.
    """
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
    return True


def cyclic_garbage(call, expected=None, times: int = 20, warm: int = 3, attempts: int = 3) -> int:
    """Objects the cyclic collector finds after `times` calls of `call`
    made with it off (each must raise `expected`, or return when it is
    None), after `warm` calls that fill first-call caches. 0: nothing the
    calls left waits for the collector.

    The collector counts the whole process: what another test's thread
    lets go of while it ends (a server it shut down) lands in the count
    too. So a count that is not 0 is taken again, up to `attempts` times,
    and the smallest returned: a cycle the calls make shows in every
    attempt, at least `times` objects each."""
    import gc

    import pytest

    def once() -> None:
        if expected is None:
            call()
        else:
            with pytest.raises(expected):
                call()

    for _ in range(warm):
        once()
    found = []
    for _ in range(attempts):
        gc.collect()
        gc.disable()
        try:
            for _ in range(times):
                once()
            found.append(gc.collect())
        finally:
            gc.enable()
        if found[-1] == 0:
            break
    return min(found)


class NoThread(threading.Thread):
    """A thread that cannot start, as when the process is out of threads:
    patched in for `threading.Thread` where a module makes its threads."""

    def start(self) -> None:
        raise RuntimeError("can't start new thread")


def demo_command(*args: str) -> list[str]:
    """The command line of the bundled demo server as a stdio program."""
    return [sys.executable, "-m", "mcp_sync.testing.server", *args]


def runs(thread: threading.Thread, code) -> bool:
    """Whether `thread` is running `code` (a code object) now, at any depth
    of its stack."""
    frame = sys._current_frames().get(thread.ident or -1)
    while frame is not None:
        if frame.f_code is code:
            return True
        frame = frame.f_back
    return False


def interrupt_inside(code) -> list:
    """Interrupt the main thread (`_thread.interrupt_main()`, as notebook
    kernels do) once it runs `code` (a code object); returns the list that
    gets the `time.monotonic()` of the interrupt."""
    import _thread

    main = threading.main_thread()
    at: list = []

    def interrupter() -> None:
        while not runs(main, code):
            time.sleep(0.005)
        at.append(time.monotonic())
        _thread.interrupt_main()

    threading.Thread(target=interrupter, daemon=True).start()
    return at


def hanging_server(tmp_path):
    """(flag, launcher): a demo server launcher that, once `flag` exists,
    starts a server that never answers and ignores the end of its input (a
    wedged restart). Each start adds a line to `tmp_path / "starts"`."""
    flag = tmp_path / "hang"
    launcher = tmp_path / "launch_hanging.py"
    launcher.write_text(
        "import os, sys, time\n"
        f"open({str(tmp_path / 'starts')!r}, 'a').write('x\\n')\n"
        f"if os.path.exists({str(flag)!r}):\n"
        "    sys.stdin.read()\n"
        "    time.sleep(60)\n"
        "os.execv(sys.executable, [sys.executable, '-m', 'mcp_sync.testing.server'])\n")
    return flag, launcher


def recorded(record: Path) -> list[tuple[int, dict]]:
    """What a scripted server started with `--record FILE` read, in order:
    (the pid of the server process that read it, the message); a restarted
    server's lines carry its new pid."""
    out = []
    for line in record.read_text().splitlines():
        pid, _, text = line.partition(" ")
        out.append((int(pid), json.loads(text)))
    return out


def recorded_messages(record: Path) -> list[dict]:
    """The messages of `recorded(record)`, in order, without the pids."""
    return [message for _, message in recorded(record)]


def hammer_echo(client, threads: int, calls: int):
    """Each thread calls echo with its own text and checks what comes back."""
    results = collections.defaultdict(list)
    errors = []
    barrier = threading.Barrier(threads)

    def worker(n):
        barrier.wait()
        try:
            for i in range(calls):
                text = f"thread {n} call {i}"
                got = client.call_tool("echo", {"text": text}).text
                results[n].append((text, got))
        except Exception as exc:  # collected and asserted on below
            errors.append((n, exc))

    pool = [threading.Thread(target=worker, args=(n,), name=f"hammer-{n}") for n in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in pool), "deadlock: some callers never returned"
    return results, errors


def check_echoes(results, errors, threads: int, calls: int):
    """Every thread of `hammer_echo` got each of its own answers, once."""
    assert errors == []
    assert sorted(results) == list(range(threads))
    for n, pairs in results.items():
        assert len(pairs) == calls  # nothing lost or duplicated
        for sent, got in pairs:
            assert got == sent  # nothing crossed


class Injected(KeyboardInterrupt):
    """The interrupt a test lands at a chosen point (`interrupt_at_point`)."""


def interrupt_at_point(k: int, is_point: Callable[[Any, str, Any], bool],
                       describe: Callable[[Any, str, Any], str]) -> tuple[Callable[..., Any], list[str]]:
    """A profile function (for `sys.setprofile`) that raises `Injected` at
    the k-th event of this thread for which `is_point(frame, event, arg)`
    holds (a place where CPython delivers an asynchronous exception, such
    as Ctrl-C), and the list where it records that place (`describe`)."""
    seen, fired = [0], []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if fired or not is_point(frame, event, arg):
            return
        if seen[0] == k:
            fired.append(describe(frame, event, arg))
            raise Injected()
        seen[0] += 1

    return profile, fired
