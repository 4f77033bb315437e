"""The stdio transport against real subprocesses that misbehave on purpose."""

import json
import logging
import sys
import threading

import pytest

import mcp_sync
from mcp_sync import Stdio
from tests.helpers import scripted

STATELESS = "2026-07-28"


def test_env_and_cwd_reach_the_server(tmp_path):
    target = Stdio(sys.executable, scripted()[1:], env={"MCP_SYNC_TEST_VAR": "hello"}, cwd=str(tmp_path))
    with mcp_sync.connect(target) as client:
        seen = json.loads(client.call_tool("echo", {"env": "MCP_SYNC_TEST_VAR"}).text)
    assert seen == {"env": "hello", "cwd": str(tmp_path)}


def test_env_without_inheriting(tmp_path, monkeypatch):
    monkeypatch.setenv("MCP_SYNC_LEAK", "secret")
    target = Stdio(sys.executable, scripted()[1:], env={"A": "1"}, inherit_env=False)
    with mcp_sync.connect(target) as client:
        assert json.loads(client.call_tool("echo", {"env": "MCP_SYNC_LEAK"}).text)["env"] is None


@pytest.mark.parametrize("options,exc,says", [
    ({"env": {"A": 1}}, TypeError, "env must be a mapping of strings"),
    ({"env": "A=1"}, TypeError, "env must be a mapping of strings"),
    ({"inherit_env": "no"}, TypeError, "inherit_env must be True or False, not 'no'"),
    ({"inherit_env": None}, TypeError, "inherit_env must be True or False"),
    ({"cwd": 3}, TypeError, "cwd must be a path"),
    ({"max_line_bytes": True}, TypeError, "max_line_bytes must be an integer"),
    ({"max_line_bytes": 0}, ValueError, "max_line_bytes must be a positive integer"),
    ({"shutdown_timeout": "2"}, TypeError, "shutdown_timeout must be a number of seconds"),
    ({"shutdown_timeout": -1}, ValueError, "shutdown_timeout"),
    ({"shutdown_timeout": float("inf")}, ValueError, "shutdown_timeout"),
    ({"shutdown_timeout": float("nan")}, ValueError, "shutdown_timeout"),
    ({"shutdown_timeout": True}, TypeError, "shutdown_timeout"),
])
def test_bad_options_are_refused_when_the_target_is_made(options, exc, says):
    """Before, these were taken: a bad `env` or `cwd` failed at connect, a
    `shutdown_timeout` of "2" at `close()` (which then raised TypeError),
    and `max_line_bytes=True` was a limit of one byte."""
    with pytest.raises(exc, match=says):
        Stdio(sys.executable, scripted()[1:], **options)


def test_a_shutdown_timeout_of_zero_is_taken_and_close_returns(no_leaks):
    # 0 is a setting (no grace at each shutdown step), not a bad value.
    target = Stdio(sys.executable, scripted()[1:], shutdown_timeout=0)
    client = mcp_sync.connect(target)
    assert client.call_tool("echo", {"text": "x"}).text == "x"
    client.close()  # no_leaks: no thread and no descriptor (the pipes) left behind


def test_a_command_that_cannot_start_is_a_connect_error():
    with pytest.raises(mcp_sync.ConnectError) as info:
        mcp_sync.connect(["/nonexistent/mcp-server-binary"])
    assert "/nonexistent/mcp-server-binary" in str(info.value)


def test_server_exit_fails_every_pending_call_with_code_and_stderr(no_leaks):
    # reconnect=False: no eager restart, so the connection in use at the end
    # is the one that failed (with the default, the healer may have started
    # a new server before close(), and a call then says the client closed).
    client = mcp_sync.connect(scripted("--mode", "exit-on-call"), protocol=STATELESS, reconnect=False)
    errors = []
    barrier = threading.Barrier(4)

    def call():
        barrier.wait()
        try:
            client.call_tool("echo", {"text": "x"}, timeout=60)
        except mcp_sync.McpError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=call) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    client.close()
    assert len(errors) == 4
    for exc in errors:
        assert isinstance(exc, mcp_sync.ServerExited), exc
        assert exc.returncode == 7
        assert "fatal: something broke" in str(exc)
        assert "exited with code 7" in str(exc)
    with pytest.raises(mcp_sync.ServerExited):
        client.call_tool("echo", {})


