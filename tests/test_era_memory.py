"""The protocol era each server settled on is remembered for the process, so
a server that swallows the `server/discover` probe costs `probe_timeout`
once, not on every connect (issue 15)."""

import json
import logging
import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import mcp_sync
from mcp_sync import negotiation as era_memory

SERVER = str(Path(__file__).parent / "servers" / "swallows_probe.py")


@pytest.fixture
def server(tmp_path):
    record, mode = tmp_path / "record", tmp_path / "mode"
    record.write_text("")
    mode.write_text("old")
    command = [sys.executable, SERVER, str(record), str(mode)]
    yield command, record, mode
    mcp_sync.forget_eras()


def seen(record: Path) -> list[str]:
    return record.read_text().split()


def echo(client: mcp_sync.Client) -> str:
    return client.call_tool("echo", {"text": "hi"}).content[0].text


def test_only_the_first_connect_waits_for_a_swallowed_probe(server, caplog):
    command, record, _mode = server
    with caplog.at_level(logging.WARNING, logger="mcp_sync"):
        with mcp_sync.connect(command, probe_timeout=0.5) as client:
            assert client.protocol_version == "2025-03-26"
            assert echo(client) == "hi"
    # The probe went unanswered, so initialize followed it to the same process.
    assert seen(record) == ["start", "server/discover", "initialize", "tools/call"]
    assert "did not answer server/discover" in caplog.text and "probe_timeout" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="mcp_sync"):
        with mcp_sync.connect(command, probe_timeout=0.5) as client:
            assert client.protocol_version == "2025-03-26"
            assert echo(client) == "hi"
    # Straight to initialize on one server process: no probe, no restart, no warning.
    assert seen(record)[4:] == ["start", "initialize", "tools/call"]
    assert "did not answer" not in caplog.text


def test_forget_eras_makes_the_next_connect_probe_again(server):
    command, record, _mode = server
    mcp_sync.connect(command, probe_timeout=0.5).close()
    mcp_sync.forget_eras(command)
    mcp_sync.connect(command, probe_timeout=0.5).close()
    assert seen(record).count("server/discover") == 2
    mcp_sync.forget_eras()  # every server: also idempotent
    assert era_memory.recall(mcp_sync.Stdio(command[0], command[1:]).server_key()) is None


def test_a_server_upgraded_in_place_is_settled_again(server):
    command, record, mode = server
    mcp_sync.connect(command, probe_timeout=0.5).close()
    mode.write_text("new")  # now it speaks only 2026-07-28 and refuses initialize
    with mcp_sync.connect(command, probe_timeout=5) as client:
        assert client.protocol_version == "2026-07-28"
        assert client.call_tool("echo", {"text": "up"}).content[0].text == "up"
    # Remembered no longer: the era it settled on now is the stateless one.
    assert era_memory.recall(mcp_sync.Stdio(command[0], command[1:]).server_key()) is None


def test_a_pinned_protocol_ignores_the_memory(server):
    command, record, _mode = server
    mcp_sync.connect(command, probe_timeout=0.5).close()
    with mcp_sync.connect(command, protocol="2025-03-26") as client:
        assert client.protocol_version == "2025-03-26"
    assert seen(record).count("server/discover") == 1


def test_server_keys_name_what_identifies_a_server():
    a = mcp_sync.Stdio("python", ["server.py"], cwd="/srv")
    assert a.server_key() == mcp_sync.Stdio("python", ["server.py"], cwd="/srv").server_key()
    assert a.server_key() != mcp_sync.Stdio("python", ["server.py"], cwd="/other").server_key()
    assert a.server_key() != mcp_sync.Stdio("python", ["server.py"], env={"MODE": "x"}).server_key()
    h = mcp_sync.HTTP("http://127.0.0.1:8000/mcp")
    assert h.server_key() == mcp_sync.HTTP("http://127.0.0.1:8000/mcp", headers={"X-A": "b"}).server_key()
    assert h.server_key() != mcp_sync.HTTP("http://127.0.0.1:8000/other").server_key()
    assert mcp_sync.Custom(lambda: None).server_key() is None  # type: ignore[arg-type, return-value]


def test_the_memory_is_bounded():
    try:
        for i in range(era_memory.MAX_SERVERS + 50):
            era_memory.remember(("test", i), "initialize")
        assert era_memory.recall(("test", 0)) is None  # the oldest went first
        assert era_memory.recall(("test", era_memory.MAX_SERVERS + 49)) == "initialize"
        assert len(era_memory._eras) == era_memory.MAX_SERVERS
    finally:
        era_memory.forget()


