"""mcp-sync with odd input from either side: a server's text that is valid
JSON but not printable as it is, `--json` errors that stay JSON, timeouts
said in the command's own words and bounded by `--timeout`, numbers as
people write them and values JSON cannot send, URLs spelt unusually,
closed standard streams, and forms the command cannot answer."""

import io
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

import mcp_sync
from mcp_sync.cli import main
from mcp_sync.testing import Server
from tests.helpers import Injected


@pytest.fixture(autouse=True)
def no_colour_forced(monkeypatch):
    monkeypatch.delenv("FORCE_COLOR", raising=False)


class Utf8Stream(io.TextIOWrapper):
    """A stream as a process's stdout is: text encoded to UTF-8 bytes,
    strictly (a lone surrogate cannot be written)."""

    def __init__(self) -> None:
        super().__init__(io.BytesIO(), encoding="utf-8", errors="strict", write_through=True)

    def text(self) -> str:
        self.flush()
        return self.buffer.getvalue().decode("utf-8")


def surrogate_server():
    # A JavaScript server that cuts a string inside an emoji's surrogate
    # pair sends "\ud83d" (JSON.stringify escapes it): valid JSON, a str
    # Python cannot encode to UTF-8.
    server = Server(name="cut")

    @server.tool(description="a cut emoji")
    def cut(args, ctx):
        return "smile \ud83d"

    @server.tool(description="structured", output_schema={"type": "object"})
    def data(args, ctx):
        return {"text": "smile \ud83d"}

    return server


def run_on(server, *argv):
    out, err = Utf8Stream(), Utf8Stream()
    code = main(list(argv), stdout=out, stderr=err,
                connect_fn=lambda target, **options: mcp_sync.connect(server, **options))
    return code, out.text(), err.text()


def test_a_lone_surrogate_from_the_server_is_shown_not_a_usage_error():
    # Before: the UnicodeEncodeError of the write was taken for a usage
    # error (status 2, "'utf-8' codec can't encode character") and the
    # result was lost.
    code, out, err = run_on(surrogate_server(), "call", "cut")
    assert (code, out, err) == (0, "smile \\ud83d\n", "")


def test_a_lone_surrogate_in_json_output_stays_the_same_value():
    code, out, err = run_on(surrogate_server(), "--json", "call", "data")
    assert code == 0, err
    assert json.loads(out)["structuredContent"] == {"text": "smile \ud83d"}


@pytest.mark.parametrize("name", ["nope\x7f", "nope\x9b31m", "nope\x85"])
def test_a_json_error_with_del_or_c1_controls_is_still_json(name):
    # Before: the error's DEL and C1 controls were neutralised to \x7f,
    # an escape JSON does not have: the line did not parse.
    out, err = io.StringIO(), io.StringIO()
    code = main(["--json", "read", f"demo://{name}"], stdout=out, stderr=err)
    said = json.loads(err.getvalue())
    assert code == 1 and said["status"] == 1
    assert f"demo://{name}" in said["error"]
    assert not any(0x7F <= ord(c) < 0xA0 for c in err.getvalue())


def test_a_timed_out_request_names_the_timeout_option():
    # Before: "pass a larger timeout= to the call, or connect(timeout=...)",
    # advice for Python a shell user cannot follow.
    out, err = io.StringIO(), io.StringIO()
    code = main(["--timeout", "0.5", "call", "sleep", "seconds=5"], stdout=out, stderr=err)
    assert code == 1
    assert err.getvalue() == ("mcp-sync: error: tools/call 'sleep' timed out after 0.5 s: "
                              "give a larger --timeout SECONDS (seconds per request)\n")


#: A stdio server that reads every line and answers none.
SILENT = [sys.executable, "-c", "import sys\nfor line in sys.stdin: pass"]


