"""Server log messages the library way: nothing printed unless logging is
set up, one logger per server, structured data as JSON."""

import logging
import subprocess
import sys

import pytest

import mcp_sync
from mcp_sync import server_requests
from mcp_sync.testing import demo_server


def test_a_program_that_sets_no_logging_up_prints_nothing_of_ours():
    code = ("import mcp_sync\nfrom mcp_sync.testing import demo_server\n"
            "with mcp_sync.connect(demo_server(), log_level='info') as c:\n"
            "    c.call_tool('log', {'level': 'error', 'message': 'disk on fire'})\n"
            "    print('done')\n")
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0 and ran.stdout == "done\n"
    assert ran.stderr == ""  # before: "disk on fire" printed bare by Python's last-resort handler


def test_messages_go_to_the_servers_own_logger_with_its_source_in_brackets(caplog):
    with caplog.at_level(logging.INFO, logger="mcp_sync.server"):
        with mcp_sync.connect(demo_server(), log_level="info") as client:
            client.call_tool("log", {"level": "warning", "message": "disk almost full"})
    [record] = [r for r in caplog.records if r.name.startswith("mcp_sync.server")]
    assert record.name == "mcp_sync.server.mcp-sync-demo" and record.levelno == logging.WARNING
    assert record.getMessage() == "[demo] disk almost full"


def test_structured_data_is_written_as_json(caplog):
    log = server_requests.ServerLog()
    log.name = "reports.example"
    with caplog.at_level(logging.DEBUG, logger="mcp_sync.server"):
        log({"level": "error", "logger": "db", "data": {"error": "timeout", "ms": 1500, "tags": ["a", "é"]}})
    [record] = caplog.records
    assert record.name == "mcp_sync.server.reports_example"  # one level below mcp_sync.server
    assert record.getMessage() == '[db] {"error": "timeout", "ms": 1500, "tags": ["a", "é"]}'


def test_server_loggers_are_bounded_and_stderr_is_not_taken(monkeypatch):
    monkeypatch.setattr(server_requests, "_server_loggers", {})
    monkeypatch.setattr(server_requests, "MAX_SERVER_LOGGERS", 2)
    assert server_requests.server_logger("stderr").name == "mcp_sync.server.stderr_"
    assert server_requests.server_logger("one").name == "mcp_sync.server.one"
    assert server_requests.server_logger("two").name == "mcp_sync.server"  # past the bound
    assert server_requests.server_logger("one").name == "mcp_sync.server.one"  # known names stay
    assert server_requests.server_logger(None).name == "mcp_sync.server"
    assert server_requests.server_logger("  ").name == "mcp_sync.server"


@pytest.mark.parametrize("data", [float("nan"), {"deep": object()}])
def test_data_json_cannot_write_is_still_logged(caplog, data):
    with caplog.at_level(logging.DEBUG, logger="mcp_sync.server"):
        server_requests.ServerLog()({"level": "info", "data": data})
    assert len(caplog.records) == 1


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18"])
def test_an_answer_refused_by_the_servers_schema_is_one_warning_line(caplog, version):
    from tests.helpers import demo_command

    def bad(params):
        return {"action": "accept", "content": {"name": "Ada", "guests": "many"}}

    with caplog.at_level(logging.DEBUG, logger="mcp_sync"):
        with mcp_sync.connect(demo_command(), protocol=version, input_handlers={"form": bad}) as client:
            assert client.call_tool("book_table", {"date": "friday"}).is_error
    [warning] = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert warning.getMessage().startswith("the answer to the server's elicitation/create was not sent: ")
    assert "guests" in warning.getMessage() and warning.exc_info is None  # before: a full traceback at ERROR
