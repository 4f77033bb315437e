"""Following a list's cursors, written once: the list methods, the Skills
extension's `skills/list` and `resources/directory/read` all page the same
way, and stop the same way when a server repeats a cursor or never ends.

    >>> answers = {None: (["a", "b"], "p2"), "p2": (["c"], None)}
    >>> [item for page in pages("x/list", answers.__getitem__, 10) for item in page]
    ['a', 'b', 'c']
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from ..errors import InvalidResult, PaginationError

__all__ = ["pages", "next_cursor"]

_P = TypeVar("_P")


def pages(method: str, fetch: Callable[[str | None], tuple[_P, str | None]], max_pages: int) -> Iterator[_P]:
    """Each page of a list, first to last: `fetch(cursor)` gets one page
    (the first with None) and returns it with the cursor of the next (None
    after the last). Raises `PaginationError` when the server names a cursor
    it named before (the list would never end), or after `max_pages` pages."""
    seen: set[str] = set()
    cursor: str | None = None
    for _ in range(max_pages):
        page, cursor = fetch(cursor)
        yield page
        if cursor is None:
            return
        if cursor in seen:
            raise PaginationError(f"{method}: the server repeated cursor {cursor!r}")
        seen.add(cursor)
    raise PaginationError(f"{method}: still more after max_pages={max_pages} pages")


def next_cursor(method: str, result: Mapping[str, Any]) -> str | None:
    """A result's `nextCursor`: None when absent or empty (the last page);
    `InvalidResult` when it is not a string."""
    cursor = result.get("nextCursor")
    if cursor is None or cursor == "":
        return None
    if not isinstance(cursor, str):
        raise InvalidResult(f"{method}: nextCursor must be a string")
    return cursor