def test_a_short_timeout_bounds_the_start_of_a_silent_server():
    # Before: the server/discover probe waited its own 10 s first, so
    # --timeout 1 failed after 11 s, naming probe_timeout, an option of
    # connect() the command does not have.
    out, err = io.StringIO(), io.StringIO()
    started = time.monotonic()
    code = main(["--timeout", "1", "tools", "--", *SILENT], stdout=out, stderr=err)
    took = time.monotonic() - started
    assert code == 1
    said = err.getvalue()
    assert "probe_timeout" not in said and "give a larger --timeout SECONDS" in said, said
    # The probe's 1 s, initialize's 1 s after it, and the program's exit:
    # well under the 11 s the probe's default made it.
    assert took < 8, took


def test_the_probe_keeps_its_default_under_a_longer_timeout():
    seen = {}

    def recording(target, **options):
        seen.update(options)
        return mcp_sync.connect(target, **options)

    assert main(["--timeout", "20", "tools"], stdout=io.StringIO(), connect_fn=recording) == 0
    assert "probe_timeout" not in seen  # the library's 10 s
    assert main(["--timeout", "3", "tools"], stdout=io.StringIO(), connect_fn=recording) == 0
    assert seen["probe_timeout"] == 3


@pytest.mark.parametrize("pair", ["a=NaN", "a=Infinity", "a=-Infinity", "a=1e400", "a:=NaN"])
def test_a_number_json_cannot_send_is_a_usage_error_naming_it(pair):
    # Before: "Out of range float values are not JSON compliant", naming
    # neither the argument nor the value.
    out, err = io.StringIO(), io.StringIO()
    code = main(["call", "add", pair, "b=1"], stdout=out, stderr=err)
    value = pair.partition("=")[2]
    assert code == 2
    assert err.getvalue().startswith(f"mcp-sync: error: a: {value!r} is not a number JSON can send"), err.getvalue()


def test_a_non_finite_word_stays_text_where_the_schema_types_nothing():
    # Not JSON: text, as docs/cli.md says of any parameter without a type
    # (a prompt's arguments are strings).
    out, err = io.StringIO(), io.StringIO()
    assert main(["prompt", "greet", "name=NaN"], stdout=out, stderr=err) == 0, err.getvalue()
    assert "NaN" in out.getvalue()


def test_a_non_finite_number_in_args_is_a_usage_error_naming_it():
    out, err = io.StringIO(), io.StringIO()
    code = main(["call", "add", "--args", '{"a": NaN, "b": 1}'], stdout=out, stderr=err)
    assert code == 2
    assert err.getvalue().startswith("mcp-sync: error: --args is not valid JSON: NaN is not a number JSON can send")


def test_a_url_elicitation_is_not_told_to_use_answer():
    # Before: "the server asks for a form ... --answer ask to be asked, or
    # --answer defaults": both gave the same error again, as the command
    # opens no URL-mode elicitation whatever --answer says.
    for answer in ("none", "defaults"):
        out, err = io.StringIO(), io.StringIO()
        code = main(["call", "login", "--answer", answer], stdout=out, stderr=err)
        said = err.getvalue()
        assert code == 1
        assert "--answer ask to be asked" not in said and "elicitation.url" in said, said
        assert "mcp-sync does not open URL-mode elicitations" in said, said
    # A form still gets the advice that helps.
    err = io.StringIO()
    assert main(["call", "book_table", "date=fri", "--answer", "none"], stdout=io.StringIO(), stderr=err) == 1
    assert "--answer ask to be asked" in err.getvalue()


@pytest.mark.parametrize("url, said", [
    ("//127.0.0.1:8000/mcp", "--url http://127.0.0.1:8000/mcp (or https://)"),
    (":8000/mcp", "--url http://localhost:8000/mcp (or https://)"),
])
def test_a_url_without_a_scheme_is_told_a_url_that_works(url, said):
    # Before: "--url http:////127.0.0.1:8000/mcp" and "--url http://:8000/mcp",
    # each refused as "not an http(s) URL" when typed.
    out, err = io.StringIO(), io.StringIO()
    assert main(["tools", "--url", url], stdout=out, stderr=err) == 2
    assert err.getvalue() == f"mcp-sync: error: --url needs its scheme: {said}\n"


