"""Reading the code blocks of a Markdown page and checking the output they show.

Used by tests/test_docs.py (which runs the ```python blocks) and by
tests/test_doc_outputs.py (which runs the ```console blocks); the conventions
for doc writers are in the docstring of tests/test_doc_outputs.py.
"""

from __future__ import annotations

import difflib
import io
import os
import re
import shlex
import subprocess
import sys
import threading
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<ticks>`{3,})(?P<info>[^`\n]*)$")

ELLIPSIS = "..."
# The marker that makes a trailing comment on a line of Python the output of
# that line: print(result.text)  # -> liftoff
OUTPUT_COMMENT = "# ->"
# The marker that keeps a console command from being run: a command that
# cannot run in a test says so, and why, where a reader sees it.
NOT_CHECKED = re.compile(r"#\s*not checked:\s*(?P<reason>\S.*)$")


@dataclass
class Block:
    """One fenced code block: its language, its lines, and where it is."""

    language: str
    fence_line: int  # 1-based line of the opening fence
    lines: list[str]  # the lines between the fences, without the fence's indentation
    blank_before: bool = False  # only blank lines separate it from the block before
    output: Block | None = None  # for a python block: the text block that shows its output

    @property
    def first_line(self) -> int:
        return self.fence_line + 1

    @property
    def code(self) -> str:
        return "\n".join(self.lines) + "\n"


def blocks(text: str) -> list[Block]:
    """The fenced code blocks of a Markdown text, in order.

    A ```text block that follows a ```python block with nothing but blank
    lines between them is that block's output (Block.output).
    """
    found: list[Block] = []
    lines = text.splitlines()
    index = 0
    last_end = -1  # index of the closing fence of the block before
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        indent, ticks = opening["indent"], opening["ticks"]
        info = opening["info"].strip()
        language = info.split(" ")[0] if info else ""
        fence_line = index + 1
        body: list[str] = []
        index += 1
        while index < len(lines):
            closing = _FENCE.match(lines[index])
            if closing is not None and closing["ticks"] == ticks and not closing["info"].strip():
                break
            line = lines[index]
            body.append(line[len(indent):] if line.startswith(indent) else line.lstrip())
            index += 1
        else:
            raise ValueError(f"unclosed code fence opened at line {fence_line}")
        adjacent = bool(found) and all(not line.strip() for line in lines[last_end + 1 : fence_line - 1])
        block = Block(language, fence_line, body, blank_before=adjacent)
        if found and adjacent and language == "text" and found[-1].language == "python":
            found[-1].output = block
        found.append(block)
        last_end = index
        index += 1
    return found


# --- matching ---------------------------------------------------------------


def _line_matches(shown: str, printed: str) -> bool:
    if ELLIPSIS not in shown:
        return shown == printed
    pattern = ".*".join(re.escape(part) for part in shown.split(ELLIPSIS))
    return re.fullmatch(pattern, printed, re.DOTALL) is not None


