"""The mcp-sync command as a newcomer meets it: values read by the tool's
schema, a tool's parameters, --version, one-line errors (JSON with
--json), a closed pipe, content shown by what it is."""

import io
import json
import sys

import pytest

import mcp_sync
from mcp_sync.cli import _closed, _parse_pairs, main
from mcp_sync.testing import RpcError, Server


@pytest.fixture(autouse=True)
def no_colour_forced(monkeypatch):
    # The expected output below is uncoloured (see test_cli_colour.py).
    monkeypatch.delenv("FORCE_COLOR", raising=False)


def usage_error(argv, err):
    """The usage error `err` says: its JSON object's with --json, else its last line's."""
    if "--json" in argv[:argv.index("--") if "--" in argv else len(argv)]:
        said = json.loads(err)
        assert (said["type"], said["status"]) == ("UsageError", 2)
        return said["error"]
    return err.splitlines()[-1].removeprefix("mcp-sync: error: ")


def run(*argv, connect_fn=mcp_sync.connect):
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err, connect_fn=connect_fn)
    return code, out.getvalue(), err.getvalue()


def test_a_string_parameter_keeps_its_text():
    # Before: text=42 was sent as the number 42 and the server refused it.
    assert run("call", "echo", "text=42")[:2] == (0, "42\n")
    assert run("call", "echo", "text=true")[:2] == (0, "true\n")
    assert run("call", "add", "a=2", "b=3")[:2] == (0, "5\n")


def test_key_colon_equals_sends_raw_json():
    code, _, err = run("call", "echo", "text:=42")
    assert code == 1 and "must be of type string" in err  # the server got the number, as asked
    assert _parse_pairs(["tags:=[1,2]", "on:=true"], {"properties": {"tags": {"type": "string"}}}) == {
        "tags": [1, 2], "on": True}


@pytest.mark.parametrize("pair, said", [
    ("a=x", "a takes number (the tool's inputSchema says), and 'x' is not one"),
    ("a:=x", "a:= takes JSON, and 'x' is not JSON"),
])
def test_a_value_the_schema_cannot_take_is_a_usage_error(pair, said):
    code, _, err = run("call", "add", pair, "b=1")
    assert code == 2 and err == f"mcp-sync: error: {said}\n"


def test_tools_name_shows_the_parameters():
    code, out, _ = run("tools", "add")
    assert code == 0
    assert out.splitlines() == ["add  Add two numbers.", "  a  number  required", "  b  number  required"]
    code, out, _ = run("--json", "tools", "add")
    assert code == 0 and json.loads(out)["inputSchema"]["required"] == ["a", "b"]
    code, _, err = run("tools", "nope")
    assert code == 1 and err == "mcp-sync: error: no tool named 'nope' (mcp-sync tools lists them)\n"


def test_version():
    code, out, _ = run("--version")
    assert code == 0 and out == f"mcp-sync {mcp_sync.__version__}\n"


def test_errors_are_json_with_json():
    code, _, err = run("--json", "read", "nope://x")
    assert code == 1
    assert json.loads(err) == {"error": "server error -32602 (resources/read): Resource not found: nope://x",
                               "type": "ResourceNotFound", "status": 1}
    code, _, err = run("--json", "call", "echo", "text")
    assert code == 2 and json.loads(err)["status"] == 2


def test_a_url_without_a_scheme_is_a_usage_error_that_says_which():
    code, _, err = run("--url", "127.0.0.1:8799/mcp", "tools")
    assert code == 2 and err == "mcp-sync: error: --url needs its scheme: --url http://127.0.0.1:8799/mcp (or https://)\n"


def test_a_server_that_crashes_at_start_says_its_last_words_on_the_one_line():
    code, _, err = run("tools", "--", sys.executable, "-c", "import sys; print('boom', file=sys.stderr); sys.exit(3)")
    assert code == 1 and err.count("\n") == 1
    assert "(stderr: boom)" in err and not err.rstrip().endswith("last stderr lines:")


class ClosedPipe(io.StringIO):
    """Standard output whose reader went away (`mcp-sync tools | head -1`)."""

    def write(self, text):
        raise BrokenPipeError(32, "Broken pipe")


def test_a_closed_pipe_exits_quietly():
    # Before: "mcp-sync: error: [Errno 32] Broken pipe" and status 1.
    err = io.StringIO()
    assert main(["tools"], stdout=ClosedPipe(), stderr=err) == 141
    assert err.getvalue() == ""