def test_a_url_scheme_in_capitals_is_the_same_scheme(monkeypatch):
    # Before: "unsupported URL scheme in 'HTTP://...': use http://", also
    # for the line the usage error of `mcp-sync HTTP://... tools` gave.
    seen = []

    def recording(target, **options):
        seen.append(target)
        return mcp_sync.connect([sys.executable, "-m", "mcp_sync.testing.server"], **options)

    assert main(["tools", "--url", "HTTP://127.0.0.1:9/mcp"], stdout=io.StringIO(), connect_fn=recording) == 0
    assert seen == ["http://127.0.0.1:9/mcp"]


SCRIPT = Path(sys.executable).parent / "mcp-sync"


def with_closed(fd, *argv):
    """The installed command with its stdout (`fd` 1) or stderr (2) closed
    before it starts (`>&-`), as a daemon or a careless wrapper starts it."""
    proc = subprocess.run(["sh", "-c", f'exec "$0" "$@" {fd}>&-', str(SCRIPT), *argv],
                          capture_output=True, text=True, timeout=60)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize("argv", [["call", "add", "a=2", "b=3"], ["tools"], ["completion", "bash"],
                                  ["__complete_tools", "mcp-sync call ", "14"]])
def test_a_closed_stdout_is_a_closed_pipe_not_a_traceback(argv):
    # Before: AttributeError: 'NoneType' object has no attribute 'write',
    # a traceback and status 1.
    assert with_closed(1, *argv) == (141, "", "")


@pytest.mark.parametrize("argv, status", [(["tolls"], 2), (["call", "add", "a=x", "b=1"], 2),
                                          (["call", "fail", "message=boom"], 1)])
def test_a_closed_stderr_keeps_the_status_of_the_error(argv, status):
    # Before: the write of the error raised AttributeError, so every
    # error ended with status 1 (a usage error too, documented as 2).
    assert with_closed(2, *argv)[:2] == (status, "")


def test_a_closed_stderr_still_prints_the_result():
    assert with_closed(2, "call", "countdown", "steps=2", "delay=0")[:2] == (0, "liftoff\n")


def test_a_protocol_pin_the_server_refuses_names_the_option():
    # Before: "allow it with protocol='2025-11-25', or protocol=None to
    # negotiate any": connect()'s arguments, which a shell user has not.
    out, err = io.StringIO(), io.StringIO()
    assert main(["--protocol", "2024-11-05", "tools"], stdout=out, stderr=err) == 1
    said = err.getvalue()
    assert "protocol=" not in said, said
    assert said.endswith("allow it with --protocol 2025-11-25, or leave out --protocol to negotiate any\n"), said


def test_a_2026_pin_on_an_older_server_names_the_option():
    older = [sys.executable, "-m", "mcp_sync.testing.server", "--versions", "2025-06-18"]
    out, err = io.StringIO(), io.StringIO()
    assert main(["--protocol", "2026-07-28", "tools", "--", *older], stdout=out, stderr=err) == 1
    said = err.getvalue()
    assert "protocol=" not in said and "pin '" not in said, said
    assert said.endswith("(without --protocol it negotiates, or --protocol 2025-11-25 or older)\n"), said


#: A stdio server whose tool writes three stderr lines and exits under the call.
DIES_SAYING_THREE_LINES = """
import os, sys
from mcp_sync.testing import Server
from mcp_sync.testing.server import serve_stdio
server = Server(name="dies")

@server.tool(description="dies")
def die(args, ctx):
    for line in ("npm error 404 Not Found", "npm error 404", "npm error A complete log is in /tmp/x.log"):
        print(line, file=sys.stderr, flush=True)
    os._exit(3)

serve_stdio(server)
"""


@pytest.mark.parametrize("verbose", [False, True])
def test_a_server_dying_with_several_stderr_lines(verbose):
    # Before: only the last stderr line, no word of -v, and the note that
    # the request had been sent was lost with the other lines (it is
    # printed when the server writes one line).
    out, err = io.StringIO(), io.StringIO()
    argv = ["call", "die", *(["-v"] if verbose else []), "--", sys.executable, "-c", DIES_SAYING_THREE_LINES]
    assert main(argv, stdout=out, stderr=err) == 1
    last = err.getvalue().splitlines()[-1]
    assert last.startswith("mcp-sync: error: the server closed its stdout: the server process exited with code 3 "
                           "(stderr: npm error A complete log is in /tmp/x.log)"), last
    assert last.endswith("(the request had been sent: it may have run on the server; it is not sent again)"), last
    assert ("mcp-sync -v shows the server's stderr" in last) is not verbose, last
    if verbose:
        assert "npm error 404 Not Found" in err.getvalue()


