"""The mcp-sync command, against the bundled demo server and others."""

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

import mcp_sync
from mcp_sync.cli import _parse_pairs, main
from tests.helpers import scripted


@pytest.fixture(autouse=True)
def no_colour_forced(monkeypatch):
    # The expected output below is uncoloured: FORCE_COLOR in the
    # environment running the tests would colour even a StringIO.
    monkeypatch.delenv("FORCE_COLOR", raising=False)


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_tools_lists_the_demo_server():
    code, out, err = run("tools")
    assert code == 0, err
    names = [line.split("(")[0] for line in out.splitlines()]
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
    # Not a terminal: whole lines, at most one a second (the first and the
    # last always), drawn by the library's bar.
    lines = err.splitlines()
    assert lines == ["[########................] 1/3  33% step 1/3", "[########################] 3/3 100% step 3/3"]


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
    assert out.strip() == "echo()"  # a tool without parameters


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


def test_the_installed_console_script():
    script = Path(sys.executable).parent / "mcp-sync"
    assert script.exists(), "the package's console script is not installed"
    proc = subprocess.run([str(script), "call", "countdown", "steps=2", "delay=0"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "liftoff"
    assert "2/2 100% step 2/2" in proc.stderr


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
    assert "Booking a table for friday" in err and "Guests (integer, at least 1) [2] (optional): " in err


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
    from mcp_sync.testing import GateAnswer

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

    out, err = Terminal(), Terminal()
    server = hostile_server()
    code = main(["call", "shout"], stdout=out, stderr=err,
                connect_fn=lambda target, **options: __import__("mcp_sync").connect(server, **options))
    assert code == 0
    # Redrawn in place (a carriage return, no line per update), the
    # server's escapes shown, not sent.
    assert err.getvalue().startswith("\r[############............] 1/2  50% step\\x1b]0;pwned")
    assert "\x1b" not in err.getvalue() and err.getvalue().count("\n") == 1


# -- options anywhere, headers, config files, --args, -v (issue 17) -----------------------------

SCRIPT = Path(sys.executable).parent / "mcp-sync"


def run_script(*argv, cwd, env=None, input=None):
    """The installed command in a subprocess, in `cwd`, with a HOME of its own
    so that no config file of the person running the tests is found."""
    import os

    home = Path(cwd) / "home"
    home.mkdir(exist_ok=True)
    environ = {k: v for k, v in os.environ.items() if k not in ("XDG_CONFIG_HOME", "APPDATA", "MCP_SYNC_TOKEN")}
    environ.update(HOME=str(home), **(env or {}))
    return subprocess.run([str(SCRIPT), *argv], cwd=cwd, env=environ, input=input, capture_output=True,
                          text=True, timeout=60)


def write_config(folder, servers, name=".mcp.json"):
    path = Path(folder) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mcpServers": servers}, indent=2))
    return path


DEMO_ENTRY = {"command": sys.executable, "args": ["-m", "mcp_sync.testing.server"]}


def test_options_after_the_subcommand():
    code, out, err = run("tools", "--json")
    assert code == 0, err
    assert "echo" in {tool["name"] for tool in json.loads(out)}
    code, out, err = run("call", "add", "a=2", "--json", "b=3", "--timeout", "10")
    assert code == 0, err
    assert json.loads(out)["structuredContent"] == {"sum": 5}


def test_an_option_on_both_sides_of_the_subcommand():
    code, out, _ = run("discover", "--protocol", "2025-06-18")
    assert code == 0 and "protocol:     2025-06-18" in out
    # A repeatable option collects from both sides: both versions are allowed, the newer wins.
    code, out, _ = run("--protocol", "2025-06-18", "discover", "--protocol", "2025-11-25")
    assert code == 0 and "protocol:     2025-11-25" in out
    # Another one given on both sides: the later wins, as argparse does for a repeated option.
    code, out, err = run("--answer", "none", "call", "defaults_form", "--answer", "defaults")
    assert code == 0 and json.loads(out)["subscribe"] is True, err


def test_url_after_the_subcommand_and_a_stdio_program_after_double_dash():
    from mcp_sync.testing import HTTPServer, demo_server

    with HTTPServer(demo_server()) as httpd:
        code, out, err = run("tools", "--url", httpd.url)
        assert code == 0 and "echo" in out, err
    code, out, err = run("tools", "--json", "--", *scripted())
    assert code == 0, err
    assert [tool["name"] for tool in json.loads(out)] == ["echo"]


def test_options_after_the_subcommand_in_the_installed_command(tmp_path):
    proc = run_script("call", "add", "a=2", "b=3", "--json", "--timeout", "20", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["structuredContent"] == {"sum": 5}


def test_unknown_options_are_still_usage_errors():
    code, _, err = run("tools", "--bogus")
    assert code == 2 and "unrecognized arguments: --bogus" in err
    code, _, err = run("tools", "a=1")
    assert code == 2 and "unrecognized arguments: a=1" in err


def test_headers_reach_the_http_server():
    from mcp_sync.testing import HTTPServer, demo_server

    with HTTPServer(demo_server()) as httpd:
        code, out, err = run("call", "echo", "text=hi", "--url", httpd.url,
                             "--header", "X-Tenant: acme", "--header", "X-Trace:  a:b ")
        assert (code, out.strip()) == (0, "hi"), err
        posts = [r for r in httpd.requests if r.method == "POST"]
        assert posts and all(r.headers.get("X-Tenant") == "acme" for r in posts)
        assert all(r.headers.get("X-Trace") == "a:b" for r in posts)


@pytest.mark.parametrize("header, message", [
    ("Bearer secret-token", "--header wants 'Name: value', and this one has no colon"),
    (": secret-token", "--header wants 'Name: value', and '' is not a header name"),
    ("Bad Name: secret-token", "--header wants 'Name: value', and 'Bad Name' is not a header name"),
    ("Content-Type: text/plain", "set by the transport"),
])
def test_a_malformed_header_is_a_usage_error(header, message):
    code, out, err = run("--url", "http://127.0.0.1:9/mcp", "tools", "--header", header)
    assert code == 2 and out == ""
    assert err.startswith("mcp-sync: error: ") and err.count("\n") == 1 and message in err, err
    assert "secret-token" not in err


def test_headers_go_with_http_only():
    code, _, err = run("tools", "--header", "X-A: 1")
    assert code == 2 and "--header goes with --url" in err
    code, _, err = run("tools", "--header", "X-A: 1", "--header", "x-a: 2", "--url", "http://127.0.0.1:9/mcp")
    assert code == 2 and "given twice" in err


def test_an_authorization_header_wins_over_the_environment_token(monkeypatch):
    from mcp_sync.testing import HTTPServer, demo_server
    from mcp_sync.testing import GateAnswer

    def gate(request):
        if request.headers.get("Authorization") == "Bearer by-hand":
            return None
        return GateAnswer(401, {"WWW-Authenticate": "Bearer"})

    monkeypatch.setenv("MCP_SYNC_TOKEN", "from-env")
    with HTTPServer(demo_server(), gate=gate) as httpd:
        code, out, err = run("tools", "--url", httpd.url, "--header", "Authorization: Bearer by-hand")
        assert code == 0 and "echo" in out, err


def test_call_arguments_from_json_a_file_or_stdin(tmp_path, monkeypatch):
    code, out, err = run("call", "add", "--args", '{"a": 2, "b": 3}')
    assert (code, out.strip()) == (0, "5"), err
    args_file = tmp_path / "args.json"
    args_file.write_text('{"text": "from a file", "unused": [1]}')
    code, out, err = run("call", "echo", "--args", f"@{args_file}")
    assert (code, out.strip()) == (0, "from a file"), err
    # Pairs given too override the object's keys.
    code, out, err = run("call", "add", "--args", '{"a": 2, "b": 3}', "b=40")
    assert (code, out.strip()) == (0, "42"), err
    monkeypatch.setattr("sys.stdin", io.StringIO('{"text": "piped"}'))
    code, out, err = run("call", "echo", "--args", "@-")
    assert (code, out.strip()) == (0, "piped"), err
    code, out, err = run("prompt", "greet", "--args", '{"name": "Ada"}')
    assert code == 0 and "Ada" in out, err


@pytest.mark.parametrize("value, message", [
    ("{not json", "--args is not valid JSON"),
    ("[1, 2]", "--args must be a JSON object, not list"),
    ("@/nonexistent/args.json", "cannot read --args file /nonexistent/args.json"),
])
def test_bad_args_are_usage_errors(value, message):
    code, out, err = run("call", "echo", "--args", value)
    assert code == 2 and out == ""
    assert err.startswith("mcp-sync: error: ") and err.count("\n") == 1 and message in err, err


def test_call_args_from_a_file_in_the_installed_command(tmp_path):
    (tmp_path / "args.json").write_text('{"a": 1.5, "b": 2}')
    proc = run_script("--json", "call", "add", "--args", "@args.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["structuredContent"] == {"sum": 3.5}


SECRETS = ("env-secret-1", "header-secret-2", "url-password-3", "query-secret-4")


def real_shaped_config(folder):
    """A Claude Code `.mcp.json` as people write them: a stdio server with a
    secret in its env, an HTTP one with a secret header, an SSE one with
    credentials in its URL, one disabled."""
    return write_config(folder, {
        "demo": {**DEMO_ENTRY, "env": {"API_KEY": SECRETS[0], "REGION": "${REGION:-eu}"}},
        "search": {"type": "http", "url": "https://mcp.example.com/mcp",
                   "headers": {"Authorization": f"Bearer {SECRETS[1]}", "X-Tenant": "${TENANT}"}},
        "legacy": {"type": "sse", "url": f"https://bob:{SECRETS[2]}@old.example.com/sse?key={SECRETS[3]}"},
        "off": {"command": "old-server", "disabled": True},
    })


def test_servers_lists_the_config_found_without_secrets(tmp_path):
    real_shaped_config(tmp_path)
    proc = run_script("servers", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == f"mcp-sync: using {tmp_path / '.mcp.json'}\n"
    lines = proc.stdout.splitlines()
    assert [line.split()[:2] for line in lines] == [["demo", "stdio"], ["search", "http"], ["legacy", "sse"],
                                                   ["off", "-"]]
    assert f"{sys.executable} -m mcp_sync.testing.server" in lines[0] and "env: API_KEY, REGION" in lines[0]
    assert "https://mcp.example.com/mcp" in lines[1] and "headers: Authorization, X-Tenant" in lines[1]
    assert "https://***@old.example.com/sse?key=***" in lines[2]
    assert "(disabled)" in lines[3]
    proc = run_script("servers", "--json", cwd=tmp_path)
    listed = json.loads(proc.stdout)
    assert [s["name"] for s in listed] == ["demo", "search", "legacy", "off"]
    assert listed[0]["env"] == ["API_KEY", "REGION"] and listed[1]["headers"] == ["Authorization", "X-Tenant"]
    for secret in SECRETS:
        assert secret not in proc.stdout + proc.stderr


def test_a_config_file_with_an_entry_of_the_wrong_shape_serves_the_others(tmp_path):
    # A file shared with another host: one entry of a transport or shape
    # mcp-sync cannot use made every command fail, whatever server it named.
    write_config(tmp_path, {"demo": DEMO_ENTRY, "ws": {"type": "websocket", "url": "ws://x"},
                            "typo": {"comand": "x"}})
    proc = run_script("call", "add", "a=2", "b=3", "--server", "demo", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "5"
    proc = run_script("tools", "--server", "ws", cwd=tmp_path)
    assert proc.returncode == 1 and "server 'ws' has unknown type 'websocket' (known: stdio, http, sse)" in proc.stderr
    proc = run_script("servers", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert [line.split()[:2] for line in proc.stdout.splitlines()] == [["demo", "stdio"], ["typo", "-"], ["ws", "-"]]
    assert "(unusable: has neither \"command\" nor \"url\")" in proc.stdout
    listed = json.loads(run_script("servers", "--json", cwd=tmp_path).stdout)
    assert listed[1:] == [{"name": "typo", "unusable": "has neither \"command\" nor \"url\""},
                          {"name": "ws", "unusable": "has unknown type 'websocket' (known: stdio, http, sse)"}]


def test_servers_of_a_named_config_file(tmp_path):
    path = write_config(tmp_path / "elsewhere", {"one": {"url": "http://127.0.0.1:9/mcp"}}, name="mcp.json")
    proc = run_script("servers", "--config", str(path), cwd=tmp_path)
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout.split() == ["one", "http", "http://127.0.0.1:9/mcp"]


def test_servers_without_a_config_file_says_where_it_looked(tmp_path):
    proc = run_script("servers", cwd=tmp_path)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith("mcp-sync: error: no MCP config file found (looked at ")
    assert str(tmp_path / ".mcp.json") in proc.stderr


def test_a_server_found_by_name_in_the_working_directory(tmp_path):
    real_shaped_config(tmp_path)
    proc = run_script("call", "add", "a=2", "b=3", "--server", "demo", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "5"
    assert proc.stderr == f"mcp-sync: using server 'demo' from {tmp_path / '.mcp.json'}\n"


def test_a_vscode_file_is_found_too(tmp_path):
    path = tmp_path / ".vscode" / "mcp.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"servers": {"demo": {"type": "stdio", **DEMO_ENTRY}}}))
    proc = run_script("--server", "demo", "tools", cwd=tmp_path)
    assert proc.returncode == 0 and "echo" in proc.stdout, proc.stderr
    assert f"from {path}" in proc.stderr


def test_a_configured_http_server_gets_its_headers_and_ours(tmp_path, monkeypatch):
    from mcp_sync.testing import HTTPServer, demo_server

    with HTTPServer(demo_server()) as httpd:
        config = write_config(tmp_path, {"web": {"type": "http", "url": "${BASE}/mcp",
                                                 "headers": {"X-Tenant": "${env:TENANT}", "X-Mode": "file"}}})
        monkeypatch.setenv("BASE", httpd.url.rsplit("/", 1)[0])
        monkeypatch.setenv("TENANT", "acme")
        code, out, err = run("tools", "--config", str(config), "--server", "web", "--header", "x-mode: cli")
        assert code == 0 and "echo" in out, err
        assert err == ""  # the file was named: nothing to say
        posts = [r for r in httpd.requests if r.method == "POST"]
        assert posts and all(r.headers.get("X-Tenant") == "acme" for r in posts)
        assert all(r.headers.get_all("X-Mode") == ["cli"] for r in posts)


def test_config_mistakes(tmp_path, monkeypatch):
    monkeypatch.delenv("TENANT", raising=False)
    config = str(real_shaped_config(tmp_path))
    code, _, err = run("--config", config, "tools")
    assert code == 2 and "holds 3 servers: choose one with --server NAME (servers: demo, search, legacy)" in err
    code, _, err = run("--config", config, "--server", "nope", "tools")
    assert code == 1 and "no server named 'nope'" in err
    code, _, err = run("--config", config, "--server", "search", "tools")
    assert code == 1 and "environment variable TENANT is not set" in err and SECRETS[1] not in err
    code, _, err = run("--config", config, "--server", "demo", "--header", "X-A: 1", "tools")
    assert code == 2 and "--header goes with an HTTP server" in err
    code, _, err = run("--server", "demo", "--url", "http://127.0.0.1:9/mcp", "tools")
    assert code == 2 and "not --url and --server/--config" in err
    code, _, err = run("--config", config, "servers", "--", "python")
    assert code == 2 and "servers lists a config file" in err
    code, _, err = run("--config", str(tmp_path / "missing.json"), "--server", "x", "tools")
    assert code == 1 and "no config file at" in err


def stderr_server(folder):
    """A stdio server that says something on its stderr, with an escape in it, then serves the demo."""
    script = Path(folder) / "noisy.py"
    script.write_text("import sys\n"
                      "sys.stderr.write('noisy server starting \\x1b]0;pwned\\x07\\n')\n"
                      "sys.stderr.flush()\n"
                      "from mcp_sync.testing.server import main\n"
                      "sys.exit(main([]))\n")
    return [sys.executable, str(script)]


def test_verbose_shows_the_servers_stderr_and_debug_logs(tmp_path):
    code, out, err = run("tools", "--", *stderr_server(tmp_path))
    assert code == 0 and "echo" in out
    assert "noisy server" not in err
    code, out, err = run("tools", "-v", "--", *stderr_server(tmp_path))
    assert code == 0 and "echo" in out, err
    line = next(line for line in err.splitlines() if "noisy server starting" in line)
    assert line.startswith("INFO mcp_sync.server.stderr: ")
    assert "\\x1b]0;pwned\\x07" in line and "\x1b" not in err  # shown, neutralised
    # The handler is gone again: a later run in this process is quiet.
    code, out, err = run("tools", "--", *stderr_server(tmp_path))
    assert code == 0 and err == ""


def test_verbose_shows_debug_logs():
    from mcp_sync.testing import HTTPServer, demo_server

    with HTTPServer(demo_server()) as httpd:
        argv = ("tools", "--url", httpd.url, "--protocol", "2025-06-18")  # a session, ended by a DELETE
        code, out, err = run(*argv)
        assert code == 0 and err == ""
        code, out, err = run(*argv, "-v")
        assert code == 0 and "echo" in out
        assert "DEBUG mcp_sync.transport.http: session DELETE answered 200" in err.splitlines()


def test_verbose_in_the_installed_command(tmp_path):
    proc = run_script("--verbose", "tools", "--", *stderr_server(tmp_path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "noisy server starting" in proc.stderr and "echo" in proc.stdout


def test_help_shows_the_options_after_the_subcommand():
    code, out, err = run("call", "--help")
    assert code == 0 and err == ""
    assert "--args JSON|@FILE" in out and "--url URL" in out and "options (before or after COMMAND)" in out


def test_main_takes_a_config_instead_of_a_file(tmp_path):
    # What an integration hands in (manage.py mcp): servers from settings,
    # with no file written. `--server` names one, `servers` lists them, a
    # single server needs no --server, and a target on the line still wins.
    from mcp_sync import load_config

    def run_with(config, *argv):
        out, err = io.StringIO(), io.StringIO()
        return main(list(argv), stdout=out, stderr=err, config=config), out.getvalue(), err.getvalue()

    two = load_config({"mcpServers": {"demo": DEMO_ENTRY, "web": {"url": "http://127.0.0.1:9/mcp",
                                                                  "headers": {"K": "${SECRET_X}"}}}})
    code, out, err = run_with(two, "call", "add", "a=2", "b=3", "--server", "demo")
    assert (code, out) == (0, "5\n"), err
    code, _, err = run_with(two, "tools")
    assert code == 2 and "the configuration holds 2 servers: choose one with --server NAME (servers: demo, web)" in err
    code, out, err = run_with(two, "servers")
    assert code == 0 and err == ""  # no file was looked for
    assert [line.split()[:2] for line in out.splitlines()] == [["demo", "stdio"], ["web", "http"]]
    assert out.splitlines()[1].endswith("http://127.0.0.1:9/mcp  (headers: K)")
    code, _, err = run_with(two, "tools", "--server", "nope")
    assert code == 1 and "no server named 'nope'" in err

    one = load_config({"mcpServers": {"demo": DEMO_ENTRY}})
    assert run_with(one, "call", "echo", "text=hi")[:2] == (0, "hi\n")
    other = write_config(tmp_path, {"file-demo": DEMO_ENTRY})
    code, out, err = run_with(one, "servers", "--config", str(other))  # a file on the line wins
    assert code == 0 and out.split()[0] == "file-demo", err
    assert run_with(one, "call", "echo", "text=own", "--", *[DEMO_ENTRY["command"], *DEMO_ENTRY["args"]])[:2] == (
        0, "own\n")


def test_an_abbreviated_option_is_not_taken_for_another():
    # `--ur` for `--url` would aim a configured server's options at a typo.
    code, _, err = run("tools", "--ur", "http://127.0.0.1:9/mcp")
    assert code == 2 and "unrecognized arguments: --ur" in err, err
    code, _, err = run("--time", "5", "tools")
    assert code == 2 and "--time" in err, err


def test_a_command_reconnects_only_for_a_request_that_needs_it():
    """A server that dies under the command's last request was set up again
    at once (eager reconnecting), racing the command's exit: now and then
    `-v` showed a "reconnecting (attempt 1)" warning, and a stdio server was
    started for nothing."""
    made = []

    def connect_fn(target, **options):
        made.append(options)
        return mcp_sync.connect(target, **options)

    out, err = io.StringIO(), io.StringIO()
    code = main(["call", "crash"], stdout=out, stderr=err, connect_fn=connect_fn)
    assert code != 0 and "exited with code 3" in err.getvalue()
    assert [options["reconnect"].eager for options in made] == [False]