def test_content_is_shown_by_what_it_is():
    server = Server("media")

    @server.tool
    def media(args, ctx):
        return [
            {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
            {"type": "resource_link", "uri": "demo://report", "name": "report", "mimeType": "text/csv", "size": 42},
            {"type": "resource", "resource": {"uri": "demo://note", "text": "a note"}},
        ]

    code, out, err = run("call", "media", connect_fn=lambda target, **options: mcp_sync.connect(server, **options))
    assert code == 0, err
    assert out.splitlines() == ["<image/png, 8 bytes>", "<resource_link demo://report (text/csv, 42 bytes)>",
                                "<resource demo://note>", "a note"]


@pytest.mark.parametrize("versions", ["2026-07-28", "2025-11-25"])
def test_a_list_the_server_does_not_offer_is_empty_and_says_so(versions):
    # Most stdio servers offer tools only and answer -32601 to the other
    # lists: that is "none", not an error.
    from tests.helpers import scripted

    server = ["--", *scripted("--versions", versions)]
    assert run("prompts", *server) == (0, "(no prompts: the server does not offer prompts)\n", "")
    assert run("resources", *server) == (0, "(no resources: the server does not offer resources)\n", "")
    code, out, _ = run("--json", "prompts", *server)
    assert code == 0 and json.loads(out) == []
    assert run("prompt", "greet", *server) == (
        1, "", "mcp-sync: error: no prompt named 'greet': the server does not offer prompts\n")
    assert run("prompts", "greet", *server) == (
        1, "", "mcp-sync: error: no prompt named 'greet': the server does not offer prompts\n")
    code, out, _ = run("--json", "resources", *server)
    assert code == 0 and json.loads(out) == {"resources": [], "resourceTemplates": []}


def test_resources_without_templates_lists_the_resources():
    # Templates are the part of resources many servers leave out (-32601):
    # the resources are listed all the same.
    from tests.helpers import scripted

    server = ["--", *scripted("--capabilities", "tools,resources")]
    assert run("resources", *server) == (0, "scripted://one  The only one.\n", "")
    code, out, _ = run("--json", "resources", *server)
    assert code == 0 and json.loads(out)["resourceTemplates"] == []


@pytest.mark.parametrize("argv, said", [
    (("tools", "ehco"), "no tool named 'ehco'; did you mean 'echo'? (mcp-sync tools lists them)"),
    (("tools", "get_time"),
     "no tool named 'get_time'; did you mean 'convert_time' or 'get_current_time'? (mcp-sync tools lists them)"),
    (("call", "nope"), "server error -32602 (tools/call): Unknown tool: nope; "
                       "the tools the server listed do not include 'nope'"),
    (("call", "ad", "a=1", "b=2"), "server error -32602 (tools/call): Unknown tool: ad; "
                                   "the tools the server listed do not include 'ad' (did you mean 'add'?)"),
])
def test_a_tool_the_server_does_not_list_is_told_with_the_nearest_listed(argv, said):
    # `tools NAME` looks in the list; `call` calls a name the list does not
    # hold all the same (a server may keep a tool out of its list), and the
    # refusal says what the list holds.
    served = []
    server = Server(name="counting")
    for name in ("add", "echo", "get_current_time", "convert_time"):
        server.tool(name=name, input_schema={"type": "object"})(lambda args, ctx: served.append(args) or "x")
    code, out, err = run(*argv, connect_fn=lambda target, **kw: mcp_sync.connect(server, **kw))
    assert (code, out, err) == (1, "", f"mcp-sync: error: {said}\n")
    assert served == []


@pytest.mark.parametrize("argv, said", [
    (("call", "add", "a=1"), "add needs b (mcp-sync tools add shows its parameters)"),
    (("call", "add"), "add needs a and b (mcp-sync tools add shows its parameters)"),
    (("call", "echo", "txt=hi"),
     "echo needs text; it has no parameter 'txt' (did you mean 'text'?) (mcp-sync tools echo shows its parameters)"),
])
def test_a_required_parameter_left_out_is_a_usage_error(argv, said):
    code, out, err = run(*argv)
    assert (code, out, err) == (2, "", f"mcp-sync: error: {said}\n")


def test_an_extra_parameter_is_sent_unless_the_schema_forbids_it():
    strict = {"type": "object", "properties": {"amount": {"type": "number"}}, "additionalProperties": False}
    server = Server(name="strict")
    server.tool(name="loose", input_schema={"type": "object", "properties": {"a": {"type": "number"}}})(
        lambda args, ctx: json.dumps(args, sort_keys=True))
    server.tool(name="tight", input_schema=strict)(lambda args, ctx: "never")
    connect_fn = lambda target, **kw: mcp_sync.connect(server, **kw)  # noqa: E731
    assert run("call", "loose", "a=1", "b=2", connect_fn=connect_fn) == (0, '{"a": 1, "b": 2}\n', "")
    assert run("call", "tight", "amonut=2", connect_fn=connect_fn) == (
        2, "", "mcp-sync: error: tight has no parameter 'amonut' (did you mean 'amount'?) "
               "(mcp-sync tools tight shows its parameters)\n")


def test_a_parameter_a_pattern_allows_is_sent():
    # additionalProperties false, but patternProperties allow more names
    # (searched, as JSON Schema does).
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "patternProperties": {"^x-": {}},
              "additionalProperties": False}
    server = Server(name="patterned")
    server.tool(name="t", input_schema=schema)(lambda args, ctx: json.dumps(args, sort_keys=True))
    connect_fn = lambda target, **kw: mcp_sync.connect(server, **kw)  # noqa: E731
    assert run("call", "t", "a=1", "x-trace=abc", connect_fn=connect_fn) == (0, '{"a": "1", "x-trace": "abc"}\n', "")
    assert run("call", "t", "a=1", "trace=abc", connect_fn=connect_fn)[0] == 2


