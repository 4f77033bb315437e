"""The Celery integration against a real Redis broker and real workers.

Each worker test starts Debian's `redis-server` on a loopback port, a
`celery worker` (prefork with recycled children, or threads) running
tests/contrib/served_celery.py, and sends it 1,000 tasks that each call a
tool on the process's shared client. Every answer must be its own, each
worker process must have had one server process at most, and none may
outlive the worker.
"""

from __future__ import annotations

import collections
import gc
import os
import shutil
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("celery")
import redis  # noqa: E402
from celery import Celery, signals  # noqa: E402
from celery.result import ResultSet  # noqa: E402

import mcp_sync  # noqa: E402
from mcp_sync.contrib.celery import MCP  # noqa: E402
from tests.examples.harness import Launched, server_processes, wait_until_gone  # noqa: E402
from tests.helpers import wait_until  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TASKS = 1000
TASK = "tests.contrib.served_celery.echo"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Redis server of this module's own on a loopback port: its URL."""
    if shutil.which("redis-server") is None:
        if os.environ.get("CI"):  # .ci/system installs it: missing there is a failure
            pytest.fail("redis-server is not installed; .ci/system installs it")
        pytest.skip("redis-server is not installed (Debian's redis-server package)")
    workdir = tmp_path_factory.mktemp("redis")
    for _attempt in range(5):  # the port was free when probed; another program may take it first
        port = free_port()
        server = Launched(["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "",
                           "--appendonly", "no", "--dir", str(workdir)], cwd=workdir)
        try:
            server.wait_for(r"Ready to accept connections", timeout=20)
        except AssertionError:
            server.stop()
            continue
        try:
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            server.stop()
        return
    raise AssertionError("redis-server did not start on any of 5 loopback ports")


@pytest.fixture
def sender(broker: str) -> Iterator[Celery]:
    """The sending side: an app that knows the task by name only."""
    redis.Redis.from_url(broker).flushdb()  # nothing left from another test's worker
    app = Celery("sender", broker=broker, backend=broker)
    app.conf.broker_connection_retry_on_startup = True
    try:
        yield app
    finally:
        app.close()


def start_worker(broker: str, marker: str, *options: str, record: Path | None = None) -> Launched:
    """`celery worker` on the served app; returns once it says it is ready."""
    env = {"MCP_TEST_REDIS": broker, "MCP_TEST_MARKER": marker, "PYTHONPATH": str(ROOT),
           "MCP_TEST_RECORD": str(record or "")}
    worker = Launched([sys.executable, "-m", "celery", "-A", "tests.contrib.served_celery", "worker",
                       "--loglevel", "INFO", "--without-gossip", "--without-mingle", "--without-heartbeat",
                       "--hostname", f"w-{uuid.uuid4().hex[:8]}@127.0.0.1", *options], cwd=ROOT, env=env)
    worker.wait_for(r"\bready\.", timeout=60)
    return worker


def run_tasks(sender: Celery, n: int = TASKS) -> list[dict[str, Any]]:
    tokens = [f"t{i}-{uuid.uuid4().hex[:6]}" for i in range(n)]
    pending = ResultSet([sender.send_task(TASK, args=[token]) for token in tokens])
    answers: list[dict[str, Any]] = pending.get(timeout=300)
    crossed = [(token, answer) for token, answer in zip(tokens, answers) if answer["text"] != token]
    assert not crossed, f"{len(crossed)} of {n} answers were not their own task's: {crossed[:3]}"
    return answers


def children(pid: int) -> set[int]:
    """The live child processes of `pid`."""
    return {child for child, parent in all_processes().items() if parent == pid}


