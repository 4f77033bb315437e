"""Start-up with real server processes: one start per connect, slow
starters kept and settled in their own era, a crash at start reported once.

Each server runs under `tests/servers/starts.py`, which counts its starts
(and can delay or crash them) before it becomes the server itself.
"""

from __future__ import annotations

import os
import sys
import time

import pytest

import mcp_sync
from mcp_sync import negotiation
from tests.helpers import demo_command, scripted

STARTS = os.path.join(os.path.dirname(__file__), "servers", "starts.py")


def counted(count_file, *options: str, server: list[str]) -> list[str]:
    return [sys.executable, STARTS, str(count_file), *options, "--", *server]


def starts(count_file) -> int:
    return len(count_file.read_text().split()) if count_file.exists() else 0


@pytest.mark.parametrize("era", ["2025-11-25", "2025-06-18,2025-03-26"])
def test_an_initialize_era_server_is_started_once_per_connect(tmp_path, era):
    count = tmp_path / "starts"
    command = counted(count, server=demo_command("--versions", era))
    with mcp_sync.connect(command) as client:
        assert client.protocol_version == era.split(",")[0]
        assert client.list_tools()
    assert starts(count) == 1
    negotiation.forget()  # not remembered: the probe again, still one start
    with mcp_sync.connect(command, era_cache=False) as client:
        client.ping()
    assert starts(count) == 2


def test_a_slow_starter_is_kept_and_settles_in_its_own_era(tmp_path):
    # 12 s before it reads anything, past the 10 s probe_timeout: the probe
    # stays in its pipe, initialize joins it, and its server/discover answer
    # settles the era. One start, in about 12 s, at 2026-07-28.
    count = tmp_path / "starts"
    command = counted(count, "--sleep", "12", server=demo_command())
    started = time.monotonic()
    with mcp_sync.connect(command) as client:
        took = time.monotonic() - started
        assert client.protocol_version == "2026-07-28"
        assert client.call_tool("add", {"a": 2, "b": 3}).text == "5"
    assert starts(count) == 1
    assert took >= 12  # a count of what happened, not a bound on speed
    assert negotiation.recall(mcp_sync.Stdio(command[0], command[1:]).server_key()) is None, \
        "a stateless-era server must not be remembered as initialize-era"


def test_a_slow_initialize_era_starter_is_started_once(tmp_path):
    count = tmp_path / "starts"
    command = counted(count, "--sleep", "1", server=demo_command("--versions", "2025-11-25"))
    with mcp_sync.connect(command, probe_timeout=0.2) as client:
        assert client.protocol_version == "2025-11-25"
    assert starts(count) == 1


def test_a_server_that_crashes_at_start_is_started_once_and_its_stderr_said(tmp_path):
    count = tmp_path / "starts"
    with pytest.raises(mcp_sync.ServerExited) as info:
        mcp_sync.connect(counted(count, "--crash", server=demo_command()))
    assert starts(count) == 1
    assert info.value.returncode == 3
    assert "No module named 'server_dependency'" in str(info.value)
    assert any("server_dependency" in line for line in info.value.stderr_tail)


def test_a_server_that_crashes_at_start_after_the_probe_timeout_is_started_once(tmp_path):
    # It read nothing before it died: neither request upset it.
    count = tmp_path / "starts"
    with pytest.raises(mcp_sync.ServerExited, match="server_dependency"):
        mcp_sync.connect(counted(count, "--sleep", "0.5", "--crash", server=demo_command()), probe_timeout=0.2)
    assert starts(count) == 1


def test_a_server_silent_on_both_requests_times_out_with_both_named(tmp_path):
    count = tmp_path / "starts"
    with pytest.raises(mcp_sync.RequestTimeout, match="neither server/discover.*nor initialize"):
        mcp_sync.connect(counted(count, "--sleep", "30", server=demo_command()), probe_timeout=0.2, timeout=0.5)
    assert starts(count) == 1


def test_a_probe_answered_just_after_initialize_was_refused_still_settles_the_era(tmp_path):
    # A server that takes requests concurrently may refuse initialize before
    # it answers the probe: the refusal waits a moment for the probe.
    with mcp_sync.connect(scripted("--mode", "discover-after-initialize"), probe_timeout=0.2) as client:
        assert client.protocol_version == "2026-07-28"
        assert client.call_tool("echo", {"text": "x"}).text == "x"