def test_a_required_list_with_a_non_name_in_it_is_read_leniently():
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a", {"x": 1}]}
    server = Server(name="odd")
    server.tool(name="t", input_schema=schema)(lambda args, ctx: "ran")
    connect_fn = lambda target, **kw: mcp_sync.connect(server, **kw)  # noqa: E731
    assert run("call", "t", "a=1", connect_fn=connect_fn) == (0, "ran\n", "")
    assert run("call", "t", connect_fn=connect_fn)[0] == 2


def test_prompts_name_shows_the_arguments():
    code, out, _ = run("prompts", "greet")
    assert code == 0
    assert out.splitlines() == ["greet  Greet someone.", "  name   required  Who to greet",
                                "  style            formal, friendly or pirate"]
    assert run("prompts", "personal_greeting")[:2] == (
        0, "personal_greeting  A greeting for the user, who is asked for their name.\n  (no arguments)\n")
    code, out, _ = run("--json", "prompts", "greet")
    assert code == 0 and [a["name"] for a in json.loads(out)["arguments"]] == ["name", "style"]
    assert run("prompts", "gret") == (
        1, "", "mcp-sync: error: no prompt named 'gret'; did you mean 'greet'? (mcp-sync prompts lists them)\n")


@pytest.mark.parametrize("argv, status, said", [
    (("prompt", "gret", "name=Ada"), 1, "server error -32602 (prompts/get): Unknown prompt: gret; "
                                        "no prompt 'gret' in the list mcp-sync prompts shows; did you mean 'greet'?"),
    (("prompt", "greet"), 2, "greet needs name (mcp-sync prompts greet shows its arguments)"),
    (("prompt", "greet", "nme=Ada"),
     2, "greet needs name; it has no argument 'nme' (did you mean 'name'?) (mcp-sync prompts greet shows its arguments)"),
])
def test_a_prompt_is_checked_against_the_servers_list_before_it_is_got(argv, status, said):
    assert run(*argv) == (status, "", f"mcp-sync: error: {said}\n")


def test_a_prompt_argument_the_prompt_does_not_declare_is_still_sent():
    assert run("prompt", "greet", "name=Ada", "mood=glad")[:2] == (0, "user: Please greet Ada in a friendly style.\n")


