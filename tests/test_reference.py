"""The API reference covers the public API: every name exported by
`mcp_sync.__all__` and `mcp_sync.auth.__all__` is rendered by exactly one
`::: mcp_sync.NAME` (or `::: mcp_sync.auth.NAME`) directive in the pages of
docs/reference/, and every such directive names something that exists.

The site itself is built by `mkdocs build --strict` (.ci/docs); this test
needs no MkDocs, so a name added to `__all__` without a reference entry fails
the ordinary test run.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
import types
from collections import defaultdict
from pathlib import Path
from typing import Any

import mcp_sync
import mcp_sync.auth

REFERENCE = Path(__file__).resolve().parent.parent / "docs" / "reference"
MKDOCS_YML = REFERENCE.parent.parent / "mkdocs.yml"

# `::: dotted.path` at the start of a line, as mkdocstrings reads it.
_DIRECTIVE = re.compile(r"^:::[ \t]+(?P<path>[\w.]+)[ \t]*$", re.M)

# The names the reference must cover, and the module path they are shown under.
EXPORTS = {"mcp_sync": mcp_sync.__all__, "mcp_sync.auth": mcp_sync.auth.__all__}


def directives() -> dict[str, list[str]]:
    """Each `:::` path of the reference pages, with the pages that render it."""
    found: dict[str, list[str]] = defaultdict(list)
    for page in sorted(REFERENCE.glob("*.md")):
        for match in _DIRECTIVE.finditer(page.read_text(encoding="utf-8")):
            found[match["path"]].append(page.name)
    return found


def _documented_names() -> dict[str, list[str]]:
    """Each exported name, with the pages whose directives render it.

    A name exported by both `mcp_sync` and `mcp_sync.auth` (the authorization
    errors) is one object: rendering it under either path covers it.
    """
    pages: dict[str, list[str]] = defaultdict(list)
    for path, where in directives().items():
        module, _, name = path.rpartition(".")
        if module in EXPORTS and name in EXPORTS[module]:
            pages[name].extend(where)
    return pages


def test_the_reference_pages_exist() -> None:
    assert REFERENCE.is_dir(), "docs/reference/ is missing"
    assert directives(), "no `::: name` directive in docs/reference/*.md"


def test_every_exported_name_is_in_exactly_one_reference_page() -> None:
    pages = _documented_names()
    exported = sorted(set(mcp_sync.__all__) | set(mcp_sync.auth.__all__))
    missing = [name for name in exported if not pages.get(name)]
    twice = {name: where for name, where in pages.items() if len(where) > 1}
    assert not missing, f"exported but in no docs/reference/ page (add a `::: mcp_sync.NAME` line): {missing}"
    assert not twice, f"rendered by more than one `:::` directive: {twice}"


def test_every_directive_names_something_that_exists() -> None:
    # A directive for a name that was renamed or removed would fail the
    # strict build; say so here too, with the page, where it is cheap to see.
    wrong = []
    for path, where in directives().items():
        module_path, _, name = path.rpartition(".")
        try:
            importlib.import_module(path)
        except ImportError:
            try:
                getattr(importlib.import_module(module_path), name)
            except (ImportError, AttributeError):
                wrong.append((path, where))
    assert not wrong, f"directives naming nothing: {wrong}"


def test_every_reference_page_is_in_the_site_navigation() -> None:
    nav = MKDOCS_YML.read_text(encoding="utf-8")
    left_out = [page.name for page in sorted(REFERENCE.glob("*.md")) if f"reference/{page.name}" not in nav]
    assert not left_out, f"docs/reference/ pages missing from mkdocs.yml's nav: {left_out}"


def test_every_page_is_in_the_site_navigation() -> None:
    # The strict build fails on a page left out of the nav; a page added to
    # docs/ without a nav entry fails here first, in the ordinary test run.
    nav = MKDOCS_YML.read_text(encoding="utf-8")
    pages = sorted(REFERENCE.parent.glob("*.md"))
    left_out = [page.name for page in pages if not re.search(rf":\s*{re.escape(page.name)}\s*$", nav, re.M)]
    assert not left_out, f"docs/ pages missing from mkdocs.yml's nav: {left_out}"


def test_the_quickstart_is_the_first_page() -> None:
    nav = MKDOCS_YML.read_text(encoding="utf-8").split("\nnav:\n", 1)[1]
    first = re.search(r"^\s*-\s*(?:[^:\n]+:\s*)?(\S+\.md)\s*$", nav, re.M)
    assert first is not None and first.group(1) == "quickstart.md", "the quickstart must open the nav"


def _plain_docstrings(monkeypatch: Any) -> Any:
    """docs/_ext/plain_docstrings.py, loaded without Griffe (a docs-only package)."""
    monkeypatch.setitem(sys.modules, "griffe", types.SimpleNamespace(Extension=object, Object=object))
    spec = importlib.util.spec_from_file_location("plain_docstrings", REFERENCE.parent / "_ext" / "plain_docstrings.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_literal_blocks_and_doctests_become_fenced_code(monkeypatch: Any) -> None:
    to_markdown = _plain_docstrings(monkeypatch).to_markdown
    text = "Sum two numbers.\n\nExample::\n\n    add(1, 2)\n        # indented\n\nAfter.\n"
    assert to_markdown(text) == "Sum two numbers.\n\nExample:\n\n```python\nadd(1, 2)\n    # indented\n```\n\nAfter."
    assert to_markdown("Defaults.\n\n>>> f({'n': 2})\n{'n': 2}\n\nMore.") == (
        "Defaults.\n\n```pycon\n>>> f({'n': 2})\n{'n': 2}\n```\n\nMore."
    )
    # A doctest inside a literal block stays one block, marked as a session.
    assert to_markdown("Example::\n\n    >>> 1 + 1\n    2") == "Example:\n\n```pycon\n>>> 1 + 1\n2\n```"
    # Nested under an indented section, the fence keeps the indentation.
    assert to_markdown("Note:\n    Like so::\n\n        x = 1\n    Done.") == (
        "Note:\n    Like so:\n\n    ```python\n    x = 1\n    ```\n\n    Done."
    )


def test_text_without_literal_blocks_is_left_alone(monkeypatch: Any) -> None:
    to_markdown = _plain_docstrings(monkeypatch).to_markdown
    for text in ("Plain `code` and a::b in a line.", "Fenced:\n\n```python\n>>> x\n```", "Ends with a colon:"):
        assert to_markdown(text) == text