def all_processes() -> dict[int, int]:
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    found[int(entry)] = int(stat.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
    return found


def test_prefork_workers_each_have_their_own_client_and_close_it(broker: str, sender: Celery, marker: str,
                                                                 tmp_path: Path) -> None:
    # Four children, each recycled after 100 tasks: about ten child
    # processes over the run, each connecting when it starts and closing
    # its client (stopping its server) when it ends.
    record = tmp_path / "ended"
    worker = start_worker(broker, marker, "--pool", "prefork", "--concurrency", "4",
                          "--max-tasks-per-child", "100", record=record)
    try:
        answers = run_tasks(sender)
        by_process = collections.Counter(answer["pid"] for answer in answers)
        print(f"  {TASKS} tasks answered by {len(by_process)} worker processes: {sorted(by_process.values())}")
        assert worker.proc.pid not in by_process  # the tasks ran in the pool's children
        assert len(by_process) > 4, "no child was recycled: max-tasks-per-child did not apply"
        assert max(by_process.values()) <= 100
        # One client per process, whatever number of tasks it ran.
        for pid in by_process:
            assert len({answer["client"] for answer in answers if answer["pid"] == pid}) == 1
        # Every server process belongs to a live child of the worker, one
        # each: a recycled child took its server with it.
        servers = server_processes(marker)
        live = children(worker.proc.pid)
        assert set(servers.values()) <= live, (servers, live)
        assert len(servers) == len(set(servers.values())) <= 4, servers
        assert worker.proc.pid not in servers.values()  # the main process connected nothing
    finally:
        code = worker.stop(timeout=60)
    assert code == 0, worker.output[-3000:]
    assert wait_until_gone(marker) == {}, "a server process outlived the worker"
    # Every pool process that ran a task closed its client as it ended
    # (recycled or stopped): worker_process_shutdown, not the server
    # noticing its client's process was gone.
    ended = dict(line.split() for line in record.read_text().splitlines())
    assert {int(pid) for pid in ended} >= set(by_process), (ended, by_process)
    assert {ended[str(pid)] for pid in by_process} == {"closed"}, ended


def test_a_threads_pool_shares_one_client_between_its_threads(broker: str, sender: Celery, marker: str) -> None:
    worker = start_worker(broker, marker, "--pool", "threads", "--concurrency", "16")
    try:
        answers = run_tasks(sender)
        assert {answer["pid"] for answer in answers} == {worker.proc.pid}
        assert len({answer["client"] for answer in answers}) == 1
        threads = len({answer["thread"] for answer in answers})
        print(f"  {TASKS} tasks answered on {threads} threads, one client")
        assert threads > 1
        assert list(server_processes(marker).values()) == [worker.proc.pid]
    finally:
        code = worker.stop(timeout=60)
    assert code == 0, worker.output[-3000:]
    assert wait_until_gone(marker) == {}, "the worker's server process outlived it"


# -- in this process: the settings and the signals, without a worker ----------


@pytest.fixture(autouse=True)
def forget_integrations() -> Iterator[None]:
    """Celery's signals are the process's: an `MCP` of an earlier test that
    is not yet collected (it refers to itself through its settings reader)
    would hear the next test's signals. Collected after each test."""
    yield
    gc.collect()


def demo(marker: str) -> dict[str, Any]:
    return {"command": sys.executable, "args": ["-m", "mcp_sync.testing.server", "--name", marker]}


def test_settings_come_from_the_app_conf_unless_given(marker: str) -> None:
    app = Celery("conf")
    app.conf.mcp_servers = {"demo": demo(marker)}
    app.conf.mcp_client_options = {"timeout": 7}
    mcp = MCP(app)
    try:
        client = mcp.client("demo")
        assert mcp.client("demo") is client
        assert client.options.timeouts.request == 7
        assert client.call_tool("echo", {"text": "hi"}).text == "hi"
    finally:
        mcp.close()
    assert client.status == "closed"
    assert wait_until_gone(marker) == {}

    given = MCP(app, servers={"other": demo(marker)})
    try:
        with pytest.raises(mcp_sync.ConfigError, match="demo"):
            given.client("demo")  # the given servers replace the app's
    finally:
        given.close()


def test_wrong_settings_are_problems_and_config_errors(tmp_path: Path) -> None:
    app = Celery("wrong")
    mcp = MCP(app)
    assert mcp.problems() == ["warning: no MCP servers configured: neither app.conf.mcp_servers nor "
                              "app.conf.mcp_config is set (set one, or remove the app)"]
    with pytest.raises(mcp_sync.ConfigError, match="app.conf.mcp_servers"):
        mcp.client("demo")
    both = MCP(app, servers={"a": {"command": "x"}}, config=str(tmp_path / "mcp.json"))
    assert [problem.split(" (")[0] for problem in both.problems()] == [
        "both MCP(servers=...) and MCP(config=...) are set"]
    bad = MCP(app, servers={"a": {"command": "x"}}, options={"timout": 3})
    assert len(bad.problems()) == 1 and "timout" in bad.problems()[0]
    with pytest.raises(TypeError, match="Celery app"):
        MCP("app")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="connect_at_start must be True or False, not 'no'"):
        MCP(app, connect_at_start="no")  # type: ignore[arg-type]