# -- on disk, across processes ------------------------------------------------------------

CHILD = """
import sys, mcp_sync
with mcp_sync.connect(sys.argv[1:], probe_timeout=5) as client:
    print(client.protocol_version, client.call_tool("echo", {"text": "hi"}).content[0].text)
"""


def era_file_path() -> Path:
    from mcp_sync import era_file

    path = era_file.location()
    assert path is not None and str(path).startswith(os.environ["MCP_SYNC_CACHE_DIR"])
    return path


def test_a_second_process_connects_without_the_probe(server):
    command, record, _mode = server
    mcp_sync.connect(command, probe_timeout=0.5).close()
    assert seen(record).count("server/discover") == 1
    done = subprocess.run([sys.executable, "-c", CHILD, *command], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["2025-03-26", "hi"]
    # The other process went straight to initialize, on one server process.
    assert seen(record) == ["start", "server/discover", "initialize", "start", "initialize", "tools/call"]


def test_the_file_is_private_and_names_no_server(server):
    command, _record, _mode = server
    mcp_sync.connect(command, probe_timeout=0.5).close()
    path = era_file_path()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    text = path.read_text()
    assert "initialize" in text and SERVER not in text and "swallows" not in text


def test_a_corrupt_or_unwritable_file_is_ignored(server, tmp_path, monkeypatch):
    command, record, _mode = server
    path = era_file_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x00{not json")
    with mcp_sync.connect(command, probe_timeout=0.5) as client:  # settles as if nothing were remembered
        assert client.protocol_version == "2025-03-26"
    assert json.loads(path.read_text())["format"] == 1  # written afresh
    # A directory that cannot be written: remembered in the process only, never an error.
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    monkeypatch.setenv("MCP_SYNC_CACHE_DIR", str(blocked / "under-a-file"))
    mcp_sync.forget_eras()
    with mcp_sync.connect(command, probe_timeout=0.5) as client:
        assert client.protocol_version == "2025-03-26"
    assert seen(record).count("server/discover") == 2


def test_era_cache_false_and_an_empty_cache_dir_keep_it_in_the_process(server, monkeypatch):
    command, record, _mode = server
    path = era_file_path()
    mcp_sync.connect(command, probe_timeout=0.5, era_cache=False).close()
    assert not path.exists() or json.loads(path.read_text())["eras"] == {}
    monkeypatch.setenv("MCP_SYNC_CACHE_DIR", "")
    from mcp_sync import era_file

    assert era_file.location() is None
    mcp_sync.forget_eras()  # nothing on disk to forget: no error


def test_forget_eras_forgets_on_disk_too(server):
    command, record, _mode = server
    mcp_sync.connect(command, probe_timeout=0.5).close()
    mcp_sync.forget_eras(command)
    assert json.loads(era_file_path().read_text())["eras"] == {}
    done = subprocess.run([sys.executable, "-c", CHILD, *command], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert seen(record).count("server/discover") == 2  # the other process probed again


def test_the_file_keeps_at_most_max_servers():
    from mcp_sync import era_file

    for i in range(era_file.MAX_SERVERS + 20):
        era_file.remember(("test", i), "initialize")
    assert era_file.recall(("test", 0)) is None  # the oldest went first
    assert era_file.recall(("test", era_file.MAX_SERVERS + 19)) == "initialize"
    assert len(json.loads(era_file_path().read_text())["eras"]) == era_file.MAX_SERVERS


def test_another_process_settles_afresh_once_the_server_changed_era(server):
    command, _record, mode = server
    mcp_sync.connect(command, probe_timeout=0.5).close()  # remembered on disk: initialize era
    mode.write_text("new")  # upgraded in place: now it speaks only 2026-07-28
    child = CHILD.replace("probe_timeout=5", "probe_timeout=5, protocol=None")
    done = subprocess.run([sys.executable, "-c", child, *command], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["2026-07-28", "hi"]
    assert json.loads(era_file_path().read_text())["eras"] == {}  # the failed assumption is forgotten


# -- a remembered era the server no longer serves ----------------------------------------

# A stdio server upgraded in place, run as `python changing.py RECORD MODE_FILE`.
# It appends `start` to RECORD when it starts and the method of every request
# it reads. MODE_FILE says what it is this time:
#   old     an initialize-era (2025-03-26) server that swallows server/discover
#           (tests/servers/swallows_probe.py);
#   new     a stateless-only (2026-07-28) server (the bundled one) that exits
#           on `initialize`, as some servers exit on a method they do not know;
#   silent  the same, but it never answers `initialize` instead;
#   hung    it reads every request and answers none;
#   dead    it exits on every request it reads, saying which start it is;
#   crash   it exits at start-up, reading nothing.
CHANGING = r"""
import json, os, subprocess, sys
record, mode = sys.argv[1], open(sys.argv[2]).read().strip()
if mode == "old":  # (it records its start itself)
    os.execv(sys.executable, [sys.executable, __SWALLOWS__, *sys.argv[1:]])
with open(record, "a") as f:
    f.write("start\n")
starts = open(record).read().split().count("start")
if mode == "crash":
    sys.stderr.write(f"cannot start (start {starts})\n")
    sys.exit(3)
child = None
if mode in ("new", "silent"):
    child = subprocess.Popen([sys.executable, "-m", "mcp_sync.testing.server", "--versions", "2026-07-28"],
                             stdin=subprocess.PIPE, stdout=sys.stdout.buffer, bufsize=0)
for line in sys.stdin.buffer:
    message = json.loads(line)
    method = message.get("method")
    if "id" in message and method is not None:
        with open(record, "a") as f:
            f.write(method + "\n")
    if mode == "hung":
        continue
    if mode == "dead" and method is not None:
        sys.stderr.write(f"exiting on {method} (start {starts})\n")
        sys.stderr.flush()
        os._exit(1)
    if child is not None:
        if method == "initialize":
            if mode == "silent":
                continue
            sys.stderr.write("unknown method initialize: exiting\n")
            sys.stderr.flush()
            child.kill()
            os._exit(1)
        child.stdin.write(line)
""".replace("__SWALLOWS__", repr(str(Path(__file__).parent / "servers" / "swallows_probe.py")))


@pytest.fixture
def changing(tmp_path):
    script, record, mode = tmp_path / "changing.py", tmp_path / "record", tmp_path / "mode"
    script.write_text(CHANGING)
    record.write_text("")
    mode.write_text("old")
    command = [sys.executable, str(script), str(record), str(mode)]
    mcp_sync.connect(command, probe_timeout=0.5).close()  # remembered, here and on disk: initialize era
    assert remembered_on_disk(command) == "initialize"
    record.write_text("")
    yield command, record, mode
    mcp_sync.forget_eras()


def remembered_on_disk(command: list[str]) -> str | None:
    from mcp_sync import era_file

    return era_file.recall(mcp_sync.Stdio(command[0], command[1:]).server_key())


def remembered_here(command: list[str]) -> str | None:
    return era_memory.recall(mcp_sync.Stdio(command[0], command[1:]).server_key())


def test_a_remembered_era_whose_server_now_exits_on_initialize_is_settled_again(changing):
    command, record, mode = changing
    mode.write_text("new")  # upgraded in place: it exits on initialize now
    with mcp_sync.connect(command, probe_timeout=5, timeout=10) as client:
        assert client.protocol_version == "2026-07-28"
        assert echo(client) == "hi"
    # The remembered initialize, then one fresh settle whose probe was answered.
    assert seen(record) == ["start", "initialize", "start", "server/discover", "tools/call"]
    # Forgotten in the process and on disk: another process probes at once.
    assert remembered_here(command) is None and remembered_on_disk(command) is None
    done = subprocess.run([sys.executable, "-c", CHILD, *command], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["2026-07-28", "hi"]


def test_a_remembered_era_whose_server_never_answers_initialize_is_settled_again(changing):
    command, record, mode = changing
    mode.write_text("silent")  # upgraded in place: it swallows initialize now
    with mcp_sync.connect(command, probe_timeout=5, timeout=1) as client:
        assert client.protocol_version == "2026-07-28"
        assert echo(client) == "hi"
    assert seen(record) == ["start", "initialize", "start", "server/discover", "tools/call"]
    assert remembered_here(command) is None and remembered_on_disk(command) is None


def test_a_dead_server_costs_one_fresh_settle_and_says_why(changing):
    command, record, mode = changing
    mode.write_text("dead")  # it exits on every request it reads
    with pytest.raises(mcp_sync.ServerExited) as raised:
        mcp_sync.connect(command, probe_timeout=5, timeout=10)
    # The remembered initialize, then one fresh settle (the probe, and
    # initialize on a new process, as for any server that exits on the
    # probe), and no more: the error raised is the last attempt's.
    assert seen(record) == ["start", "initialize", "start", "server/discover", "start", "initialize"]
    assert "exiting on initialize (start 3)" in str(raised.value)
    assert remembered_here(command) is None and remembered_on_disk(command) is None
    # The next connect has nothing remembered: one settle.
    record.write_text("")
    with pytest.raises(mcp_sync.ServerExited):
        mcp_sync.connect(command, probe_timeout=5, timeout=10)
    assert seen(record) == ["start", "server/discover", "start", "initialize"]


def test_a_hung_server_costs_one_fresh_settle_and_says_why(changing):
    command, record, mode = changing
    mode.write_text("hung")
    with pytest.raises(mcp_sync.RequestTimeout) as raised:
        mcp_sync.connect(command, probe_timeout=0.5, timeout=1)
    # The remembered initialize timed out, then one fresh settle: the probe,
    # and initialize behind it in the same process; its timeout is raised.
    assert seen(record) == ["start", "initialize", "start", "server/discover", "initialize"]
    assert "neither server/discover" in str(raised.value)
    assert remembered_here(command) is None and remembered_on_disk(command) is None


def test_a_close_during_the_remembered_initialize_keeps_the_era(changing):
    command, record, mode = changing
    mode.write_text("hung")
    client = mcp_sync.Client(command, probe_timeout=0.5, timeout=60)
    failed: list[BaseException] = []

    def open_it() -> None:
        try:
            client.open()
        except BaseException as exc:
            failed.append(exc)

    opener = threading.Thread(target=open_it)
    opener.start()
    deadline = time.monotonic() + 30
    while seen(record) != ["start", "initialize"] and time.monotonic() < deadline:
        time.sleep(0.01)  # until the server has read the remembered initialize
    assert seen(record) == ["start", "initialize"]
    client.close()
    opener.join(30)
    assert not opener.is_alive() and isinstance(failed[0], mcp_sync.ConnectionClosed)
    # Closing says nothing about the server's era: no fresh settle, nothing forgotten.
    assert seen(record) == ["start", "initialize"]
    assert remembered_here(command) == "initialize" and remembered_on_disk(command) == "initialize"


def test_a_server_that_fails_before_reading_keeps_its_era(changing):
    command, record, mode = changing
    mode.write_text("crash")  # it exits at start-up: nothing about its era
    with pytest.raises(mcp_sync.ServerExited) as raised:
        mcp_sync.connect(command, probe_timeout=5, timeout=10)
    assert seen(record) == ["start"]  # not started again: it would fail the same way
    assert "cannot start (start 1)" in str(raised.value)
    assert remembered_here(command) == "initialize" and remembered_on_disk(command) == "initialize"


# -- a file that is not an era file --------------------------------------------------------


def test_a_deeply_nested_file_is_taken_as_empty(server):
    from mcp_sync import era_file

    command, _record, _mode = server
    path = era_file_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("[" * 60_000)  # under MAX_FILE_BYTES, past the JSON parser's nesting
    key = mcp_sync.Stdio(command[0], command[1:]).server_key()
    assert era_file.recall(key) is None
    era_file.forget(key)  # nothing to forget: no error
    with mcp_sync.connect(command, probe_timeout=0.5) as client:  # settles as if nothing were remembered
        assert client.protocol_version == "2025-03-26"
    assert json.loads(path.read_text())["format"] == 1  # written afresh


FIFO_CHILD = """
import sys, mcp_sync
from mcp_sync import era_file
print(era_file.recall(("a", "key")))
era_file.forget(("a", "key"))
print(mcp_sync.connect(sys.argv[1:], probe_timeout=0.5).protocol_version)
"""


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_named_pipe_at_the_path_is_taken_as_empty_without_blocking(server, tmp_path):
    command, _record, _mode = server
    cache = tmp_path / "cache"
    cache.mkdir()
    os.mkfifo(cache / "eras.json")  # nobody ever writes to it: opening it to read waits for a writer
    env = dict(os.environ, MCP_SYNC_CACHE_DIR=str(cache))
    # In a process of its own: a read that blocks is killed at the timeout.
    done = subprocess.run([sys.executable, "-c", FIFO_CHILD, *command], capture_output=True, text=True, env=env,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["None", "2025-03-26"]
    # remember() renamed a regular file over the pipe.
    assert stat.S_ISREG((cache / "eras.json").stat().st_mode)
    assert json.loads((cache / "eras.json").read_text())["format"] == 1
