"""The mcp-sync command, against the bundled demo server and others."""

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from mcp_sync.cli import ProgressBar, _parse_pairs, main
from mcp_sync.types import Progress
from tests.conftest import scripted


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_tools_lists_the_demo_server():
    code, out, err = run("tools")
    assert code == 0, err
    names = [line.split()[0] for line in out.splitlines()]
    assert {"echo", "add", "countdown"} <= set(names)
    assert "Echo" in out or "echo" in out


def test_call_prints_text():
    code, out, _ = run("call", "add", "a=2", "b=3")
    assert (code, out.strip()) == (0, "5")


def test_call_values_parse_as_json_when_they_can():
    code, out, _ = run("call", "echo", "text=hello world")
    assert (code, out.strip()) == (0, "hello world")
    code, out, _ = run("--json", "call", "add", "a=2.5", "b=1")
    assert code == 0
    assert json.loads(out)["structuredContent"] == {"sum": 3.5}


def test_call_shows_a_progress_bar_on_stderr():
    code, out, err = run("call", "countdown", "steps=3", "delay=0")
    assert code == 0 and out.strip() == "liftoff"
    lines = err.splitlines()
    assert len(lines) == 3
    assert lines[-1].startswith("[" + "#" * 30 + "] 3/3 step 3/3")


def test_tool_error_exits_non_zero_and_prints_to_stderr():
    code, out, err = run("call", "fail", "message=kaputt")
    assert code == 1 and out == "" and "kaputt" in err


def test_server_error_is_one_clear_line():
    code, out, err = run("call", "no_such_tool")
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and err.startswith("mcp-sync: error: ") and "no_such_tool" in err


def test_resources_and_read():
    code, out, _ = run("resources")
    assert code == 0 and "demo://readme" in out and "demo://items/{id}" in out
    code, out, _ = run("read", "demo://readme")
    assert code == 0 and out.startswith("# mcp_sync demo server")
    code, out, _ = run("read", "demo://logo.png")
    assert code == 0 and out.startswith("<image/png blob, ")
    code, out, err = run("read", "demo://missing")
    assert code == 1 and "demo://missing" in err


def test_prompts_and_prompt():
    code, out, _ = run("prompts")
    assert code == 0 and out.startswith("greet")
    code, out, _ = run("prompt", "greet", "name=Ada", "style=pirate")
    assert code == 0 and out.startswith("user: ") and "Ada" in out


@pytest.mark.parametrize("protocol", [None, "2025-06-18"])
def test_discover(protocol):
    args = ["--protocol", protocol] if protocol else []
    code, out, _ = run(*args, "discover")
    assert code == 0
    assert "mcp-sync-demo" in out
    assert f"protocol:     {protocol or '2026-07-28'}" in out
    code, out, _ = run(*args, "--json", "discover")
    assert code == 0 and json.loads(out)


def test_any_stdio_server_after_double_dash():
    code, out, err = run("tools", "--", *scripted())
    assert code == 0, err
    assert out.strip() == "echo"


def test_an_unreachable_url_is_one_clear_line():
    code, out, err = run("--url", "http://127.0.0.1:9/mcp", "--timeout", "5", "tools")
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and "127.0.0.1:9" in err


def test_usage_errors_exit_2():
    assert run("--url", "ftp://example.com/mcp", "tools")[0] == 2
    code, _, err = run("call", "echo", "no-equals-sign")
    assert code == 2 and "key=value" in err
    assert run("--url", "https://x", "tools", "--", "python")[0] == 2
    assert run()[0] == 2
    assert run("bogus")[0] == 2


def test_a_server_that_cannot_start():
    code, out, err = run("tools", "--", "/nonexistent/server")
    assert code == 1 and "cannot start server" in err


def test_parse_pairs():
    assert _parse_pairs(["a=1", "b=x", "c=[1,2]", "d=", "e=a=b", 'f="q"']) == {
        "a": 1, "b": "x", "c": [1, 2], "d": "", "e": "a=b", "f": "q"}
    with pytest.raises(ValueError):
        _parse_pairs(["=1"])


def test_progress_bar_without_a_total():
    stream = io.StringIO()
    bar = ProgressBar(stream, width=4)
    bar(Progress(progress=2))
    assert stream.getvalue() == "[????] 2\n"