@pytest.mark.parametrize("value, total", [(".5", "1.5"), ("+1", "2"), ("01", "2"), ("5.", "6.0")])
def test_a_number_as_a_person_spells_it_is_a_number(value, total):
    # Before: "a takes number (the tool's inputSchema says), and '.5' is
    # not one": it is one, though not spelt as JSON spells it.
    out, err = io.StringIO(), io.StringIO()
    assert main(["call", "add", f"a={value}", "b=1"], stdout=out, stderr=err) == 0, err.getvalue()
    assert out.getvalue() == f"{total}\n"


# -- --timeout, $MCP_SYNC_TOKEN, Ctrl-C at start-up -------------------------------------------


@pytest.mark.parametrize("value", ["0", "-1", "nan", "-inf", "abc", ""])
def test_a_timeout_that_is_no_positive_number_is_a_usage_error_naming_the_option(tmp_path, value):
    # Before: "timeout must be a positive number of seconds, not 0.0", the
    # library's name for it and a number not as typed; "abc": argparse's
    # "invalid float value".
    started = tmp_path / "started"
    out, err = io.StringIO(), io.StringIO()
    code = main(["call", "echo", "text=hi", f"--timeout={value}", "--",
                 sys.executable, "-c", f"open({str(started)!r}, 'w')"], stdout=out, stderr=err)
    assert code == 2 and out.getvalue() == ""
    assert err.getvalue().splitlines()[-1] == (f"mcp-sync call: error: argument --timeout: give a positive number "
                                               f"of seconds, such as 30 or 0.5, not {value!r}")
    assert not started.exists()  # refused before the server was started


def test_a_timeout_usage_error_is_json_with_json():
    out, err = io.StringIO(), io.StringIO()
    assert main(["--json", "--timeout", "0", "tools"], stdout=out, stderr=err) == 2
    assert json.loads(err.getvalue()) == {
        "error": "argument --timeout: give a positive number of seconds, such as 30 or 0.5, not '0'",
        "type": "UsageError", "status": 2}


@pytest.mark.parametrize("value", ["inf", "1e10"])
def test_a_timeout_longer_than_a_thread_can_wait_is_no_limit(value):
    # The library refuses these numbers (it has None for "no limit"); the
    # command, which has no None, takes them for what they ask.
    seen = []

    def connecting(target, **options):
        seen.append(options["timeout"])
        return mcp_sync.connect(mcp_sync.testing.demo_server(), **options)

    out = io.StringIO()
    assert main(["call", "echo", "text=hi", "--timeout", value], stdout=out, connect_fn=connecting) == 0
    assert (seen, out.getvalue()) == ([None], "hi\n")


def gated_server(seen=None):
    """A demo server over HTTP that takes the one bearer token; `seen`
    gets each request's Authorization header."""
    from mcp_sync.testing import GateAnswer, HTTPServer, demo_server

    def gate(request):
        if seen is not None:
            seen.append(request.headers.get("Authorization"))
        if request.headers.get("Authorization") == "Bearer tok-1.2_3~4+5/6=":
            return None
        return GateAnswer(401, {"WWW-Authenticate": "Bearer"})

    return HTTPServer(demo_server(), gate=gate)


@pytest.mark.parametrize("value", ["tok-1.2_3~4+5/6=\n", "tok-1.2_3~4+5/6=\r\n", "\ttok-1.2_3~4+5/6= "])
def test_whitespace_around_the_environment_token_is_not_part_of_it(monkeypatch, value):
    # A secret made from a file keeps the file's last newline (`$(cat FILE)`
    # keeps a Windows file's CR). Before: "a bearer token must be a
    # non-empty string without CR, LF or NUL", naming no variable.
    monkeypatch.setenv("MCP_SYNC_TOKEN", value)
    with gated_server() as httpd:
        out, err = io.StringIO(), io.StringIO()
        assert main(["--url", httpd.url, "tools"], stdout=out, stderr=err) == 0, err.getvalue()
        assert "echo" in out.getvalue()