def test_a_refusal_of_a_name_the_list_does_not_hold_says_so_however_the_server_words_it():
    # Official-SDK servers answer an unknown tool with an error result, and
    # an unknown prompt with some error other than -32602.
    from tests.helpers import scripted

    server = ["--", *scripted("--mode", "unknown-tool-is-error-result", "--capabilities", "tools,prompts")]
    assert run("call", "ech", *server) == (
        1, "", "Unknown tool: ech\nmcp-sync: no tool 'ech' in the list mcp-sync tools shows; did you mean 'echo'?\n")
    assert run("call", "echo", "text=hi", *server)[:2] == (0, "hi\n")
    assert run("prompt", "gret", *server) == (
        1, "", "mcp-sync: error: server error -32601 (prompts/get): Method not found: prompts/get; "
               "no prompt 'gret' in the list mcp-sync prompts shows; did you mean 'greet'?\n")


def test_a_pattern_that_cannot_run_leaves_the_name_to_the_server():
    # re cannot run "x{4294967296}" (OverflowError): the client's check and
    # the test server both let the name through instead of failing.
    schema = {"type": "object", "properties": {"a": {}}, "patternProperties": {"^x{4294967296}": {}},
              "additionalProperties": False}
    server = Server(name="overflow")
    server.tool(name="t", input_schema=schema)(lambda args, ctx: json.dumps(args, sort_keys=True))
    connect_fn = lambda target, **kw: mcp_sync.connect(server, **kw)  # noqa: E731
    assert run("call", "t", "a=1", "y=2", connect_fn=connect_fn) == (0, '{"a": 1, "y": 2}\n', "")


def test_a_name_a_pattern_allows_is_not_named_beside_a_missing_one():
    schema = {"type": "object", "properties": {"a": {}}, "patternProperties": {"^x-": {}},
              "additionalProperties": False, "required": ["a"]}
    server = Server(name="patterned")
    server.tool(name="t", input_schema=schema)(lambda args, ctx: "ran")
    connect_fn = lambda target, **kw: mcp_sync.connect(server, **kw)  # noqa: E731
    assert run("call", "t", "x-trace=1", connect_fn=connect_fn) == (
        2, "", "mcp-sync: error: t needs a (mcp-sync tools t shows its parameters)\n")


@pytest.mark.timeout(60)
def test_a_pattern_that_backtracks_is_given_up_and_leaves_the_name_to_the_server():
    # A server's patternProperties are matched against the user's argument
    # names; Python's re takes hours on this one ("(x+x+)+y" against 40 x:
    # it doubles with each x; `regex` minutes against 3,000) and cannot be
    # interrupted. The check matches as the library checks a tool's output
    # (`regex`, bounded) and lets the name through when the match does not
    # finish in time.
    allowed = _closed({"type": "object", "additionalProperties": False, "patternProperties": {"(x+x+)+y": {}}})
    assert allowed is not None
    assert allowed("x" * 40) is False  # checked: `regex` sees at once that no "y" follows
    assert allowed("xxy") is True  # matched
    assert allowed("z") is False  # checked: no pattern allows it
    assert allowed("x" * 3000) is True  # not checked in time: the server judges
    # The time is for the whole command line: once spent, every name is left to the server.
    assert allowed("z") is True


@pytest.mark.parametrize("argv, said", [
    # A misspelt command: the nearest one, and the hidden completion command never offered.
    (["tolls"], "unknown command 'tolls'; did you mean 'tools'? (mcp-sync --help lists the commands)"),
    (["--json", "cal", "add"], "unknown command 'cal'; did you mean 'call'? (mcp-sync --help lists the commands)"),
    (["zzz"], "unknown command 'zzz' (mcp-sync --help lists the commands)"),
    # A server program given first: where it goes, with the command found after it.
    (["/srv/bin/my-server", "tools"], "unknown command '/srv/bin/my-server': a server program goes last, after --: "
                                      "mcp-sync tools -- /srv/bin/my-server"),
    (["--json", "./server.py", "--port", "1", "call", "add", "a=1"],
     "unknown command './server.py': a server program goes last, after --: "
     "mcp-sync call add a=1 --json -- ./server.py --port 1"),
    (["server.py"], "unknown command 'server.py': a server program goes last, after --: "
                    "mcp-sync tools -- server.py"),
    (["python", "-m", "my_server", "tools"], "unknown command 'python': a server program goes last, after --: "
                                             "mcp-sync tools -- python -m my_server"),
    # The first command word after the program is the command (a tool may be named like one).
    (["./srv.py", "call", "read", "path=x"], "unknown command './srv.py': a server program goes last, after --: "
                                             "mcp-sync call read path=x -- ./srv.py"),
    # A `--` after the program: what follows it is the program's too.
    (["./srv.py", "--", "call", "add", "a=1"], "unknown command './srv.py': a server program goes last, after --: "
                                               "mcp-sync call add a=1 -- ./srv.py"),
    (["node", "server.js", "--", "--stdio"], "unknown command 'node': a server program goes last, after --: "
                                             "mcp-sync tools -- node server.js --stdio"),
    # A URL goes with --url (after --, it would be started as a program).
    (["http://127.0.0.1:8000/mcp", "tools"], "unknown command 'http://127.0.0.1:8000/mcp': a server URL goes with "
                                             "--url: mcp-sync tools --url http://127.0.0.1:8000/mcp"),
    # A tool called without `call`, whether or not a program of that name is on PATH.
    (["echo", "text=hi"], "unknown command 'echo'; to call the tool 'echo': mcp-sync call echo text=hi"),
    (["--json", "add", "a=1", "b=2"], "unknown command 'add'; to call the tool 'add': mcp-sync --json call add a=1 b=2"),
])
def test_an_unknown_command_says_what_to_type_instead(argv, said):
    code, out, err = run(*argv)
    assert (code, out) == (2, "")
    assert usage_error(argv, err) == said
    assert "__complete" not in err


