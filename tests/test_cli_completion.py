"""`mcp-sync completion bash|zsh|fish`: scripts made from the argument
parser, run for real in the shells (bash completions checked through
COMPREPLY, fish through `complete -C`, zsh parsed), and tool names
completed by asking the server the line names."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mcp_sync.cli import _build_parser
from mcp_sync.cli_completion import _option_kinds, _visible_commands, line_words as _line_words

BIN = Path(sys.executable).parent
SCRIPT = BIN / "mcp-sync"
DEMO_TOOLS = ["echo", "add", "countdown", "sleep", "weather", "bad_weather", "fail", "log", "crash", "book_table",
              "ask_twice", "login", "summarize", "show_roots", "defaults_form", "nag"]


def environment():
    env = {k: v for k, v in os.environ.items() if k not in ("MCP_SYNC_TOKEN", "FORCE_COLOR")}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"  # the scripts run `mcp-sync` by the typed name
    return env


def script(shell, tmp_path):
    proc = subprocess.run([str(SCRIPT), "completion", shell], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    path = tmp_path / f"completion.{shell}"
    path.write_text(proc.stdout)
    return path


def need(shell):
    if shutil.which(shell) is None:
        if os.environ.get("CI"):  # .ci/system installs it: missing there is a failure
            pytest.fail(f"{shell} is not installed; .ci/system installs it")
        pytest.skip(f"{shell} is not installed")


# Bash splits COMP_WORDS at COMP_WORDBREAKS (= and : among them): a URL comes as several words.
BREAKS = ":="


def bash_words(line):
    words = []
    for word in line.split(" "):
        piece = ""
        for c in word:
            if c in BREAKS:
                if piece:
                    words.append(piece)
                words.append(c)
                piece = ""
            else:
                piece += c
        words.append(piece)
    return [w for i, w in enumerate(words) if w or i == len(words) - 1]


def bash_complete(path, line, point=None):
    """COMPREPLY for `line` with the cursor at `point` (default: its end)."""
    point = len(line) if point is None else point
    words = bash_words(line[:point])
    after = bash_words(line[point:])[1:] if point < len(line) else []
    program = ('source "$1"; COMP_LINE=$2; COMP_POINT=$3; COMP_CWORD=$4; shift 4; COMP_WORDS=("$@"); '
               '_mcp_sync; printf "%s\\n" "${COMPREPLY[@]}"')
    proc = subprocess.run(["bash", "-c", program, "_", str(path), line, str(point), str(len(words) - 1),
                           *words, *after], capture_output=True, text=True, timeout=60, env=environment())
    assert proc.returncode == 0, proc.stderr
    return [line for line in proc.stdout.splitlines() if line]


@pytest.fixture(scope="module")
def bash_script(tmp_path_factory):
    need("bash")
    return script("bash", tmp_path_factory.mktemp("bash"))


def test_bash_completes_the_subcommands_options_and_choices(bash_script):
    assert bash_complete(bash_script, "mcp-sync ") == [
        "discover", "tools", "call", "resources", "read", "prompts", "prompt", "servers", "completion"]
    assert bash_complete(bash_script, "mcp-sync to") == ["tools"]
    assert bash_complete(bash_script, "mcp-sync --an") == ["--answer"]
    assert bash_complete(bash_script, "mcp-sync --answer ") == ["ask", "defaults", "none"]
    assert bash_complete(bash_script, "mcp-sync call --answer d") == ["defaults"]
    assert bash_complete(bash_script, "mcp-sync completion ") == ["bash", "zsh", "fish"]
    # --args belongs to call and prompt only.
    assert bash_complete(bash_script, "mcp-sync call --ar") == ["--args"]
    assert bash_complete(bash_script, "mcp-sync tools --ar") == []
    # A value is not completed as a subcommand, nor taken for one.
    assert bash_complete(bash_script, "mcp-sync --timeout ") == []
    assert bash_complete(bash_script, "mcp-sync --timeout 5 to") == ["tools"]


def test_bash_completes_files_where_an_option_takes_one(bash_script, tmp_path):
    (tmp_path / "servers.json").write_text("{}")
    (tmp_path / "notes.txt").write_text("")
    assert bash_complete(bash_script, f"mcp-sync --config {tmp_path}/ser") == [f"{tmp_path}/servers.json"]
    assert bash_complete(bash_script, f"mcp-sync call add --args @{tmp_path}/no") == [f"@{tmp_path}/notes.txt"]


def test_bash_completes_tool_names_from_the_server(bash_script):
    assert bash_complete(bash_script, "mcp-sync call ") == DEMO_TOOLS
    assert bash_complete(bash_script, "mcp-sync tools co") == ["countdown"]
    assert bash_complete(bash_script, "mcp-sync --json call b") == ["bad_weather", "book_table"]
    # Only the first argument is a tool name.
    assert bash_complete(bash_script, "mcp-sync call add ") == []


def test_bash_completes_prompt_names_from_the_server(bash_script):
    assert bash_complete(bash_script, "mcp-sync prompt ") == ["greet", "personal_greeting"]
    assert bash_complete(bash_script, "mcp-sync prompts g") == ["greet"]
    assert bash_complete(bash_script, "mcp-sync prompt greet ") == []


def test_bash_asks_the_server_given_after_the_cursor(bash_script, tmp_path):
    server = tmp_path / "server.py"
    server.write_text(
        "from mcp_sync.testing import Server\n"
        "from mcp_sync.testing.server import serve_stdio\n"
        "server = Server()\n"
        "for name in ('alpha', 'alps', 'beta'):\n"
        "    server.tool(name=name, description=name)(lambda args, ctx: 'ok')\n"
        "serve_stdio(server)\n")
    line = f"mcp-sync call al -- {sys.executable} {server}"
    assert bash_complete(bash_script, line, point=len("mcp-sync call al")) == ["alpha", "alps"]


def test_bash_completes_nothing_when_the_server_cannot_be_reached(bash_script):
    # A URL (split by COMP_WORDBREAKS) of a port nothing listens on; a
    # program that fails; OAuth, which would open a browser: nothing, quietly.
    assert bash_complete(bash_script, "mcp-sync --url http://127.0.0.1:9/mcp call ") == []
    assert bash_complete(bash_script, "mcp-sync call  -- false", point=len("mcp-sync call ")) == []
    assert bash_complete(bash_script, "mcp-sync --url http://127.0.0.1:9/mcp --oauth tools ") == []


def test_after_double_dash_the_words_are_the_programs(bash_script, tmp_path):
    # Left to bash's default (file) completion: the script offers nothing of its own.
    assert bash_complete(bash_script, "mcp-sync tools -- python --an") == []


def test_complete_tools_is_quiet_on_failure():
    proc = subprocess.run([str(SCRIPT), "__complete_tools", "mcp-sync call x -- /nonexistent/server", "14"],
                          capture_output=True, text=True, timeout=60, env=environment())
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    proc = subprocess.run([str(SCRIPT), "__complete_tools", "mcp-sync --timeout oops call ", "29"],
                          capture_output=True, text=True, timeout=60, env=environment())
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")


def test_completing_against_a_silent_server_spends_three_seconds_in_all():
    # The probe's own 10 s came first, then the 3 s timeout, then the
    # program's 2 s to exit: 13-15 s for a Tab.
    import io

    import mcp_sync
    from mcp_sync.cli import main

    seen = {}

    def connect_fn(target, **options):
        seen.update(options, shutdown=target.shutdown_timeout)
        raise mcp_sync.RequestTimeout("the server answered nothing")

    line = "mcp-sync call  -- python3 silent.py"
    assert main(["__complete_tools", line, "14"], stdout=io.StringIO(), connect_fn=connect_fn) == 0
    assert seen["probe_timeout"] + seen["timeout"] + seen["shutdown"] == pytest.approx(3.0)


def test_the_line_is_read_as_the_shell_would():
    assert _line_words("mcp-sync --header 'X-A: b c' call ad", 36) == (["--header", "X-A: b c", "call"], [])
    assert _line_words("mcp-sync call 'ad", 17) == (["call"], [])  # an open quote
    line = "mcp-sync tools e -- python 'my server.py'"
    assert _line_words(line, 16) == (["tools"], ["--", "python", "my server.py"])


def test_every_subcommand_and_option_of_the_parser_is_in_each_script(tmp_path):
    parser = _build_parser()
    commands = _visible_commands(parser)
    assert "__complete_tools" not in [name for name, _, _ in commands]  # hidden
    flags = set(_option_kinds(parser))
    for _, _, sub in commands:
        flags |= set(_option_kinds(sub))
    assert {"--config", "--answer", "--args", "--version", "-v"} <= flags
    for shell in ("bash", "zsh", "fish"):
        text = script(shell, tmp_path).read_text()
        for name, _, _ in commands:
            assert name in text, (shell, name)
        for flag in flags:
            spelled = f"-l {flag[2:]}" if shell == "fish" and flag.startswith("--") else \
                f"-s {flag[1:]}" if shell == "fish" else flag
            assert spelled in text, (shell, flag)


def test_the_zsh_script_parses(tmp_path):
    need("zsh")
    proc = subprocess.run(["zsh", "-n", str(script("zsh", tmp_path))], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_the_zsh_script_defines_and_registers_its_function(tmp_path):
    need("zsh")
    path = script("zsh", tmp_path)
    # Loaded after compinit, as `source <(mcp-sync completion zsh)` is used.
    program = f'autoload -Uz compinit && compinit -u -D && source {path} && print -r -- $_comps[mcp-sync]'
    proc = subprocess.run(["zsh", "-f", "-c", program], capture_output=True, text=True, timeout=60,
                          env={**environment(), "HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "_mcp_sync"


def fish_complete(path, line):
    proc = subprocess.run(["fish", "--no-config", "-c", f"source {path}; complete -C {quote_fish(line)}"],
                          capture_output=True, text=True, timeout=60, env=environment())
    assert proc.returncode == 0, proc.stderr
    return [entry.split("\t")[0] for entry in proc.stdout.splitlines()]


def quote_fish(text):
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def test_the_fish_script_parses_and_completes(tmp_path):
    need("fish")
    path = script("fish", tmp_path)
    proc = subprocess.run(["fish", "--no-config", "-n", str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert sorted(fish_complete(path, "mcp-sync ")) == sorted(
        ["discover", "tools", "call", "resources", "read", "prompts", "prompt", "servers", "completion"])
    assert fish_complete(path, "mcp-sync --answer ") == ["ask", "defaults", "none"]
    assert fish_complete(path, "mcp-sync call --ar") == ["--args"]
    assert fish_complete(path, "mcp-sync tools --ar") == []
    assert fish_complete(path, "mcp-sync call co") == ["countdown"]
    assert fish_complete(path, "mcp-sync --timeout 5 tools b") == ["bad_weather", "book_table"]
    assert fish_complete(path, "mcp-sync prompt p") == ["personal_greeting"]
    (tmp_path / "servers.json").write_text("{}")
    assert fish_complete(path, f"mcp-sync --config {tmp_path}/ser") == [f"{tmp_path}/servers.json"]
