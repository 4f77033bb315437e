"""A Griffe extension: mcp_sync's plain docstrings, as Markdown.

The docstrings are written to read well in `help()`: literal blocks after a
line ending in `::` (reStructuredText style) and doctest paragraphs (`>>>`).
Markdown would show `Example::` with both colons, and turn `>>>` into three
nested quotes (and read `{...}` in the output as attributes). This rewrites
both as fenced code blocks before mkdocstrings renders the docstring; the
source stays as it is. mkdocs.yml loads it for the python handler.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _language(block: list[str]) -> str:
    first = next((line for line in block if line.strip()), "")
    return "pycon" if first.lstrip().startswith(">>>") else "python"


def to_markdown(text: str) -> str:
    """`text` with its `::` literal blocks and doctest paragraphs fenced."""
    lines = text.splitlines()
    out: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        fence = _FENCE.match(line)
        if fence is not None:
            # An existing fenced block: copy it through untouched.
            out.append(line)
            index += 1
            while index < len(lines):
                out.append(lines[index])
                index += 1
                if lines[index - 1].strip().startswith(fence.group(1)):
                    break
            continue
        stripped = line.rstrip()
        if stripped.endswith("::") and not stripped.endswith(":::"):
            base = _indent(line)
            # Find the indented block that follows (after blank lines).
            start = index + 1
            while start < len(lines) and not lines[start].strip():
                start += 1
            end = start
            while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > base):
                end += 1
            while end > start and not lines[end - 1].strip():
                end -= 1
            if end > start:
                block = lines[start:end]
                inner = min(_indent(b) for b in block if b.strip())
                pad = " " * base
                head = stripped[:-1] if stripped.strip() != "::" else ""
                if head.strip():
                    out.extend([head, ""])
                out.append(f"{pad}```{_language(block)}")
                out.extend(pad + b[inner:] if b.strip() else "" for b in block)
                out.append(f"{pad}```")
                if end < len(lines) and lines[end].strip():
                    out.append("")  # text right after the block starts a new paragraph
                index = end
                continue
        if line.lstrip().startswith(">>>"):
            # A doctest paragraph: it runs to the next blank line.
            pad = " " * _indent(line)
            end = index
            while end < len(lines) and lines[end].strip():
                end += 1
            out.append(f"{pad}```pycon")
            out.extend(pad + b[len(pad):] if b.startswith(pad) else b for b in lines[index:end])
            out.append(f"{pad}```")
            index = end
            continue
        out.append(line)
        index += 1
    return "\n".join(out)


class PlainDocstrings(griffe.Extension):
    """Rewrite each docstring as it is loaded."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = to_markdown(obj.docstring.value)