def test_a_stateless_server_that_died_is_started_again_by_the_next_call(tmp_path, no_leaks):
    command = scripted("--mode", "exit-once", "--marker", str(tmp_path / "crashed"))
    with mcp_sync.connect(command, protocol=STATELESS) as client:
        first_pid = client._conn.transport.pid
        with pytest.raises(mcp_sync.ServerExited) as info:
            client.call_tool("echo", {"text": "x"})
        assert info.value.returncode == 5 and "crashing once" in str(info.value)
        assert client.call_tool("echo", {"text": "back"}).text == "back"
        assert client._conn.transport.pid != first_pid


def test_no_restart_when_disabled_or_without_reconnect_in_the_initialize_era(tmp_path):
    marker = tmp_path / "crashed"
    with mcp_sync.connect(scripted("--mode", "exit-once", "--marker", str(marker)), protocol=STATELESS,
                          restart=False) as client:
        with pytest.raises(mcp_sync.ServerExited):
            client.call_tool("echo", {"text": "x"})
        with pytest.raises(mcp_sync.ServerExited):
            client.call_tool("echo", {"text": "x"})
    marker.unlink()
    with mcp_sync.connect(scripted("--mode", "exit-once", "--marker", str(marker)), protocol="2025-11-25",
                          reconnect=False) as client:
        with pytest.raises(mcp_sync.ServerExited):
            client.call_tool("echo", {"text": "x"})
        with pytest.raises(mcp_sync.ServerExited):
            client.call_tool("echo", {"text": "x"})


def test_an_initialize_era_server_that_died_is_started_again_with_a_new_handshake(tmp_path):
    marker = tmp_path / "crashed"
    with mcp_sync.connect(scripted("--mode", "exit-once", "--marker", str(marker)), protocol="2025-11-25") as client:
        with pytest.raises(mcp_sync.ServerExited) as info:
            client.call_tool("echo", {"text": "x"})
        assert info.value.may_have_executed is True  # it reached the server, which died on it
        assert client.call_tool("echo", {"text": "again"}).text == "again"
        assert client.protocol_version == "2025-11-25"


def test_server_closing_stdout_fails_the_call(no_leaks):
    with mcp_sync.connect(scripted("--mode", "close-stdout-on-call"), protocol=STATELESS) as client:
        with pytest.raises(mcp_sync.ConnectionClosed) as info:
            client.call_tool("echo", {"text": "x"}, timeout=60)
    assert "closed its stdout" in str(info.value)


def test_a_non_json_line_fails_the_call_and_says_what_it_was(no_leaks):
    with mcp_sync.connect(scripted("--mode", "garbage-on-call"), protocol=STATELESS) as client:
        with pytest.raises(mcp_sync.InvalidMessage) as info:
            client.call_tool("echo", {"text": "x"}, timeout=60)
    assert "this is not json" in str(info.value)


def test_a_burst_of_lines_over_several_reads_arrives_whole_and_in_order(no_leaks):
    # 120 lines of 700 bytes: reads of at most 64 KiB end in the middle of
    # a line, and each read's whole lines are parsed together.
    with mcp_sync.connect(scripted("--mode", "burst-on-call"), protocol=STATELESS) as client:
        for _ in range(3):
            seen = []
            result = client.call_tool("burst", {"n": 120, "pad": 640}, progress=lambda p: seen.append(p.progress),
                                      timeout=60)
            assert result.text == "done"
            assert seen == list(range(120))


def test_a_bad_line_in_a_burst_fails_the_call_after_the_lines_before_it(no_leaks):
    with mcp_sync.connect(scripted("--mode", "burst-on-call"), protocol=STATELESS) as client:
        seen = []
        with pytest.raises(mcp_sync.InvalidMessage) as info:
            client.call_tool("burst", {"n": 120, "pad": 640, "bad": 100}, progress=lambda p: seen.append(p.progress),
                             timeout=60)
    assert "this is not json" in str(info.value)
    # Every line before the bad one reached the caller, before its error.
    assert seen == list(range(100))


