"""The output README.md and the pages in docs/ show is what the code prints today.

Conventions for doc writers (the page is the expectation; nothing here
repeats it):

1. A ```text block right after a ```python block (only blank lines between
   them) is that block's output: everything the block writes to stdout, from
   any thread, must be exactly those lines. tests/test_docs.py checks it as
   it runs the page's blocks (once, in order, in one namespace).
2. A trailing comment that starts with `# ->` is the output of its line:
   `print(result.text)  # -> liftoff` must print `liftoff` (everything
   written to stdout by the print() calls on that line; a print() in a
   function or lambda counts for the line the print() is on). Any other
   comment is an explanation and is not checked, so output is never written
   as a plain `# liftoff` (a plain comment that is what its line prints
   fails, asking for the marker).
3. A ```console block that shows output: each `$ command` line is run with
   bash, in order, in one temporary folder (with a fresh $HOME, this
   Python's scripts first on PATH, stdin empty, 80 columns), and what it
   prints, stdout and stderr together as on a terminal, must be the lines up
   to the next `$ ` line. `$ cat FILE` with lines after it shows a file: the
   lines are written to FILE first, for the commands after it. A console
   block without any output line only lists commands to type; it is not run.
4. In all three, `...` works as doctest's ELLIPSIS: a line that is only
   `...` stands for any run of lines (none too), and `...` inside a line
   for any run of characters (a port, a path, a duration). Trailing spaces
   and trailing blank lines do not count.
5. A command that cannot run in a test (a remote URL, a browser, npx, a
   file the page does not show) ends with `# not checked: REASON`; it is not
   run and its output is not compared. The count of such markers may only
   go down (MAX_NOT_CHECKED).

A ```py block is a sketch: not run, so a ```text block after it is not
checked either. A ```text block after prose (a signature, a wire message,
what a server logs on its own stderr) is an illustration, not output.
"""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path

import pytest

from tests.doc_blocks import (
    Block,
    Capture,
    blocks,
    check_python_block,
    commands,
    console_env,
    mismatch,
    output_matches,
    run_console,
    shows_output,
)

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# Console commands marked `# not checked:` in README.md and docs/*.md. Each
# one is output that can go stale unseen, so the number should only go
# down: lower it when one becomes checkable. Today: servers that need a
# token (2) or are the reader's own, answers typed at prompts, a web server
# that serves until stopped and a request to it (3), a script run from the
# examples folder and a test file saved by hand (the examples tests run
# both for real).
MAX_NOT_CHECKED = 9

# One console block (its commands one after another) may take this long; the
# slowest today start a few demo servers.
BLOCK_TIMEOUT = 120