def test_the_worker_signals_connect_at_process_start_and_close_at_its_end(marker: str) -> None:
    app = Celery("signals")
    app.conf.mcp_servers = {"demo": demo(marker)}
    mcp = MCP(app)
    other = MCP(Celery("another"), servers={"demo": demo(marker + "-other")})
    worker = type("Worker", (), {"app": app})()
    try:
        signals.worker_init.send(sender=worker)  # this app's worker: the other MCP stays idle
        signals.worker_process_init.send(sender="w@host")
        assert mcp._warmup is not None and other._warmup is None
        mcp._warmup.join(30)
        assert list(server_processes(marker).values()) == [os.getpid()]  # connected before any task
        client = mcp.client("demo")
        assert client.status == "ready"
        signals.worker_process_shutdown.send(sender="w@host", pid=os.getpid(), exitcode=0)
        assert client.status == "closed"
        assert wait_until_gone(marker) == {}
        assert server_processes(marker + "-other") == {}
    finally:
        mcp.close()
        other.close()


def test_a_server_that_cannot_start_is_logged_at_process_start_and_raised_at_use(
        caplog: pytest.LogCaptureFixture) -> None:
    app = Celery("broken")
    app.conf.mcp_servers = {"broken": {"command": sys.executable, "args": ["-c", "raise SystemExit(3)"]}}
    mcp = MCP(app)
    try:
        signals.worker_init.send(sender=type("Worker", (), {"app": app})())
        with caplog.at_level("WARNING", logger="mcp_sync.contrib.celery"):
            signals.worker_process_init.send(sender="w@host")
            assert mcp._warmup is not None
            mcp._warmup.join(30)
        assert "could not connect to MCP server 'broken'" in caplog.text
        with pytest.raises(mcp_sync.McpError):
            mcp.client("broken")
    finally:
        mcp.close()


def test_the_main_process_logs_wrong_settings_when_the_worker_starts(caplog: pytest.LogCaptureFixture) -> None:
    app = Celery("logged")
    app.conf.mcp_servers = {"a": {"command": "x"}}
    app.conf.mcp_config = "mcp.json"
    mcp = MCP(app)
    with caplog.at_level("ERROR", logger="mcp_sync.contrib.celery"):
        signals.worker_init.send(sender=type("Worker", (), {"app": app})())
    assert "MCP settings: both app.conf.mcp_servers and app.conf.mcp_config are set" in caplog.text
    mcp.close()