@pytest.mark.parametrize("value, what", [
    ("tok\nen", "a line break in the token"), ("tok\ren", "a line break in the token"),
    ("tok en", "a space in the token"), ("tok\x1ben", "a control character in the token"),
    ("tok\x7f", "a control character in the token"), ("tök", "a non-ASCII character in the token"),
])
def test_a_character_no_bearer_token_has_is_a_usage_error_naming_the_variable(monkeypatch, value, what):
    # Before: a line break gave the transport's "a bearer token must be a
    # non-empty string without CR, LF or NUL"; a space, an escape or a
    # non-ASCII letter was sent to the server, which answered 401.
    monkeypatch.setenv("MCP_SYNC_TOKEN", value)
    seen = []
    with gated_server(seen) as httpd:
        out, err = io.StringIO(), io.StringIO()
        assert main(["--url", httpd.url, "tools"], stdout=out, stderr=err) == 2
    assert seen == []  # refused before anything was sent
    said = err.getvalue()
    assert said == (f"mcp-sync: error: $MCP_SYNC_TOKEN has {what} (a bearer token is one word of printable "
                    f"ASCII): set it to the token alone\n")
    assert "tok" not in said.replace("token", "")  # the value is a secret: never printed


@pytest.mark.parametrize("value, said", [
    ("\n", "$MCP_SYNC_TOKEN holds only whitespace: set it to the token, or unset it"),
    ("Bearer tok", "$MCP_SYNC_TOKEN starts with 'Bearer ': set it to the token alone, without the scheme"),
])
def test_an_environment_token_that_is_no_token_says_what_to_set(monkeypatch, value, said):
    monkeypatch.setenv("MCP_SYNC_TOKEN", value)
    err = io.StringIO()
    assert main(["--url", "http://127.0.0.1:9/mcp", "tools"], stdout=io.StringIO(), stderr=err) == 2
    assert err.getvalue() == f"mcp-sync: error: {said}\n"


