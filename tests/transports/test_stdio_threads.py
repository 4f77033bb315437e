"""Threads per idle stdio connection: one, the reader, which reads the
server's stdout and stderr with a selector; a second only for a stderr
callable, which is user code and never runs on the reader thread."""

import os
import sys
import threading

import pytest

import mcp_sync
from mcp_sync import Stdio
from tests.helpers import scripted
from tests.helpers import check_echoes as check
from tests.helpers import hammer_echo as hammer

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="pipes cannot be selected on Windows")


def started_by(connect):
    """The names of the threads alive after `connect()` that were not before."""
    before = set(threading.enumerate())
    client = connect()
    return client, sorted(t.name for t in set(threading.enumerate()) - before)


def test_an_idle_stdio_client_keeps_one_thread():
    name = os.path.basename(sys.executable)
    client, names = started_by(lambda: mcp_sync.connect(Stdio(sys.executable, scripted()[1:])))
    with client:
        assert client.call_tool("echo", {"text": "hi"}).text == "hi"
        assert names == [f"mcp-sync-reader-{name}"]
        assert sorted(t.name for t in threading.enumerate() if t.name.startswith("mcp-sync")) == names


def test_a_stderr_callable_gets_a_thread_of_its_own():
    name = os.path.basename(sys.executable)
    seen = []
    target = Stdio(sys.executable, scripted("--stderr-lines", "2")[1:],
                   stderr=lambda line: seen.append(threading.current_thread()))
    client, names = started_by(lambda: mcp_sync.connect(target))
    with client:
        assert names == [f"mcp-sync-reader-{name}", f"mcp-sync-stderr-{name}"]
    assert seen and {t.name for t in seen} == {f"mcp-sync-stderr-{name}"}


def test_answers_larger_than_a_pipe_and_many_at_once_arrive_whole():
    with mcp_sync.connect(Stdio(sys.executable, scripted()[1:])) as client:
        big = "z" * 300_000  # several reads of the pipe
        assert client.call_tool("echo", {"text": big}).text == big
        results, errors = hammer(client, threads=16, calls=20)
    check(results, errors, threads=16, calls=20)


def test_stderr_lines_longer_than_64k_come_in_pieces_with_the_reader_reading_both(caplog):
    # The server writes a 70,000-byte line to stderr, then starts as usual.
    code = ("import os, sys; sys.stderr.write('y' * 70000 + '\\n'); sys.stderr.flush(); "
            f"os.execv(sys.executable, [sys.executable, *{scripted('--stderr-lines', '1')[1:]!r}])")
    with caplog.at_level("INFO", logger="mcp_sync.server.stderr"):
        with mcp_sync.connect(Stdio(sys.executable, ["-c", code], stderr="log")) as client:
            assert client.call_tool("echo", {"text": "hi"}).text == "hi"
    lines = [r.args[1] for r in caplog.records if r.name == "mcp_sync.server.stderr"]
    assert lines[:2] == ["y" * 65536, "y" * (70000 - 65536)]
    assert lines[2].startswith("chatty line 0")
