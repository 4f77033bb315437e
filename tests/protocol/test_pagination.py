"""Following cursors: every page once, in order; a repeated cursor or a
list that never ends stops with `PaginationError`; `nextCursor` checked."""

import pytest

from mcp_sync.errors import InvalidResult, PaginationError
from mcp_sync.protocol.pagination import next_cursor, pages


def test_every_page_in_order_with_the_cursor_the_server_named():
    asked = []
    answers = {None: ([1, 2], "b"), "b": ([3], "c"), "c": ([], None)}

    def fetch(cursor):
        asked.append(cursor)
        return answers[cursor]

    assert list(pages("x/list", fetch, 10)) == [[1, 2], [3], []]
    assert asked == [None, "b", "c"]


def test_a_repeated_cursor_stops_after_the_page_that_repeated_it():
    got = []
    with pytest.raises(PaginationError, match="x/list: the server repeated cursor 'a'"):
        for page in pages("x/list", lambda cursor: ([cursor], "a"), 10):
            got.append(page)
    assert got == [[None], ["a"]]


def test_max_pages_bounds_an_endless_list():
    with pytest.raises(PaginationError, match="still more after max_pages=3 pages"):
        list(pages("x/list", lambda cursor: ([], f"{cursor}+"), 3))


@pytest.mark.parametrize("result, cursor", [({}, None), ({"nextCursor": ""}, None), ({"nextCursor": None}, None),
                                            ({"nextCursor": "n"}, "n")])
def test_next_cursor(result, cursor):
    assert next_cursor("x/list", result) == cursor


def test_a_cursor_that_is_not_a_string_is_an_invalid_result():
    with pytest.raises(InvalidResult, match="x/list: nextCursor must be a string"):
        next_cursor("x/list", {"nextCursor": 7})
