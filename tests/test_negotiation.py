"""Settling the protocol version over stdio, against servers of every kind."""

import logging

import pytest

import mcp_sync
from tests.helpers import GENEROUS, demo_command, recorded, scripted


def methods(entries):
    return [m.get("method") for _, m in entries]


def test_a_stateless_server_is_probed_once_and_kept(tmp_path):
    record = tmp_path / "record"
    with mcp_sync.connect(scripted("--record", str(record))) as client:
        assert client.protocol_version == "2026-07-28"
        assert client.server_info.name == "scripted"
        client.call_tool("echo", {"text": "x"})
    entries = recorded(record)  # [(pid, message)]
    assert methods(entries) == ["server/discover", "tools/call"]
    assert len({pid for pid, _ in entries}) == 1
    probe = entries[0][1]
    assert probe["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"


def test_an_initialize_era_server_erroring_on_the_probe_is_initialized_in_the_same_process(tmp_path):
    # A JSON-RPC answer to the probe (here -32601) proves a live
    # initialize-era server: `initialize` goes to the same process, as the
    # spec's stdio page says, and the server is started once per connect.
    record = tmp_path / "record"
    with mcp_sync.connect(scripted("--versions", "2025-11-25,2025-06-18", "--record", str(record))) as client:
        assert client.protocol_version == "2025-11-25"
        assert client.session.server_info.name == "scripted"
        client.ping()
    entries = recorded(record)
    assert len({pid for pid, _ in entries}) == 1, "the server was started more than once"
    assert methods(entries) == ["server/discover", "initialize", "notifications/initialized", "ping"]
    assert entries[1][1]["params"]["protocolVersion"] == "2025-11-25"


def test_a_silent_probe_is_followed_by_initialize_on_the_same_process(tmp_path):
    # Silence is not an answer: the server may still be starting. It gets
    # initialize in the same pipe, and is never started twice.
    record = tmp_path / "record"
    with mcp_sync.connect(scripted("--mode", "silent-probe", "--record", str(record)), probe_timeout=0.3) as client:
        assert client.protocol_version == "2025-11-25"
        client.ping()
    entries = recorded(record)
    assert len({pid for pid, _ in entries}) == 1, "the server was started more than once"
    assert methods(entries) == ["server/discover", "initialize", "notifications/initialized", "ping"]


def test_a_server_that_swallows_the_probe_and_dies_on_the_next_line_gets_one_more_start(tmp_path):
    # The Python SDK 1.3.0 server's pattern: silence on server/discover, an
    # exit (a traceback on stderr) when initialize arrives. It read both, so
    # the start is not to blame: one more start, for initialize alone.
    record = tmp_path / "record"
    with mcp_sync.connect(scripted("--mode", "swallow-then-exit", "--record", str(record)),
                          probe_timeout=0.3) as client:
        assert client.protocol_version == "2025-11-25"
        assert client.status == "ready"  # the first process's exit was the start-up's to handle
        assert client.call_tool("echo", {"text": "ok"}).text == "ok"
    entries = recorded(record)
    pids = list(dict.fromkeys(pid for pid, _ in entries))
    assert len(pids) == 2
    assert methods([e for e in entries if e[0] == pids[0]]) == ["server/discover", "initialize"]
    assert methods([e for e in entries if e[0] == pids[1]])[:2] == ["initialize", "notifications/initialized"]


def test_server_that_dies_on_the_probe_is_restarted():
    with mcp_sync.connect(scripted("--mode", "exit-on-probe")) as client:
        assert client.protocol_version == "2025-11-25"
        assert client.status == "ready"
        assert client.call_tool("echo", {"text": "ok"}).text == "ok"


def test_a_stateless_refusal_without_a_mutual_version_never_falls_back(tmp_path):
    record = tmp_path / "record"
    with pytest.raises(mcp_sync.VersionNegotiationError) as info:
        mcp_sync.connect(scripted("--mode", "unsupported-version", "--record", str(record)))
    assert info.value.supported == ["2099-01-01"]
    assert "initialize" not in methods(recorded(record))


def test_initialize_answered_with_a_version_not_allowed(tmp_path):
    with pytest.raises(mcp_sync.VersionNegotiationError) as info:
        mcp_sync.connect(scripted("--versions", "2025-11-25", "--answer-version", "2024-11-05"), protocol="2025-11-25")
    assert info.value.negotiated == "2024-11-05" and info.value.requested == "2025-11-25"
    with pytest.raises(mcp_sync.VersionNegotiationError):
        mcp_sync.connect(scripted("--answer-version", "2025-06-18"), protocol="2025-11-25")


def test_initialize_may_settle_on_an_older_allowed_version():
    with mcp_sync.connect(scripted("--answer-version", "2025-06-18"), protocol=["2025-11-25", "2025-06-18"]) as client:
        assert client.protocol_version == "2025-06-18"


def test_a_stateless_pin_is_confirmed_by_one_probe(tmp_path):
    record = tmp_path / "record"
    with mcp_sync.connect(scripted("--record", str(record)), protocol="2026-07-28") as client:
        assert client.protocol_version == "2026-07-28"
        assert client.server_info.name == "scripted"  # what the probe's answer said
    assert methods(recorded(record)) == ["server/discover"]


def test_a_stateless_pin_refuses_a_server_that_answers_as_the_initialize_era(tmp_path):
    # Such a server may serve requests without initialize, under its own
    # semantics: nothing but the probe is sent to it.
    record = tmp_path / "record"
    with pytest.raises(mcp_sync.VersionNegotiationError) as info:
        mcp_sync.connect(scripted("--versions", "2025-11-25,2025-06-18", "--record", str(record)),
                         protocol="2026-07-28")
    said = str(info.value)
    assert "server/discover answered error -32601: Method not found" in said and "protocol=None" in said
    assert info.value.requested == ["2026-07-28"]
    assert methods(recorded(record)) == ["server/discover"]


def test_a_stateless_pin_to_a_server_that_exits_on_the_probe_says_how_it_exited(tmp_path):
    # Exiting proves no era (a server that fails at start-up exits too):
    # the exit code and the last stderr line say what happened.
    record = tmp_path / "record"
    with pytest.raises(mcp_sync.ServerExited, match="unknown method, giving up") as info:
        mcp_sync.connect(scripted("--mode", "exit-on-probe", "--record", str(record)), protocol="2026-07-28")
    assert info.value.returncode == 9
    assert methods(recorded(record)) == ["server/discover"]


def test_a_stateless_pin_is_trusted_when_the_probe_goes_unanswered(tmp_path, caplog):
    record = tmp_path / "record"
    with caplog.at_level(logging.WARNING, logger="mcp_sync"):
        with mcp_sync.connect(scripted("--mode", "silent-probe", "--record", str(record)), protocol="2026-07-28",
                              probe_timeout=0.2) as client:
            assert client.protocol_version == "2026-07-28"
            assert client.call_tool("echo", {"text": "trusted"}).text == "trusted"
    assert "trusting the pinned protocol version 2026-07-28" in caplog.text
    # The unanswered probe is cancelled (on its own time), as any request given up on.
    seen = methods(recorded(record))
    assert seen[0] == "server/discover" and sorted(seen[1:]) == ["notifications/cancelled", "tools/call"]


def test_an_initialize_pin_skips_the_probe(tmp_path):
    record = tmp_path / "record"
    with mcp_sync.connect(scripted("--record", str(record)), protocol="2025-06-18"):
        pass
    assert methods(recorded(record)) == ["initialize", "notifications/initialized"]


def test_unsupported_version_later_rediscovers_and_retries_once(tmp_path):
    record = tmp_path / "record"
    with mcp_sync.connect(scripted("--mode", "unsupported-later", "--record", str(record)), protocol="2026-07-28") as client:
        assert client.call_tool("echo", {"text": "again"}).text == "again"
    entries = recorded(record)
    assert methods(entries) == ["server/discover", "tools/call", "server/discover", "tools/call"]
    ids = [m["id"] for _, m in entries]
    assert len(set(ids)) == 4


def test_unknown_result_type_is_invalid():
    with mcp_sync.connect(scripted("--mode", "unknown-result-type"), protocol="2026-07-28") as client:
        with pytest.raises(mcp_sync.InvalidResult, match="mystery"):
            client.call_tool("echo", {})


def test_input_required_without_handlers_raises_with_the_result():
    with mcp_sync.connect(scripted("--mode", "input-required"), protocol="2026-07-28") as client:
        with pytest.raises(mcp_sync.InputRequired) as info:
            client.call_tool("echo", {})
    assert info.value.result["requestState"] == "opaque-state"
    assert "r1" in info.value.result["inputRequests"]


def test_a_result_that_is_not_an_object_is_invalid():
    with mcp_sync.connect(scripted("--mode", "not-an-object"), protocol="2026-07-28") as client:
        with pytest.raises(mcp_sync.InvalidResult):
            client.call_tool("echo", {})


def test_repeated_cursor_fails_cleanly():
    with mcp_sync.connect(scripted("--mode", "repeat-cursor"), protocol="2026-07-28") as client:
        with pytest.raises(mcp_sync.PaginationError, match="repeated cursor"):
            client.list_tools()
        assert client.list_page("tools").next_cursor == "same"


def test_max_pages_bounds_an_endless_list():
    with mcp_sync.connect(scripted("--mode", "endless-pages"), protocol="2026-07-28", max_pages=5) as client:
        with pytest.raises(mcp_sync.PaginationError, match="max_pages=5"):
            client.list_tools()


@pytest.mark.parametrize("protocol", [None, "2025-11-25", "2025-06-18"])
def test_demo_server_program_in_every_era(protocol):
    with mcp_sync.connect(demo_command(), protocol=protocol) as client:
        assert client.protocol_version == (protocol or "2026-07-28")
        assert client.call_tool("add", {"a": 1, "b": 2}).structured_content == {"sum": 3}


STRICT_2024 = r'''
import json, sys
def send(m):
    sys.stdout.write(json.dumps(m) + "\n"); sys.stdout.flush()
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m or "method" not in m or m["method"] == "server/discover":
        continue  # silent on the probe, as some initialize-era servers are
    if m["method"] == "initialize" and m["params"]["protocolVersion"] != "2024-11-05":
        send({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32602, "message": "Unsupported protocol version",
              "data": {"supported": ["2024-11-05"], "requested": m["params"]["protocolVersion"]}}})
    elif m["method"] == "initialize":
        send({"jsonrpc": "2.0", "id": m["id"], "result": {"protocolVersion": "2024-11-05",
              "capabilities": {"tools": {}}, "serverInfo": {"name": "strict", "version": "1"}}})
    else:
        send({"jsonrpc": "2.0", "id": m["id"], "result": {"content": [{"type": "text", "text": "ok"}]}})
'''


def test_an_initialize_refused_with_the_supported_versions_settles_on_one_of_them(tmp_path):
    # The lifecycle page's example refusal (-32602, data.supported), from a
    # server silent on the probe: initialize goes again, in 2024-11-05.
    import sys

    script = tmp_path / "strict.py"
    script.write_text(STRICT_2024)
    with mcp_sync.connect([sys.executable, str(script)], probe_timeout=0.3) as client:
        assert client.protocol_version == "2024-11-05"
        assert client.call_tool("echo").text == "ok"


def test_a_call_refused_with_32022_ends_by_its_own_deadline_when_the_reprobe_meets_silence():
    # The -32022 is answered by settling the version again for the call: a
    # server silent on that `server/discover` held the call for the
    # client's probe_timeout (30 s here), not its own 0.5 s.
    import time

    from tests.scripted_engine import DISCOVERED, ScriptedTarget

    discovers = []

    def script(message):
        if message["method"] == "server/discover":
            discovers.append(message)
            return DISCOVERED if len(discovers) == 1 else None  # silent the second time
        return {"error": {"code": -32022, "message": "Unsupported protocol version",
                          "data": {"supported": ["2026-07-28"]}}}

    with mcp_sync.connect(ScriptedTarget(script), probe_timeout=30, timeout=30) as client:
        started = time.monotonic()
        with pytest.raises(mcp_sync.McpError):
            client.call_tool("echo", {"text": "x"}, timeout=0.5)
        assert time.monotonic() - started < 0.5 + GENEROUS  # (its 0.5 s; not the 30 s probe_timeout)
        assert len(discovers) == 2