def test_importing_the_integration_imports_no_worker_machinery() -> None:
    code = ("import sys, mcp_sync.contrib.celery; "
            "print(sorted(m for m in sys.modules if m.startswith(('celery.worker', 'billiard.pool', 'redis'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_a_close_during_the_start_up_connects_leaves_nothing_running(marker: str) -> None:
    # The process ends while its servers are still starting: the connect in
    # progress is closed when it completes, not made again, and the next
    # server is not started at all.
    slow = {"command": "sh", "args": ["-c", f"sleep 0.5; exec {sys.executable} -m mcp_sync.testing.server "
                                            f"--name {marker}"]}
    app = Celery("closing")
    app.conf.mcp_servers = {"slow": slow, "second": demo(marker + "-second")}
    mcp = MCP(app)
    signals.worker_init.send(sender=type("Worker", (), {"app": app})())
    signals.worker_process_init.send(sender="w@host")
    warmup = mcp._warmup
    assert warmup is not None
    wait_until(lambda: server_processes(marker) != {})  # the first server is starting
    signals.worker_process_shutdown.send(sender="w@host", pid=os.getpid(), exitcode=0)
    assert not warmup.is_alive()
    assert wait_until_gone(marker) == {}, "the start-up connect made its client again after the close"
    assert server_processes(marker + "-second") == {}
    assert mcp._clients.peek("slow") is None


def test_a_connect_that_a_close_overtook_is_not_made_again(marker: str) -> None:
    # `close()` runs while a start-up connect is in progress and does not
    # wait for it (its join gave up): the connect, once done, closes what
    # it made and returns, instead of connecting again from new settings.
    from mcp_sync.config import load_config
    from mcp_sync.contrib._clients import Clients

    slow = {"command": "sh", "args": ["-c", f"sleep 0.5; exec {sys.executable} -m mcp_sync.testing.server "
                                            f"--name {marker}"]}
    clients = Clients(lambda: (load_config({"mcpServers": {"slow": slow}}), {}))
    connecting = threading.Thread(target=clients.warm, args=("slow",))
    connecting.start()
    wait_until(lambda: server_processes(marker) != {})  # started, not yet answering
    clients.close()
    connecting.join(30)
    assert not connecting.is_alive()
    assert clients.peek("slow") is None
    assert wait_until_gone(marker) == {}, "the connect was made again after the close"


def test_messages_name_where_each_value_came_from(tmp_path: Path) -> None:
    # A value given to MCP() is named as the constructor's argument: advice
    # to "set app.conf.mcp_servers" would send one to a setting never read.
    app = Celery("given")
    wrong = MCP(app, servers=["demo"])  # type: ignore[arg-type]
    with pytest.raises(mcp_sync.ConfigError, match=r"^MCP\(servers=\.\.\.\) must be a mapping"):
        wrong.client("demo")
    assert [problem.split(" (")[0] for problem in wrong.problems()] == [
        "MCP(servers=...) must be a mapping of server name to entry"]
    both = MCP(app, servers={"a": {"command": "x"}}, config=str(tmp_path / "mcp.json"))
    assert [problem.split(" (")[0] for problem in both.problems()] == [
        "both MCP(servers=...) and MCP(config=...) are set"]
    with pytest.raises(mcp_sync.ConfigError, match=r"^set one of MCP\(servers=\.\.\.\) and MCP\(config=\.\.\.\)"):
        both.client("a")
    with pytest.raises(mcp_sync.ConfigError, match=r"^MCP\(config=\.\.\.\) must be a config file's path"):
        MCP(app, config=3).client("a")
    bad = MCP(app, servers={"a": {"command": "x"}}, options={"timout": 3})
    with pytest.raises(TypeError, match=r"^MCP\(options=\.\.\.\): .*timout"):
        bad.client("a")
    assert bad.problems()[0].startswith("MCP(options=...): ")
    # A value left to the app's configuration is still named there, also
    # next to a value given to MCP().
    app.conf.mcp_client_options = {"timout": 3}
    mixed = MCP(app, servers={"a": {"command": "x"}})
    with pytest.raises(TypeError, match=r"^app\.conf\.mcp_client_options: .*timout"):
        mixed.client("a")
    app.conf.mcp_servers = ["demo"]
    with pytest.raises(mcp_sync.ConfigError, match=r"^app\.conf\.mcp_servers must be a mapping"):
        MCP(app).client("demo")