@pytest.mark.parametrize("argv, said", [
    # An option's value spelt like the program is not where the command went.
    (["--timeout", "5", "--token-file", "server.py", "server.py", "tools"],
     "unknown command 'server.py': a server program goes last, after --: "
     "mcp-sync tools --timeout 5 --token-file server.py -- server.py"),
    (["--config", "servers.json", "--json", "./server.py", "tools"],
     "unknown command './server.py': a server program goes last, after --: mcp-sync tools --json -- ./server.py "
     "(--config servers.json was left out: one server at a time)"),
    (["--server", "npx", "npx", "-y", "srv", "tools"],
     "unknown command 'npx': a server program goes last, after --: mcp-sync tools -- npx -y srv "
     "(--server npx was left out: one server at a time)"),
    # A server chosen already is not carried into a line that chooses another.
    (["--url", "http://127.0.0.1:1/mcp", "./server.py", "tools"],
     "unknown command './server.py': a server program goes last, after --: mcp-sync tools -- ./server.py "
     "(--url http://127.0.0.1:1/mcp was left out: one server at a time)"),
    (["--url=http://127.0.0.1:1/mcp", "--json", "http://127.0.0.1:2/mcp", "tools"],
     "unknown command 'http://127.0.0.1:2/mcp': a server URL goes with --url: "
     "mcp-sync tools --json --url http://127.0.0.1:2/mcp (--url=http://127.0.0.1:1/mcp was left out: one server at a time)"),
])
def test_the_line_said_instead_keeps_the_options_but_not_a_second_server(argv, said):
    code, out, err = run(*argv)
    assert (code, out) == (2, "")
    assert usage_error(argv, err) == said


@pytest.mark.parametrize("argv, said", [
    (["--", "/srv/bin/my-server", "tools"],
     "the command goes before --, the server program after it: mcp-sync tools -- /srv/bin/my-server"),
    (["--json", "--", "npx", "-y", "some-server", "call", "add", "a=1"],
     "the command goes before --, the server program after it: mcp-sync call add a=1 --json -- npx -y some-server"),
    (["--", "https://example.com/mcp", "tools"],
     "the command goes first, and a server URL goes with --url: mcp-sync tools --url https://example.com/mcp"),
])
def test_a_command_after_the_server_program_is_told_to_go_first(argv, said):
    code, out, err = run(*argv)
    assert (code, out) == (2, "")
    assert usage_error(argv, err) == said


def test_a_program_on_path_is_taken_for_one_only_before_a_command(tmp_path, monkeypatch):
    # `cal` is a program on many machines, and one letter from `call`: the
    # command meant wins. A program on PATH is one when a command follows it.
    for name in ("cal", "acme-mcp"):
        program = tmp_path / name
        program.write_text("#!/bin/sh\n")
        program.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert run("cal", "add")[2].splitlines()[-1] == (
        "mcp-sync: error: unknown command 'cal'; did you mean 'call'? (mcp-sync --help lists the commands)")
    assert run("acme-mcp", "tools")[2].splitlines()[-1] == (
        "mcp-sync: error: unknown command 'acme-mcp': a server program goes last, after --: "
        "mcp-sync tools -- acme-mcp")
    assert run("acme-mcp")[2].splitlines()[-1] == (
        "mcp-sync: error: unknown command 'acme-mcp' (mcp-sync --help lists the commands)")


