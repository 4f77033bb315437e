"""The documentation runs: every ```python block of README.md and of every page in docs/.

Each page's ```python blocks are executed in order in one fresh namespace
(blocks of a page share it, as a reader following the page would), with the
working directory set to a temporary folder. Blocks fenced as ```py are
sketches that are shown but not run (they need packages the tests do not
install, such as Flask). A page must also close what it opens: no thread it
started may still be running when it ends.

What a block prints is checked against the output the page shows for it: a
```text block right after it, and `# -> ...` comments on its lines (the
conventions are in tests/test_doc_outputs.py, which also runs the
```console blocks).

Two more tests check that docs/index.md links every page, and that every
link between pages leads to an existing page and heading.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import time
import traceback
from pathlib import Path

import pytest

from tests.doc_blocks import Capture, blocks, check_python_block

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
# README.md is a page too: its examples are the first a reader runs.
EXAMPLE_PAGES = [ROOT / "README.md", *PAGES]

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<ticks>`{3,})(?P<info>[^`\n]*)$")
_LINK = re.compile(r"\]\((?P<target>[^)#\s]*\.md)?(?:#(?P<anchor>[^)\s]*))?\)")
_HEADING = re.compile(r"^#{1,6}[ \t]+(?P<title>.+?)[ \t]*#*[ \t]*$", re.M)


def anchors(text: str) -> set[str]:
    """The anchors GitHub-style renderers give the headings of a page."""
    found = set()
    for match in _HEADING.finditer(_without_code(text)):
        slug = re.sub(r"[^\w\- ]", "", match["title"].strip().lower()).replace(" ", "-")
        found.add(slug)
    return found


def _without_code(text: str) -> str:
    """The text with fenced code blocks blanked out (a '# comment' is no heading)."""
    out, fence = [], None
    for line in text.splitlines():
        opening = _FENCE.match(line)
        if fence is None and opening is not None:
            fence = opening["ticks"]
        elif fence is not None and opening is not None and opening["ticks"] == fence and not opening["info"].strip():
            fence = None
        elif fence is None:
            out.append(line)
            continue
        out.append("")
    return "\n".join(out)


def python_blocks(text: str) -> list[tuple[int, str]]:
    """The ```python blocks of a Markdown text: (first line number, code)."""
    return [(block.first_line, block.code) for block in blocks(text) if block.language == "python"]


def _logging_state() -> dict[str, tuple[int, list[logging.Handler], bool]]:
    names = ["", *[name for name in logging.root.manager.loggerDict if name.startswith("mcp_sync")]]
    state = {}
    for name in names:
        logger = logging.getLogger(name)
        state[name] = (logger.level, list(logger.handlers), logger.propagate)
    return state


def _restore_logging(state: dict[str, tuple[int, list[logging.Handler], bool]]) -> None:
    for name, logger_ref in list(logging.root.manager.loggerDict.items()):
        if name.startswith("mcp_sync") and name not in state and isinstance(logger_ref, logging.Logger):
            state[name] = (logging.NOTSET, [], True)
    for name, (level, handlers, propagate) in state.items():
        logger = logging.getLogger(name)
        for handler in list(logger.handlers):
            if handler not in handlers:
                logger.removeHandler(handler)
        for handler in handlers:
            if handler not in logger.handlers:
                logger.addHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate


def _new_threads(before: set[int], wait: float = 3.0) -> list[threading.Thread]:
    deadline = time.monotonic() + wait
    while True:
        extra = [t for t in threading.enumerate() if t.ident not in before and t.is_alive()]
        if not extra or time.monotonic() > deadline:
            return extra
        time.sleep(0.02)


def _label(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


@pytest.mark.parametrize("page", EXAMPLE_PAGES, ids=[_label(page) for page in EXAMPLE_PAGES])
def test_page_examples_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    label = _label(page)
    python = [block for block in blocks(page.read_text(encoding="utf-8")) if block.language == "python"]
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": f"docs_{page.stem}"}
    before = {t.ident for t in threading.enumerate()}
    logging_state = _logging_state()
    # A page may set environment variables for its examples (config.md sets
    # SEARCH_TOKEN); they must not reach later tests, where a configured
    # server that needs one would then be contacted for real.
    environment = dict(os.environ)
    failure = None
    wrong_output: list[str] = []
    try:
        for number, block in enumerate(python, start=1):
            line = block.first_line
            # Pad with blank lines so that tracebacks (and the output capture)
            # give the line numbers of the page.
            compiled = compile("\n" * (line - 1) + block.code, label, "exec")
            capture = Capture(label)
            try:
                with contextlib.redirect_stdout(capture):
                    exec(compiled, namespace)
            except BaseException as exc:  # a KeyboardInterrupt from an example fails the test, not the run
                details = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
                failure = (
                    f"{label}: python block {number} (starting at line {line}) raised "
                    f"{type(exc).__name__}: {exc}\n\n{details}"
                )
                break
            wrong_output += check_python_block(block, capture, label)
    finally:
        _restore_logging(logging_state)
        os.environ.clear()
        os.environ.update(environment)
    if failure is not None:
        pytest.fail("\n\n".join([failure, *wrong_output]), pytrace=False)
    if wrong_output:
        pytest.fail("\n\n".join(wrong_output), pytrace=False)
    left = _new_threads(before)
    assert not left, f"{label} left threads running (close what the page opens): {left}"


def test_index_links_every_page() -> None:
    index = DOCS / "index.md"
    assert index.exists(), "docs/index.md is missing"
    linked = {match["target"] for match in _LINK.finditer(index.read_text(encoding="utf-8")) if match["target"]}
    missing = sorted(page.name for page in PAGES if page.name != "index.md" and page.name not in linked)
    assert not missing, f"docs/index.md does not link: {missing}"


def test_links_between_pages_resolve() -> None:
    broken = []
    for page in PAGES:
        for match in _LINK.finditer(page.read_text(encoding="utf-8")):
            target, anchor = match["target"], match["anchor"]
            if target is None and anchor is None:
                continue
            linked = page.parent / target if target else page
            if not linked.exists():
                broken.append(f"{page.name} -> {target}")
            elif anchor and anchor not in anchors(linked.read_text(encoding="utf-8")):
                broken.append(f"{page.name} -> {target or ''}#{anchor}")
    assert not broken, f"links to pages or headings that do not exist: {broken}"


def test_block_extraction() -> None:
    text = "intro\n```python\na = 1\n```\n\n```py\nnot run\n```\n- item\n\n  ```python\n  b = 2\n  ```\n"
    assert python_blocks(text) == [(3, "a = 1\n"), (12, "b = 2\n")]