#: The console script (`mcp-sync = mcp_sync.cli:main`) as pip writes it,
#: and a word to the test (on READY_FD) once the command's own code runs:
#: at the call of `_main`, inside `main()`'s handlers. What comes before,
#: the interpreter's start-up, `import mcp_sync` and `main()`'s first
#: instruction, is not the command's to handle.
CONSOLE_SCRIPT = """\
import os, re, sys
from mcp_sync import cli
from mcp_sync.cli import main

def ready(frame, event, arg):
    if event == "call" and frame.f_code is cli._main.__code__:
        sys.setprofile(None)
        os.write(int(os.environ["READY_FD"]), b"r")

sys.setprofile(ready)
if __name__ == "__main__":
    sys.argv[0] = re.sub(r"(-script\\.pyw|\\.exe)?$", "", sys.argv[0])
    sys.argv[0] = os.path.join(os.path.dirname(sys.executable), "mcp-sync")  # (-c here; the script's path there)
    sys.exit(main())
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("argv", [["--help"], ["tools"], ["tolls"]])
def test_a_ctrl_c_early_in_the_command_exits_quietly(argv):
    # Before: a Ctrl-C while the command line was parsed, or the help or a
    # usage error printed, ended in a KeyboardInterrupt traceback (only
    # the connection and the requests were under the command's handler).
    # The interrupt lands at 30 points from the start of `main()`, from the
    # whole terminal's group (the demo server of `tools` included).
    import os
    import select
    import signal

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(mcp_sync.__file__).parent.parent),
                                                                     os.environ.get("PYTHONPATH")]))}
    env.pop("FORCE_COLOR", None)
    normal = subprocess.run([sys.executable, "-c", CONSOLE_SCRIPT, *argv], capture_output=True, text=True,
                            env={**env, "READY_FD": "2"}, timeout=60)
    normal_err = normal.stderr.removeprefix("r")
    assert "Traceback" not in normal_err
    outcomes = set()
    for step in range(30):
        ready, write_end = os.pipe()
        try:
            proc = subprocess.Popen([sys.executable, "-c", CONSOLE_SCRIPT, *argv], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, env={**env, "READY_FD": str(write_end)},
                                    pass_fds=[write_end], start_new_session=True)
            os.close(write_end)
            assert select.select([ready], [], [], 60)[0] and os.read(ready, 1) == b"r"
        finally:
            os.close(ready)
        time.sleep(step * 0.002)  # 0 to 58 ms into the command: parsing, printing, connecting
        try:
            os.killpg(proc.pid, signal.SIGINT)
        except ProcessLookupError:  # already done
            pass
        out, err = proc.communicate(timeout=60)
        assert "Traceback" not in err and "KeyboardInterrupt" not in err, (step, err)
        if proc.returncode == 130:
            assert err.splitlines()[-1:] == ["mcp-sync: interrupted"], (step, out, err)
        elif proc.returncode == -signal.SIGINT:
            # After `main()` returned: the interpreter, finalizing, has given
            # SIGINT back to the system's default, which ends the process
            # quietly (a shell says 130), its output all written.
            assert (out, err) == (normal.stdout, normal_err), step
        else:
            assert (proc.returncode, out, err) == (normal.returncode, normal.stdout, normal_err), step
        outcomes.add(proc.returncode)
    assert 130 in outcomes  # some interrupts landed while the command ran


@pytest.mark.parametrize("argv, status", [(["--help"], 0), (["completion", "bash"], 0), (["tolls"], 2),
                                          (["--timeout", "0", "tools"], 2)])
def test_a_ctrl_c_at_any_call_of_the_command_line_s_handling_is_status_130(argv, status):
    # The same, at chosen points rather than by the clock: a Ctrl-C at the
    # k-th Python function call of the command (CPython delivers one on
    # entering a function), for k spread over the whole run.
    import gc

    def run(k):
        calls, where = [0], []
        # Not in a garbage collector's callback (hypothesis, in this process,
        # has one): it runs wherever a collection falls, and the interpreter
        # ignores what it raises; a real Ctrl-C is delivered to the command.
        collector = {getattr(callback, "__code__", None) for callback in gc.callbacks}

        def profile(frame, event, arg):
            # (Not at `main()`'s own call: before its first instruction, the
            # caller's to handle.)
            if event == "call" and frame.f_code is not main.__code__ and frame.f_code not in collector:
                if calls[0] == k:
                    sys.setprofile(None)
                    where.append(f"{frame.f_code.co_name} ({frame.f_code.co_filename}:{frame.f_lineno})")
                    raise Injected()
                calls[0] += 1

        out, err = io.StringIO(), io.StringIO()
        sys.setprofile(profile)
        try:
            code = main(list(argv), stdout=out, stderr=err)
        except Injected as exc:
            code = exc  # escaped: the traceback of before
        finally:
            sys.setprofile(None)
        return code, err.getvalue(), calls[0], where

    run(-1)  # (the first run fills caches: the later ones make fewer calls)
    code, _, total, _ = run(-1)  # no interrupt: the normal result, and how many calls it makes
    assert code == status and total > 100
    for k in range(0, total, max(1, total // 60)):
        code, err, _, where = run(k)
        assert where, k  # it landed
        assert code == 130 and err.endswith("mcp-sync: interrupted\n"), (k, where, code, err)


def test_a_program_calling_main_keeps_its_own_ctrl_c(monkeypatch, capsys):
    # Only the `mcp-sync` command gives SIGINT back to the system once it
    # is done; a program (a wrapper, a notebook) that calls `main()` keeps
    # Python's handler, so its own `except KeyboardInterrupt` still runs.
    import signal

    monkeypatch.setattr(sys, "argv", ["mytool", "--help"])
    try:
        assert main() == 0
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    assert "usage" in capsys.readouterr().out