def _normalized(text: str) -> list[str]:
    # Trailing spaces and trailing blank lines are invisible on a page (and
    # editors strip them), so they never decide a match.
    lines = [line.rstrip() for line in text.split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def output_matches(shown: str, printed: str) -> bool:
    """Whether printed output is what a page shows.

    As doctest's ELLIPSIS: a line that is only `...` stands for any run of
    lines (none too), and `...` within a line for any run of characters.
    """
    want, got = _normalized(shown), _normalized(printed)
    # memo[i][j]: want[i:] matches got[j:]
    memo: dict[tuple[int, int], bool] = {}

    def match(i: int, j: int) -> bool:
        key = (i, j)
        if key not in memo:
            if i == len(want):
                memo[key] = j == len(got)
            elif want[i].strip() == ELLIPSIS:
                memo[key] = any(match(i + 1, k) for k in range(j, len(got) + 1))
            else:
                memo[key] = j < len(got) and _line_matches(want[i], got[j]) and match(i + 1, j + 1)
        return memo[key]

    return match(0, 0)


def mismatch(where: str, shown: str, printed: str) -> str | None:
    """None when printed output matches what is shown, else a message with a diff."""
    if output_matches(shown, printed):
        return None
    diff = "\n".join(
        difflib.unified_diff(
            _normalized(shown), _normalized(printed), "shown on the page", "printed today", lineterm="", n=2
        )
    )
    return f"{where}: the output shown is not what it prints today\n{diff}\nprinted today:\n{printed.rstrip()}"


# --- python blocks ------------------------------------------------------------


def comments(code: str, first_line: int) -> dict[int, str]:
    """The trailing comments of a python block, by line number on the page."""
    found = {}
    readline = io.StringIO(code).readline
    for token in tokenize.generate_tokens(readline):
        if token.type == tokenize.COMMENT:
            found[first_line + token.start[0] - 1] = token.string
    return found


class Capture(io.TextIOBase):
    """A stand-in for sys.stdout that keeps what is written and, for each
    write, the line of the page that wrote it.

    The line is the innermost frame of the page's code on the writing
    thread's stack, so a print() in a function or lambda the page defines is
    the line of that print(); writes from no line of the page go to line 0.
    """

    def __init__(self, filename: str) -> None:
        self.filename = filename
        self.parts: list[tuple[int, str]] = []
        self._lock = threading.Lock()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        line = 0
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_filename == self.filename:
                line = frame.f_lineno
                break
            frame = frame.f_back
        with self._lock:
            self.parts.append((line, text))
        return len(text)

    def text(self) -> str:
        with self._lock:
            return "".join(text for _, text in self.parts)

    def text_of_line(self, line: int) -> str:
        with self._lock:
            return "".join(text for at, text in self.parts if at == line)


def check_python_block(block: Block, capture: Capture, where: str) -> list[str]:
    """Mismatches between what a python block printed and what the page shows."""
    problems = []
    for line, comment in comments(block.code, block.first_line).items():
        printed = capture.text_of_line(line)
        if comment.startswith(OUTPUT_COMMENT):
            shown = comment[len(OUTPUT_COMMENT) :].strip()
            problem = mismatch(f"{where}:{line} (the '{OUTPUT_COMMENT}' comment)", shown, printed)
            if problem:
                problems.append(problem)
        elif printed.strip() and output_matches(comment[1:].strip(), printed):
            # An explanation is never checked, so output written as one would
            # go stale unseen: it must carry the marker.
            problems.append(
                f"{where}:{line}: the comment {comment!r} is what the line prints: "
                f"write it as '{OUTPUT_COMMENT} {comment[1:].strip()}' so that it is checked"
            )
    if block.output is not None:
        problem = mismatch(
            f"{where}:{block.output.first_line} (the output of the python block at line {block.first_line})",
            "\n".join(block.output.lines),
            capture.text(),
        )
        if problem:
            problems.append(problem)
    return problems


# --- console blocks -----------------------------------------------------------


@dataclass
class Command:
    line: int  # on the page
    command: str  # as shown, without the `$ `
    output: list[str] = field(default_factory=list)
    not_checked: str | None = None  # the reason given, when marked


def commands(block: Block) -> list[Command]:
    """The `$ ` commands of a console block, each with the lines after it."""
    found: list[Command] = []
    for offset, line in enumerate(block.lines):
        if line.startswith("$ "):
            command = line[2:]
            marker = NOT_CHECKED.search(command)
            found.append(Command(block.first_line + offset, command, not_checked=marker["reason"] if marker else None))
        elif found:
            found[-1].output.append(line)
    return found


def shows_output(block: Block) -> bool:
    """Whether a console block shows output (and is checked), or only lists commands to type."""
    return block.language == "console" and any(command.output for command in commands(block))


_SEPARATOR = "\x1e--- next command ---\x1e"


def run_console(block: Block, cwd: Path, env: dict[str, str], timeout: float) -> list[tuple[Command, str | None]]:
    """Run the commands of a console block, in order, in one bash.

    Returns each command with what it printed (stdout and stderr together,
    as a terminal shows them), or None for a command marked not checked.
    One shell, so that `echo $?` sees the command before it.
    """
    listed = commands(block)
    script = ["set +e"]
    for command in listed:
        if command.not_checked is not None:
            continue
        cat = re.fullmatch(r"cat (\S+)", command.command.strip())
        if cat is not None and command.output:
            # `$ cat FILE` shows a file the commands after it use: the page is
            # the file's content, so it is written, not compared.
            path = cwd / cat[1]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("\n".join(command.output) + "\n", encoding="utf-8")
        # Keep $? across the separator, for a command such as `echo $?`.
        script.append(f"__status=$?; printf '%s\\n' {shlex.quote(_SEPARATOR)}; (exit $__status)")
        script.append(command.command)
    completed = subprocess.run(
        ["bash", "--noprofile", "--norc", "-c", "\n".join(script) + "\n"],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=timeout,
        text=True,
        check=False,  # a command that fails shows its error; the output decides
    )
    outputs = completed.stdout.split(_SEPARATOR + "\n")[1:]
    results: list[tuple[Command, str | None]] = []
    for command in listed:
        results.append((command, None if command.not_checked is not None else outputs.pop(0)))
    return results


def console_env(home: Path) -> dict[str, str]:
    """The environment console commands run in: this Python's scripts first on
    PATH (so `mcp-sync` and `python` are the ones under test), a fresh home
    (no config file of the person running the tests is found), a fixed
    terminal width (argparse wraps --help to it) and unbuffered Python (so
    stdout and stderr interleave as they would on a terminal)."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["HOME"] = str(home)
    env.pop("XDG_CONFIG_HOME", None)
    env["COLUMNS"] = "80"
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("MCP_SYNC_TOKEN", None)
    return env
