"""The protocol era each server settled on is remembered for the process, so
a server that swallows the `server/discover` probe costs `probe_timeout`
once, not on every connect (issue 15)."""

import json
import logging
import os
import stat
import subprocess
import sys
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