def test_a_line_over_the_limit_fails_the_call(no_leaks):
    target = Stdio(sys.executable, scripted("--mode", "oversize-on-call", "--size", "50000")[1:], max_line_bytes=4096)
    with mcp_sync.connect(target, protocol=STATELESS) as client:
        with pytest.raises(mcp_sync.MessageTooLarge) as info:
            client.call_tool("echo", {"text": "x"}, timeout=60)
    assert info.value.limit == 4096
    assert "4096" in str(info.value)


def test_a_long_line_is_held_whole_once_while_it_is_parsed():
    # An 8 MB answer comes in 64 KiB reads: the pieces are joined once and
    # let go, and the line is parsed as it is. At its peak the client holds
    # the line's bytes, its text and the result made of it: three times the
    # line (tracemalloc counts every Python allocation, the reader's too).
    # Before: the pieces and a copy of the text too, over four times.
    import tracemalloc

    size = 8_000_000
    target = Stdio(sys.executable, scripted("--mode", "oversize-on-call", "--size", str(size))[1:])
    with mcp_sync.connect(target, protocol=STATELESS) as client:
        tracemalloc.start()
        try:
            result = client.call_tool("echo", {"text": "x"}, timeout=60)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert result.text == "x" * size
    assert peak < 3.5 * size, f"peak {peak / size:.2f} times the line"


def test_a_line_just_under_the_limit_is_fine():
    target = Stdio(sys.executable, scripted()[1:], max_line_bytes=2000)
    with mcp_sync.connect(target, protocol=STATELESS) as client:
        assert client.call_tool("echo", {"text": "y" * 1800}).text == "y" * 1800


def test_a_chatty_server_never_blocks_and_its_stderr_is_logged(caplog):
    # 5,000 lines of stderr (over 500 KB) fill any pipe buffer many times over.
    with caplog.at_level(logging.INFO, logger="mcp_sync.server.stderr"):
        with mcp_sync.connect(scripted("--stderr-lines", "5000"), protocol=STATELESS) as client:
            assert client.call_tool("echo", {"text": "still here"}).text == "still here"
    records = [r for r in caplog.records if r.name == "mcp_sync.server.stderr"]
    assert len(records) == 5000
    assert "chatty line 4999" in records[-1].getMessage()


def test_close_reaps_the_process_and_joins_threads(no_leaks):
    client = mcp_sync.connect(scripted(), protocol=STATELESS)
    proc = client._conn.transport._proc
    client.close()
    assert proc.returncode is not None


def test_close_terminates_a_server_that_ignores_stdin_eof(tmp_path, no_leaks):
    script = tmp_path / "stubborn.py"
    script.write_text(
        "import sys, json, time\n"
        "for line in sys.stdin:\n"
        "    m = json.loads(line)\n"
        "    print(json.dumps({'jsonrpc': '2.0', 'id': m['id'], 'result': {'resultType': 'complete', "
        "'supportedVersions': ['2026-07-28'], 'capabilities': {}}}), flush=True)\n"
        "    break\n"
        "while True:\n"
        "    time.sleep(1)\n"
    )
    client = mcp_sync.connect(Stdio(sys.executable, [str(script)], shutdown_timeout=0.2))
    proc = client._conn.transport._proc
    client.close()
    assert proc.returncode is not None and proc.returncode != 0


def test_stdio_target_argument_checks():
    with pytest.raises(TypeError):
        Stdio("")
    with pytest.raises(TypeError):
        Stdio("python", "server.py")
    with pytest.raises(ValueError):
        Stdio("python", [], max_line_bytes=0)


@pytest.mark.parametrize("arguments, options, named", [
    (["serve\0"], {}, "args"),
    ([], {"env": {"TOKEN": "a\0b"}}, "env"),
    ([], {"env": {"A=B": "c"}}, "env names"),
    ([], {"env": {"": "c"}}, "env names"),
    ([], {"cwd": "/tmp\0"}, "cwd"),
])
def test_what_no_program_can_be_given_is_refused_by_the_target(arguments, options, named):
    # These passed Stdio() and failed at connect() with a bare ValueError
    # ("embedded null byte", "illegal environment variable name").
    with pytest.raises(ValueError, match=f"Stdio\\(\\) {named}"):
        Stdio(sys.executable, arguments, **options)
    with pytest.raises(ValueError, match="Stdio\\(\\) command"):
        Stdio("python\0", [])
