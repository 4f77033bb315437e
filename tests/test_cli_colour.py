"""Colour only on a terminal: the real command in a pseudo-terminal, in a
pipe, and with NO_COLOR / FORCE_COLOR."""

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

SCRIPT = Path(sys.executable).parent / "mcp-sync"
ESC = "\x1b["


def environment(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "MCP_SYNC_TOKEN")}
    env["TERM"] = "xterm"
    env.update(extra)
    return env


def in_terminal(*argv, env):
    """The command with stdout and stderr on a pseudo-terminal: (status, all it printed)."""
    controller, terminal = pty.openpty()
    proc = subprocess.Popen([str(SCRIPT), *argv], stdin=subprocess.DEVNULL, stdout=terminal, stderr=terminal, env=env)
    os.close(terminal)
    chunks = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([controller], [], [], deadline - time.monotonic())
            if not ready:
                break
            try:
                chunk = os.read(controller, 4096)
            except OSError:  # EIO: the command closed its end
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(controller)
    status = proc.wait(timeout=60)
    return status, b"".join(chunks).decode().replace("\r\n", "\n")


def piped(*argv, env):
    proc = subprocess.run([str(SCRIPT), *argv], capture_output=True, text=True, timeout=60, env=env)
    return proc.returncode, proc.stdout, proc.stderr


def test_a_terminal_gets_colour_where_it_helps():
    status, printed = in_terminal("tools", env=environment())
    assert status == 0
    assert f"{ESC}36madd{ESC}0m(a, b)" in printed  # tool names
    status, printed = in_terminal("tools", "add", env=environment())
    assert f"  a  number  {ESC}33mrequired{ESC}0m" in printed
    status, printed = in_terminal("read", "demo://missing", env=environment())
    assert status == 1 and printed.startswith(f"{ESC}1;31mmcp-sync: error:{ESC}0m server error")
    status, printed = in_terminal("call", "fail", "message=kaputt", env=environment())
    assert status == 1 and printed == f"{ESC}31mkaputt{ESC}0m\n"  # an isError result


def test_a_servers_escapes_stay_neutralised_inside_the_colour(tmp_path):
    server = tmp_path / "server.py"
    server.write_text(
        "from mcp_sync.testing import Server\n"
        "from mcp_sync.testing.server import serve_stdio\n"
        "server = Server()\n"
        "@server.tool(description='x')\n"
        "def bad(args, ctx):\n"
        "    raise ValueError('no\\x1b]0;pwned\\x07')\n"
        "serve_stdio(server)\n")
    status, printed = in_terminal("call", "bad", "--", sys.executable, str(server), env=environment())
    assert status == 1 and "pwned" in printed
    assert "\x07" not in printed and "\x1b]" not in printed and "\\x1b]0;pwned\\x07" in printed


@pytest.mark.parametrize("value", ["1", "true", "0"])
def test_no_color_with_any_value_turns_it_off(value):
    status, printed = in_terminal("tools", env=environment(NO_COLOR=value, FORCE_COLOR="1"))
    assert status == 0 and "add(a, b)" in printed and ESC not in printed


def test_an_empty_no_color_is_not_set():
    status, printed = in_terminal("tools", env=environment(NO_COLOR=""))
    assert status == 0 and f"{ESC}36madd" in printed


def test_a_dumb_terminal_gets_none():
    status, printed = in_terminal("tools", env=environment(TERM="dumb"))
    assert status == 0 and ESC not in printed


def test_a_pipe_gets_none_unless_forced():
    status, out, err = piped("call", "nope", env=environment())
    assert status == 1 and err.startswith("mcp-sync: error: ") and ESC not in err
    status, out, _ = piped("tools", env=environment())
    assert status == 0 and "add(a, b)" in out and ESC not in out
    status, out, err = piped("call", "nope", env=environment(FORCE_COLOR="1"))
    assert err.startswith(f"{ESC}1;31mmcp-sync: error:{ESC}0m")
    status, out, _ = piped("tools", env=environment(FORCE_COLOR="0"))
    assert ESC not in out


def test_json_output_is_never_coloured():
    status, printed = in_terminal("--json", "call", "nope", env=environment())
    assert status == 1 and ESC not in printed and printed.startswith("{")


def test_the_progress_bar_redraws_in_place_on_a_terminal_without_colour():
    status, printed = in_terminal("call", "countdown", "steps=3", "delay=0", env=environment())
    assert status == 0 and printed.endswith("liftoff\n")
    assert printed.startswith("\r[########................] 1/3  33% step 1/3")
    assert "\r[########################] 3/3 100% step 3/3" in printed and ESC not in printed
