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