def _label(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def _console_blocks(page: Path) -> list[Block]:
    return [block for block in blocks(page.read_text(encoding="utf-8")) if shows_output(block)]


CONSOLE_PAGES = [page for page in PAGES if _console_blocks(page)]


@pytest.mark.parametrize("page", CONSOLE_PAGES, ids=[_label(page) for page in CONSOLE_PAGES])
def test_console_output(page: Path, tmp_path: Path) -> None:
    label = _label(page)
    work = tmp_path / "work"
    work.mkdir()
    env = console_env(tmp_path / "home")
    (tmp_path / "home").mkdir()
    problems = []
    for block in _console_blocks(page):
        try:
            results = run_console(block, work, env, BLOCK_TIMEOUT)
        except subprocess.TimeoutExpired:
            problems.append(f"{label}:{block.fence_line}: the console block did not finish in {BLOCK_TIMEOUT} s")
            continue
        for command, printed in results:
            if printed is None:
                continue
            problem = mismatch(f"{label}:{command.line} `$ {command.command}`", "\n".join(command.output), printed)
            if problem:
                problems.append(problem)
    if problems:
        pytest.fail("\n\n".join(problems), pytrace=False)


def test_not_checked_commands_do_not_grow() -> None:
    marked = [
        f"{_label(page)}:{command.line} ({command.not_checked})"
        for page in PAGES
        for block in blocks(page.read_text(encoding="utf-8"))
        if block.language == "console"
        for command in commands(block)
        if command.not_checked is not None
    ]
    assert len(marked) <= MAX_NOT_CHECKED, (
        f"{len(marked)} console commands are marked '# not checked:' (at most {MAX_NOT_CHECKED}): "
        + "; ".join(marked)
    )


# --- the runner itself ----------------------------------------------------------


def test_output_blocks_are_paired() -> None:
    text = (
        "```python\nprint(1)\n```\n\n```text\n1\n```\n"  # output of the block above
        "```py\nprint(2)\n```\n```text\n2\n```\n"  # after a sketch: not run, not paired
        "```python\nprint(3)\n```\nprose\n```text\n3\n```\n"  # prose between: an illustration
    )
    found = blocks(text)
    assert [block.language for block in found] == ["python", "text", "py", "text", "python", "text"]
    assert found[0].output is found[1]
    assert found[0].output.lines == ["1"]
    assert found[4].output is None


def test_ellipsis() -> None:
    assert output_matches("a\n...\nd", "a\nb\nc\nd\n")
    assert output_matches("a\n...\nb", "a\nb")  # a run of no lines
    assert output_matches("http://127.0.0.1:.../authorize", "http://127.0.0.1:46215/authorize")
    assert output_matches("x  \n\n", "x\n")  # trailing spaces and blank lines do not count
    assert not output_matches("a\n...\nd", "a\nb\nc\n")
    assert not output_matches("port ...!", "port 80")
    assert not output_matches("a", "a\nb")


def _run_page_block(code: str, shown: str | None) -> list[str]:
    """Run one python block the way tests/test_docs.py does and check it."""
    text = f"```python\n{code}```\n" + (f"\n```text\n{shown}```\n" if shown is not None else "")
    block = blocks(text)[0]
    capture = Capture("page.md")
    compiled = compile("\n" * (block.first_line - 1) + block.code, "page.md", "exec")
    with contextlib.redirect_stdout(capture):
        exec(compiled, {})
    return check_python_block(block, capture, "page.md")


def test_wrong_output_fails_with_page_line_and_what_it_prints() -> None:
    assert _run_page_block("print('liftoff')\n", "liftoff\n") == []
    [problem] = _run_page_block("print('liftoff')\n", "landed\n")
    assert problem.startswith("page.md:6 (the output of the python block at line 2)")
    assert "-landed" in problem and "+liftoff" in problem


def test_output_comments_are_checked_line_by_line() -> None:
    code = (
        "show = lambda x: print('got', x)  # -> got 1\n"  # a print() counts on its own line
        "print('a')  # -> a\n"
        "show(1)  # an explanation, not output\n"
        "print('port 4242')  # -> port ...\n"
    )
    assert _run_page_block(code, None) == []
    [problem] = _run_page_block("print('b')  # -> a\n", None)
    assert problem.startswith("page.md:2 (the '# ->' comment)") and "+b" in problem
    # Output written as a plain comment would never be checked: it is refused.
    [problem] = _run_page_block("print('liftoff')  # liftoff\n", None)
    assert problem.startswith("page.md:2: the comment '# liftoff' is what the line prints")


def test_console_commands_run_in_one_shell(tmp_path: Path) -> None:
    text = (
        "```console\n"
        "$ cat note.txt\nhello\n"
        "$ python -c 'import sys; print(open(\"note.txt\").read().strip()); sys.exit(3)'\nhello\n"
        "$ echo $?\n3\n"
        "$ never-run  # not checked: shows the marker\nanything\n"
        "```\n"
    )
    [block] = blocks(text)
    assert shows_output(block)
    (tmp_path / "home").mkdir()
    results = run_console(block, tmp_path, console_env(tmp_path / "home"), 30)
    assert [printed for _, printed in results] == ["hello\n", "hello\n", "3\n", None]
    assert results[3][0].not_checked == "shows the marker"
    assert mismatch("page.md:4", "\n".join(results[2][0].output), "4\n") is not None