def test_the_installed_console_script():
    script = Path(sys.executable).parent / "mcp-sync"
    assert script.exists(), "the package's console script is not installed"
    proc = subprocess.run([str(script), "call", "countdown", "steps=2", "delay=0"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "liftoff"
    assert "2/2 step 2/2" in proc.stderr


def test_forms_answered_with_defaults_or_refused():
    code, out, err = run("--answer", "defaults", "call", "defaults_form")
    assert code == 0 and json.loads(out)["subscribe"] is True
    code, out, err = run("--answer", "none", "call", "defaults_form")
    assert code == 1 and "elicitation" in err


def test_forms_asked_on_the_terminal(monkeypatch):
    answers = iter(["4", "Ada"])
    monkeypatch.setattr("builtins.input", lambda: next(answers))
    code, out, err = run("--answer", "ask", "call", "book_table", "date=friday")
    assert code == 0, err
    assert out.strip() == "Booked for 4 under Ada"
    assert "Booking a table for friday" in err and "Guests (integer) [2]" in err


# -- authorization ------------------------------------------------------------------------


def test_oauth_in_the_browser_then_from_the_token_file(tmp_path, monkeypatch):
    from mcp_sync.testing.auth import AuthServer, ProtectedMCP

    tokens = tmp_path / "tokens.json"
    with AuthServer() as auth, ProtectedMCP(auth) as mcp:
        opened = []

        def browser(url):
            opened.append(url)
            auth.approve(url)  # the person approves in the browser
            return True

        monkeypatch.setattr("webbrowser.open", browser)
        code, out, err = run("--url", mcp.url, "--oauth", "--token-file", str(tokens), "call", "add", "a=2", "b=3")
        assert (code, out.strip()) == (0, "5"), err
        assert len(opened) == 1 and opened[0] in err  # the URL is also shown, for when no browser opens
        # The next run finds the tokens in the file: no browser.
        code, out, err = run("--url", mcp.url, "--oauth", "--token-file", str(tokens), "tools")
        assert code == 0 and "echo" in out, err
        assert len(opened) == 1 and auth.authorization_requests == 1
    assert tokens.stat().st_mode & 0o777 == 0o600


def test_oauth_without_a_browser_asks_for_the_address(tmp_path, monkeypatch):
    from mcp_sync.testing.auth import AuthServer, ProtectedMCP

    with AuthServer() as auth, ProtectedMCP(auth) as mcp:
        err = io.StringIO()

        def pasted():
            url = next(line.strip() for line in err.getvalue().splitlines() if "/authorize?" in line)
            return auth.redirect_for(url)

        monkeypatch.setattr("builtins.input", pasted)
        out = io.StringIO()
        code = main(["--url", mcp.url, "--oauth", "--no-browser", "--token-file", str(tmp_path / "t.json"),
                     "call", "echo", "text=hi"], stdout=out, stderr=err)
        assert (code, out.getvalue().strip()) == (0, "hi"), err.getvalue()
        assert "Paste the address" in err.getvalue()


def test_a_bearer_token_from_the_environment(monkeypatch):
    from mcp_sync.testing import HTTPServer, demo_server
    from mcp_sync.testing.http import GateAnswer

    def gate(request):
        if request.headers.get("Authorization") == "Bearer from-env":
            return None
        return GateAnswer(401, {"WWW-Authenticate": "Bearer"})

    with HTTPServer(demo_server(), gate=gate) as httpd:
        code, _, err = run("--url", httpd.url, "tools")
        assert code == 1 and "401" in err
        monkeypatch.setenv("MCP_SYNC_TOKEN", "from-env")
        code, out, err = run("--url", httpd.url, "tools")
        assert code == 0 and "echo" in out, err


@pytest.mark.parametrize("argv", [("--oauth", "tools"), ("--url", "http://x/mcp", "--no-browser", "tools"),
                                  ("--url", "http://x/mcp", "--token-file", "t.json", "tools")])
def test_oauth_options_need_url_and_oauth(argv):
    code, _, err = run(*argv)
    assert code == 2 and "go with" in err


# -- a server's text cannot drive the terminal ---------------------------------------------------

# Escape sequences a hostile server might send: set the window title, clear
# the screen, recolour, a C1 CSI (0x9b), BEL, a bare CR (overwrites the line), DEL.
HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x1b[31mred\x9b31m\rover\x7f"
CONTROLS = [chr(c) for c in (*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0))]


def hostile_server():
    from mcp_sync.testing import Server

    server = Server(name="evil" + HOSTILE, version="1" + HOSTILE, instructions="be nice" + HOSTILE)

    @server.tool(description="lists" + HOSTILE)
    def shout(args, ctx):
        ctx.progress(1, 2, message="step" + HOSTILE)
        return "line one\tkept\r\nline two" + HOSTILE

    @server.tool(description="structured", output_schema={"type": "object"})
    def data(args, ctx):
        return {"text": "x" + HOSTILE}

    @server.resource("evil://page", "page" + HOSTILE, description="a page" + HOSTILE, mime_type="text/plain")
    def page():
        return "page" + HOSTILE

    @server.prompt("p", description="prompt" + HOSTILE)
    def p(args):
        return "rendered" + HOSTILE

    return server


def run_hostile(*argv):
    import mcp_sync

    server = hostile_server()
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err, connect_fn=lambda target, **options: mcp_sync.connect(server, **options))
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("argv", [
    ["tools"], ["call", "shout"], ["call", "data"], ["call", "nope" + HOSTILE], ["resources"], ["read", "evil://page"],
    ["prompts"], ["prompt", "p"], ["discover"], ["--protocol", "2025-11-25", "discover"],
])
def test_a_servers_control_characters_are_neutralised(argv):
    code, out, err = run_hostile(*argv)
    printed = out + err
    assert "pwned" in printed, printed  # the text is still shown
    leaked = sorted({c for c in printed if c in CONTROLS})
    assert leaked == [], (leaked, printed)


def test_newlines_and_tabs_are_kept_and_escapes_shown_visibly():
    code, out, err = run_hostile("call", "shout")
    assert code == 0
    assert out.startswith("line one\tkept\nline two\\x1b]0;pwned\\x07\\x1b[2J\\x1b[31mred\\x9b31m\\x0dover\\x7f")
    assert "step\\x1b]0;pwned" in err  # the progress message


def test_json_output_stays_json_with_the_same_values():
    code, out, _ = run_hostile("--json", "call", "data")
    assert code == 0 and not any(c in CONTROLS for c in out.replace("\n", ""))
    assert json.loads(out)["structuredContent"] == {"text": "x" + HOSTILE}


def test_a_terminal_progress_bar_still_redraws_in_place():
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    stream = Terminal()
    bar = ProgressBar(stream, width=4)
    bar(Progress(progress=1, total=2, message="half" + HOSTILE))
    assert stream.getvalue().startswith("\r\x1b[2K[##..] 1/2 half\\x1b]0;pwned")
    assert stream.getvalue().count("\x1b") == 1  # only the bar's own