def test_no_command_at_all_is_still_argparses_error():
    code, _, err = run("-v")
    assert code == 2 and err.splitlines()[-1] == "mcp-sync: error: the following arguments are required: COMMAND"
    code, _, err = run("--json")
    assert code == 2 and usage_error(["--json"], err) == "the following arguments are required: COMMAND"


_DEMO = "(no server was given, so the demo server is used)"


@pytest.mark.parametrize("argv, said", [
    (["tools", "/srv/bin/my-server"], f"'/srv/bin/my-server' reads as a server program, not a tool name {_DEMO}: "
                                      f"a server program goes last, after --, as in mcp-sync tools -- /srv/bin/my-server"),
    (["prompts", "server.py"], f"'server.py' reads as a server program, not a prompt name {_DEMO}: a server "
                               f"program goes last, after --, as in mcp-sync prompts -- server.py"),
    (["call", "python", "server.py"], f"'python' reads as a server program, not a tool name {_DEMO}: a server "
                                      f"program goes last, after --, as in mcp-sync call TOOL key=value -- python"),
    (["prompt", "./x.py", "a=1"], f"'./x.py' reads as a server program, not a prompt name {_DEMO}: a server "
                                  f"program goes last, after --, as in mcp-sync prompt PROMPT key=value -- ./x.py"),
    (["tools", "http://127.0.0.1:8000/mcp"], f"'http://127.0.0.1:8000/mcp' reads as a server URL, not a tool name "
                                             f"{_DEMO}: a server URL goes with --url, as in mcp-sync tools --url "
                                             f"http://127.0.0.1:8000/mcp"),
])
def test_a_server_program_taken_for_a_name_of_the_demo_server_is_told_where_it_goes(argv, said):
    # A usage error, before anything is started.
    code, out, err = run(*argv)
    assert (code, out) == (2, "")
    assert err == f"mcp-sync: error: {said}\n"


def test_a_program_name_is_a_name_when_a_server_is_given():
    # connect_fn stands for a server of its own here (as an integration's does).
    server = Server(name="mine")
    server.tool(name="run.sh", input_schema={"type": "object"})(lambda args, ctx: "ran")
    connect_fn = lambda target, **kw: mcp_sync.connect(server, **kw)  # noqa: E731
    assert run("call", "run.sh", connect_fn=connect_fn) == (0, "ran\n", "")


def test_a_name_that_is_no_program_gets_no_program_hint():
    code, _, err = run("tools", "nope")
    assert code == 1 and err == "mcp-sync: error: no tool named 'nope' (mcp-sync tools lists them)\n"


@pytest.mark.parametrize("argv, said", [
    (["call", "add", "2", "3"], "expected key=value or key:=json, got '2': each value goes with its parameter's "
                                "name, as in NAME=2 (mcp-sync tools add shows the names)"),
    (["prompt", "greet", "Ada"], "expected key=value or key:=json, got 'Ada': each value goes with its argument's "
                                 "name, as in NAME=Ada (mcp-sync prompts greet shows the names)"),
    (["call", "echo", "=hi"], "expected key=value or key:=json, got '=hi'"),
    (["call", "add", '{"a": 1}'], "expected key=value or key:=json, got '{\"a\": 1}': each value goes with its "
                                  "parameter's name, as in 'NAME:={\"a\": 1}' (mcp-sync tools add shows the names)"),
])
def test_a_value_without_its_name_is_told_to_take_one(argv, said):
    assert run(*argv) == (2, "", f"mcp-sync: error: {said}\n")


@pytest.mark.parametrize("uri, meant", [("readme", "demo://readme"), ("demo://readm", "demo://readme"),
                                        ("logo.png", "demo://logo.png")])
def test_a_resource_not_found_names_the_listed_uri_meant(uri, meant):
    # A URI without its scheme, or misspelt: the server says only that it has none.
    assert run("read", uri) == (1, "", f"mcp-sync: error: server error -32602 (resources/read): Resource not found: "
                                       f"{uri}; no resource {uri!r} in the list mcp-sync resources shows; did you "
                                       f"mean {meant!r}?\n")


