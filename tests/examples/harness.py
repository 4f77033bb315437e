"""What the recipe tests share: starting a program for real, firing requests, finding leftovers.

Every process is started in a session of its own, so that `stop()` can end
it and everything it started, even when a test fails halfway. The MCP
servers the recipes start are found by a marker on their command line
(`--name recipe-<random>`), which is how a test checks that a recipe closed
its clients: no server process with the marker may outlive the recipe.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
REQUESTS = 200


class Launched:
    """A program started for a test: its output kept (last 500 lines), stoppable."""

    def __init__(self, args: list[str], *, cwd: Path = EXAMPLES, env: dict[str, str] | None = None) -> None:
        self.args = args
        self.proc = subprocess.Popen(
            args, cwd=cwd, env={**os.environ, **(env or {})},
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.lines: collections.deque[str] = collections.deque(maxlen=500)
        self._seen = 0  # lines ever read (the deque forgets the oldest)
        self._eof = False
        self._changed = threading.Condition()
        self._drain = threading.Thread(target=self._read, name="recipe-output", daemon=True)
        self._drain.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            with self._changed:
                self.lines.append(raw.decode("utf-8", "replace").rstrip())
                self._seen += 1
                self._changed.notify_all()
        with self._changed:
            self._eof = True
            self._changed.notify_all()

    @property
    def output(self) -> str:
        with self._changed:
            return "\n".join(self.lines)

    def wait_for(self, pattern: str, timeout: float = 15.0) -> re.Match[str]:
        """The first output line matching `pattern`; fails with the output when none comes."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for line in self.lines:
                    found = regex.search(line)
                    if found:
                        return found
                left = deadline - time.monotonic()
                if self._eof or left <= 0:
                    break
                self._changed.wait(left)
        raise AssertionError(f"no line matching {pattern!r} from {self.args}; output:\n{self.output}")

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM (a graceful stop), then SIGKILL to the whole session; the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        graceful = self.proc.poll()
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # workers left behind by a master that died
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait(5)
        self._drain.join(5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return graceful


def new_marker() -> str:
    return f"recipe-{uuid.uuid4().hex[:12]}"


def stdio_command(marker: str) -> str:
    """`MCP_SERVER` for the bundled demo server over stdio, with the marker as its name."""
    return f"{sys.executable} -m mcp_sync.testing --name {marker}"


def server_processes(marker: str) -> dict[int, int]:
    """The live processes with `marker` on their command line: pid -> parent pid."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                args = cmdline.read().split(b"\0")
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if marker.encode() in args and fields[0] != "Z":
            found[int(entry)] = int(fields[1])
    return found


def wait_until_gone(marker: str, timeout: float = 10.0) -> dict[int, int]:
    """Poll until no process carries `marker`; those still there at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        left = server_processes(marker)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def kill_marked(marker: str) -> None:
    for pid in server_processes(marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@attrs.frozen
class Answer:
    token: str
    status: int | None
    body: dict[str, Any] | None
    latency: float
    error: str | None

    @property
    def correct(self) -> bool:
        return self.status == 200 and self.body is not None and self.body.get("text") == self.token


def get_json(url: str, timeout: float = 20.0) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def wait_http(base: str, timeout: float = 15.0) -> None:
    """Poll until the server answers HTTP at all (any status): its app is loaded."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(base + "/", timeout=timeout):
                return
        except urllib.error.HTTPError:
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def fire(base: str, n: int = REQUESTS, path: str = "/echo?text=") -> list[Answer]:
    """`n` requests at once, each asking to echo its own token; every answer, in order."""
    tokens = [f"t{i}-{uuid.uuid4().hex}" for i in range(n)]
    start = threading.Barrier(n, timeout=30)

    def one(token: str) -> Answer:
        start.wait()  # all threads send together: n requests in flight at once
        began = time.perf_counter()
        try:
            status, body = get_json(base + path + token)
            return Answer(token, status, body, time.perf_counter() - began, None)
        except Exception as exc:  # an error is an answer to report, not a crash of the burst
            return Answer(token, None, None, time.perf_counter() - began, f"{type(exc).__name__}: {exc}")

    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(one, tokens))


def percentile(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def summary(recipe: str, answers: list[Answer]) -> str:
    """One line for the record: requests, errors, latency p50/p95; printed (see with -s)."""
    latencies = [answer.latency for answer in answers]
    errors = sum(not answer.correct for answer in answers)
    line = (f"RECIPE {recipe}: requests={len(answers)} errors={errors} "
            f"p50={percentile(latencies, 50) * 1000:.1f}ms p95={percentile(latencies, 95) * 1000:.1f}ms")
    print(line)
    return line


def check_answers(recipe: str, answers: list[Answer]) -> None:
    summary(recipe, answers)
    wrong = [answer for answer in answers if not answer.correct]
    assert not wrong, f"{len(wrong)} wrong answers, e.g. {wrong[:3]}"


@contextlib.contextmanager
def gunicorn(app: str, *options: str, env: dict[str, str]) -> Iterator[tuple[Launched, str]]:
    """`gunicorn app` on a free loopback port: the process and its base URL; stopped on the way out."""
    server = Launched([sys.executable, "-m", "gunicorn", "--bind", "127.0.0.1:0", "--graceful-timeout", "5",
                       *options, app], env=env)
    try:
        base = "http://127.0.0.1:" + server.wait_for(r"Listening at: http://127\.0\.0\.1:(\d+)")[1]
        wait_http(base)
        yield server, base
    finally:
        server.stop()


def two_bursts(recipe: str, base: str) -> list[Answer]:
    """200 requests at once while the client is still to be made (first use), then 200 more; all answers."""
    cold = fire(base)
    check_answers(f"{recipe} [first use]", cold)
    warm = fire(base)
    check_answers(f"{recipe} [warm]", warm)
    return cold + warm


def run_script(args: list[str], env: dict[str, str] | None = None, timeout: float = 30.0) -> tuple[int | None, str]:
    """Run a recipe script to its end: exit code and output (everything it started is ended either way)."""
    script = Launched([sys.executable, *args], env=env)
    try:
        try:
            script.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
        code = script.proc.poll()
    finally:
        script.stop()
    return code, script.output


def summary_of(output: str) -> dict[str, Any]:
    """The JSON on the `summary` line a recipe script prints last."""
    lines = [line for line in output.splitlines() if line.startswith("summary ")]
    assert lines, f"no summary line in:\n{output}"
    found: dict[str, Any] = json.loads(lines[-1].split(" ", 1)[1])
    return found