@pytest.mark.parametrize("uri", ["demo://nope", "file:///etc/passwd"])
def test_a_resource_near_nothing_listed_keeps_the_servers_words(uri):
    assert run("read", uri) == (1, "", f"mcp-sync: error: server error -32602 (resources/read): Resource not found: "
                                       f"{uri}\n")


def test_any_refusal_of_a_uri_not_listed_names_the_listed_uri_that_ends_with_it():
    # As the reference `everything` server does: `read features.md` is no URL to it (-32603), and the
    # listed URI that ends with that name is what was meant, however far its path is from it.
    server = Server(name="docs")
    server.resource("demo://resource/static/document/features.md", "features")(lambda: "# Features")
    server.resource("demo://resource/static/document/startup.md", "startup")(lambda: "# Start-up")

    @server.resource_template("{anything}", "anything")
    def invalid(params: dict[str, str]) -> str:
        raise RpcError(-32603, "Invalid URL")

    connect_fn = lambda target, **kw: mcp_sync.connect(server, **kw)  # noqa: E731
    assert run("read", "features.md", connect_fn=connect_fn) == (
        1, "", "mcp-sync: error: server error -32603 (resources/read): Invalid URL; no resource 'features.md' in the "
               "list mcp-sync resources shows; did you mean "
               "'demo://resource/static/document/features.md'?\n")


def test_a_resource_not_found_on_a_server_that_lists_none_keeps_the_servers_words():
    server = Server(name="tools-only")
    server.tool(name="t", input_schema={"type": "object"})(lambda args, ctx: "ran")
    connect_fn = lambda target, **kw: mcp_sync.connect(server, **kw)  # noqa: E731
    code, out, err = run("read", "readme", connect_fn=connect_fn)
    assert (code, out) == (1, "") and err.startswith("mcp-sync: error: ") and "did you mean" not in err


@pytest.mark.parametrize("argv, said", [
    (["--json", "call"], "the following arguments are required: tool"),
    (["--json", "tolls"], "unknown command 'tolls'; did you mean 'tools'? (mcp-sync --help lists the commands)"),
    (["--json", "--timeout", "soon", "tools"], "argument --timeout: give a positive number of seconds, such as 30 or 0.5, "
                                                "not 'soon'"),
])
def test_with_json_a_usage_error_is_json_too(argv, said):
    # argparse's usage and error lines came out as text, though --json
    # promises one JSON object on stderr for every error.
    code, out, err = run(*argv)
    assert (code, out) == (2, "")
    assert json.loads(err) == {"error": said, "type": "UsageError", "status": 2}


def test_a_positional_that_may_be_left_out_is_not_called_required():
    # "the following arguments are required: tool, key=value" (key=value may be left out).
    code, out, err = run("call")
    assert code == 2 and err.splitlines()[-1] == "mcp-sync call: error: the following arguments are required: tool"


@pytest.mark.parametrize("answer, why", [
    ([], "mcp-sync answers forms only on a terminal (stdin is not one here)"),
    (["--answer", "none"], "--answer none answers none"),
])
def test_a_form_the_run_does_not_answer_says_how_to_answer_it(answer, why):
    # It said only "Missing required client capability: elicitation.form".
    code, out, err = run(*answer, "call", "book_table", "date=friday")
    assert (code, out) == (1, "")
    assert err == ("mcp-sync: error: server error -32021 (tools/call): Missing required client capability: "
                   f"elicitation.form; the server asks for a form, and {why}: --answer ask to be asked, or "
                   "--answer defaults to accept its defaults\n")


def test_a_prompt_message_that_embeds_a_resource_shows_its_text():
    # It printed "<resource content>", where `call` shows the resource's text.
    server = Server(name="docs")

    @server.prompt("review", "Review a file")
    def review(args):
        return [{"role": "user", "content": {"type": "resource", "resource": {
            "uri": "file:///notes.md", "mimeType": "text/markdown", "text": "# Notes"}}}, "Review it."]

    connect_fn = lambda target, **kw: mcp_sync.connect(server, **kw)  # noqa: E731
    assert run("prompt", "review", connect_fn=connect_fn) == (
        0, "user: <resource file:///notes.md>\n# Notes\nuser: Review it.\n", "")
