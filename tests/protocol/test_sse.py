"""The SSE parser against the WHATWG event-stream interpretation rules."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_sync.protocol.sse import Event, EventTooLarge, SSEParser


def parse(stream: bytes, **kwargs: int) -> list[Event]:
    parser = SSEParser(**kwargs)
    return parser.feed(stream) + parser.close()


def parse_chunks(chunks: list[bytes], **kwargs: int) -> list[Event]:
    parser = SSEParser(**kwargs)
    events: list[Event] = []
    for chunk in chunks:
        events += parser.feed(chunk)
    return events + parser.close()


def msg(data: str, event: str = "message", id: str | None = None) -> Event:
    return Event(event=event, data=data, id=id)


# -- fields and dispatch ----------------------------------------------------


def test_single_event_defaults_to_message_type():
    assert parse(b"data: hello\n\n") == [msg("hello")]


def test_feed_returns_only_completed_events():
    parser = SSEParser()
    assert parser.feed(b"data: one\n") == []
    assert parser.feed(b"\ndata: two\n") == [msg("one")]
    assert parser.feed(b"\ndata: three\n\ndata: four\n\n") == [msg("two"), msg("three"), msg("four")]
    assert parser.close() == []


def test_event_field_sets_type_for_one_event_only():
    assert parse(b"event: update\ndata: a\n\ndata: b\n\n") == [msg("a", "update"), msg("b")]


def test_empty_event_field_means_message():
    assert parse(b"event:\ndata: a\n\n") == [msg("a")]


def test_multi_line_data_joined_with_newline():
    assert parse(b"data: a\ndata: b\ndata:\ndata: c\n\n") == [msg("a\nb\n\nc")]


def test_only_one_leading_space_removed():
    assert parse(b"data:no-space\n\ndata:  two\n\ndata:\tx\n\n") == [msg("no-space"), msg(" two"), msg("\tx")]


def test_value_may_contain_colons():
    assert parse(b'data: {"a": "b:c"}\n\n') == [msg('{"a": "b:c"}')]


def test_line_without_colon_is_field_with_empty_value():
    # "data" alone appends an empty line to the data buffer: the buffer is not
    # empty, so an event with empty data is dispatched.
    assert parse(b"data\n\n") == [msg("")]
    assert parse(b"data\ndata\n\n") == [msg("\n")]
    assert parse(b"event\ndata: x\n\n") == [msg("x")]


def test_empty_data_field_still_dispatches():
    assert parse(b"data:\n\n") == [msg("")]


def test_blank_line_without_data_dispatches_nothing_and_resets_type():
    assert parse(b"\n\n\nevent: x\n\ndata: y\n\n") == [msg("y")]


def test_unknown_fields_and_wrong_case_ignored():
    stream = b"foo: bar\nData: nope\nEVENT: nope\ndata: yes\nfoo\n\n"
    assert parse(stream) == [msg("yes")]


# -- line ends --------------------------------------------------------------


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"])
def test_each_line_end_style(eol: bytes):
    stream = b"event: e" + eol + b"data: a" + eol + b"data: b" + eol + eol + b"data: c" + eol + eol
    assert parse(stream) == [msg("a\nb", "e"), msg("c")]


def test_mixed_line_ends():
    assert parse(b"data: a\r\ndata: b\rdata: c\n\r\n") == [msg("a\nb\nc")]


def test_cr_then_crlf_is_two_line_ends():
    assert parse(b"data: a\r\r\ndata: b\r\r") == [msg("a"), msg("b")]


def test_crlf_then_lf_is_a_blank_line():
    assert parse(b"data: a\r\n\ndata: b\n\r\n") == [msg("a"), msg("b")]


def test_lf_cr_is_two_line_ends():
    assert parse(b"data: a\n\rdata: b\n\n") == [msg("a"), msg("b")]


def test_cr_at_chunk_end_then_lf_is_one_line_end():
    parser = SSEParser()
    assert parser.feed(b"data: a\r") == []
    # Were the LF a second line end, this chunk would dispatch "a".
    assert parser.feed(b"\ndata: b\r") == []
    assert parser.feed(b"\n") == []
    assert parser.feed(b"\r") == [msg("a\nb")]
    assert parser.feed(b"\n") == []  # the LF of that CRLF, not another blank line
    assert parser.close() == []


def test_cr_at_chunk_end_survives_empty_chunks():
    parser = SSEParser()
    assert parser.feed(b"data: a\r") == []
    assert parser.feed(b"") == []
    assert parser.feed(b"") == []
    assert parser.feed(b"\ndata: b\n\n") == [msg("a\nb")]


def test_lone_cr_followed_by_other_text_in_next_chunk():
    parser = SSEParser()
    assert parser.feed(b"data: a\r") == []
    assert parser.feed(b"\r") == [msg("a")]


# -- chunking ---------------------------------------------------------------

COMPLEX_STREAM = (
    "\ufeff: opening comment\r\n"
    "retry: 2500\n"
    "id: 7\r"
    "event: notice\r\n"
    'data: {"text": "caf\u00e9 \u20ac \U0001f600"}\r'
    "data:second\n"
    "\r\n"
    ":\r\n"
    "data\n"
    "\r"
    "id: \u00fcber\n"
    "data: x:y\r\n"
    "\n"
    "id\n"
    "data: last\r"
    "\r"
    "data: no trailing blank line"
).encode("utf-8")

COMPLEX_EVENTS = [
    msg('{"text": "caf\u00e9 \u20ac \U0001f600"}\nsecond', "notice", "7"),
    msg("", id="7"),
    msg("x:y", id="\u00fcber"),
    msg("last", id=""),
    msg("no trailing blank line", id=""),
]


def test_complex_stream_one_shot():
    parser = SSEParser()
    assert parser.feed(COMPLEX_STREAM) + parser.close() == COMPLEX_EVENTS
    assert parser.retry_ms == 2500
    assert parser.comments_seen == 2
    assert parser.last_event_id == ""


@pytest.mark.parametrize("cut", range(len(COMPLEX_STREAM) + 1))
def test_split_at_every_position(cut: int):
    assert parse_chunks([COMPLEX_STREAM[:cut], COMPLEX_STREAM[cut:]]) == COMPLEX_EVENTS


def test_split_at_every_pair_of_positions():
    n = len(COMPLEX_STREAM)
    for i in range(0, n + 1, 3):
        for j in range(i, n + 1, 5):
            chunks = [COMPLEX_STREAM[:i], COMPLEX_STREAM[i:j], COMPLEX_STREAM[j:]]
            assert parse_chunks(chunks) == COMPLEX_EVENTS, (i, j)


def test_byte_by_byte():
    parser = SSEParser()
    events: list[Event] = []
    for i in range(len(COMPLEX_STREAM)):
        events += parser.feed(COMPLEX_STREAM[i : i + 1])
    assert events + parser.close() == COMPLEX_EVENTS
    assert parser.comments_seen == 2
    assert parser.retry_ms == 2500


# -- UTF-8 and BOM ----------------------------------------------------------


def test_utf8_split_across_chunks():
    text = "data: \u00e9\u20ac\U0001f600\u4e16\n\n".encode("utf-8")
    for cut in range(len(text) + 1):
        assert parse_chunks([text[:cut], text[cut:]]) == [msg("\u00e9\u20ac\U0001f600\u4e16")]


def test_invalid_utf8_becomes_replacement_character():
    assert parse(b"data: a\xffb\n\n") == [msg("a\ufffdb")]


def test_truncated_utf8_at_end_of_stream_becomes_replacement_character():
    assert parse(b"data: a\xe2\x82") == [msg("a\ufffd")]


def test_leading_bom_stripped():
    assert parse(b"\xef\xbb\xbfdata: a\n\n") == [msg("a")]


def test_bom_split_across_chunks():
    assert parse_chunks([b"\xef", b"\xbb", b"\xbfdata: a\n\n"]) == [msg("a")]
    assert parse_chunks([b"", b"\xef\xbb\xbf", b"data: a\n\n"]) == [msg("a")]


def test_only_one_bom_stripped():
    # The second BOM becomes part of the field name, so the field is unknown.
    assert parse(b"\xef\xbb\xbf\xef\xbb\xbfdata: a\n\ndata: b\n\n") == [msg("b")]


def test_bom_not_at_start_is_kept():
    assert parse("data: a\n\n\ufeffdata: b\n\ndata: \ufeffc\n\n".encode()) == [msg("a"), msg("\ufeffc")]


# -- comments ---------------------------------------------------------------


def test_comments_ignored_and_counted():
    parser = SSEParser()
    assert parser.feed(b":\r\n: keep-alive\n") == []
    assert parser.comments_seen == 2
    assert parser.feed(b"data: a\n:in the middle\ndata: b\n\n") == [msg("a\nb")]
    assert parser.comments_seen == 3


def test_comment_does_not_dispatch():
    parser = SSEParser()
    assert parser.feed(b"data: a\n:\n") == []
    assert parser.feed(b"\n") == [msg("a")]


def test_comment_counted_once_when_split():
    assert parse_chunks([b": keep", b"-alive\r", b"\n"]) == []
    parser = SSEParser()
    parser.feed(b": keep")
    parser.feed(b"-alive\r")
    parser.feed(b"\n:")
    assert parser.comments_seen == 1
    parser.close()
    assert parser.comments_seen == 2


# -- id ---------------------------------------------------------------------


def test_id_persists_across_events():
    stream = b"id: 1\ndata: a\n\ndata: b\n\nid: 2\ndata: c\n\n"
    assert parse(stream) == [msg("a", id="1"), msg("b", id="1"), msg("c", id="2")]


def test_id_none_until_set():
    parser = SSEParser()
    assert parser.last_event_id is None
    assert parser.feed(b"data: a\n\n") == [msg("a", id=None)]
    assert parser.last_event_id is None


def test_id_with_nul_ignored():
    stream = b"id: good\ndata: a\n\nid: b\x00d\ndata: b\n\n"
    assert parse(stream) == [msg("a", id="good"), msg("b", id="good")]


def test_empty_id_resets_to_empty_string():
    assert parse(b"id: 1\ndata: a\n\nid\ndata: b\n\nid:\ndata: c\n\n") == [
        msg("a", id="1"),
        msg("b", id=""),
        msg("c", id=""),
    ]


def test_id_without_data_takes_effect_at_blank_line():
    parser = SSEParser()
    assert parser.feed(b"id: 5\n") == []
    assert parser.last_event_id is None  # committed only when the event is dispatched
    assert parser.feed(b"\n") == []
    assert parser.last_event_id == "5"
    assert parser.feed(b"data: x\n\n") == [msg("x", id="5")]


def test_last_id_field_of_an_event_wins():
    assert parse(b"id: 1\nid: 2\ndata: a\n\n") == [msg("a", id="2")]


# -- retry ------------------------------------------------------------------


def test_retry_digits_set_reconnection_time():
    parser = SSEParser()
    assert parser.retry_ms is None
    parser.feed(b"retry: 3000\n")
    assert parser.retry_ms == 3000  # takes effect without a blank line
    parser.feed(b"retry:0\n")
    assert parser.retry_ms == 0


@pytest.mark.parametrize(
    "value",
    [b"", b"1a", b"-1", b"+1", b"1.5", b" 10", b"10 ", b"1_000", "\u0661\u0662".encode(), "\u00b2".encode()],
)
def test_retry_non_digits_ignored(value: bytes):
    parser = SSEParser()
    parser.feed(b"retry: 42\n")
    parser.feed(b"retry: " + value + b"\n")
    assert parser.retry_ms == 42


def test_retry_does_not_create_an_event():
    assert parse(b"retry: 10\n\n") == []


def test_retry_with_absurdly_many_digits_is_ignored():
    parser = SSEParser()
    parser.feed(b"retry: 7\nretry: " + b"9" * 10000 + b"\n")
    assert parser.retry_ms == 7
    parser.feed(b"retry: " + b"0" * 10000 + b"12\n")  # leading zeros do not count
    assert parser.retry_ms == 12


# -- end of stream ----------------------------------------------------------


@pytest.mark.parametrize("tail", [b"", b"\n", b"\r", b"\r\n"])
def test_final_event_without_blank_line_dispatched_at_close(tail: bytes):
    parser = SSEParser()
    assert parser.feed(b'id: 9\nevent: done\ndata: {"jsonrpc": "2.0"}' + tail) == []
    assert parser.close() == [msg('{"jsonrpc": "2.0"}', "done", "9")]
    assert parser.last_event_id == "9"


def test_close_without_pending_data_returns_nothing():
    parser = SSEParser()
    parser.feed(b"data: a\n\nevent: x\nid: 3\n: bye")
    assert parser.close() == []
    assert parser.comments_seen == 1


def test_close_twice_returns_nothing_more():
    parser = SSEParser()
    parser.feed(b"data: a")
    assert parser.close() == [msg("a")]
    assert parser.close() == []


# -- one parser across reconnections ----------------------------------------


def test_feed_after_close_starts_a_new_stream():
    parser = SSEParser()
    assert parser.feed(b"retry: 100\n:ka\nid: 4\ndata: a\n\nid: 5\n") == [msg("a", id="4")]
    assert parser.close() == []
    assert parser.last_event_id == "5"  # close() commits like a blank line
    # The new stream may open with its own BOM; id, retry and comments carry over.
    assert parser.feed(b"\xef\xbb\xbfdata: b\n\n") == [msg("b", id="5")]
    assert (parser.retry_ms, parser.comments_seen) == (100, 1)
    assert parser.feed(b"id: 6\ndata: c") == []
    assert parser.close() == [msg("c", id="6")]


def test_reconnect_discards_the_broken_stream():
    parser = SSEParser()
    assert parser.feed(b"id: 1\ndata: ok\n\nid: 2\nevent: e\ndata: lost\ndata: {\"trunc") == [msg("ok", id="1")]
    parser.reconnect()
    assert parser.last_event_id == "1"  # id 2 was never committed
    assert parser.feed(b"data: next\n\n") == [msg("next", id="1")]


def test_reconnect_drops_half_a_character_and_the_pending_event():
    parser = SSEParser()
    parser.feed(b"data: x\n\ndata: \xe2\x82")
    parser.reconnect()
    # Without a fresh decoder the two stray bytes would turn into U+FFFD here.
    assert parser.feed(b"data: y\n\n") + parser.close() == [msg("y")]
    parser = SSEParser()
    parser.feed(b"event: old\ndata: x\r")
    parser.reconnect()
    assert parser.feed(b"data: y\n\n") == [msg("y")]


# -- size limit -------------------------------------------------------------


def test_data_exactly_at_limit_passes():
    assert parse(b"data: " + b"x" * 10 + b"\n\n", max_event_bytes=10) == [msg("x" * 10)]
    # Two lines of 4 plus the joining newline: 9 bytes.
    assert parse(b"data: aaaa\ndata: bbbb\n\n", max_event_bytes=9) == [msg("aaaa\nbbbb")]


def test_data_over_limit_raises():
    with pytest.raises(EventTooLarge) as info:
        parse(b"data: " + b"x" * 11 + b"\n\n", max_event_bytes=10)
    assert info.value.limit == 10
    with pytest.raises(EventTooLarge):
        parse(b"data: aaaa\ndata: bbbb\n\n", max_event_bytes=8)  # the joining newline counts


def test_limit_counts_utf8_bytes_not_characters():
    data = "\u20ac" * 4  # 12 bytes
    assert parse(f"data: {data}\n\n".encode(), max_event_bytes=12) == [msg(data)]
    with pytest.raises(EventTooLarge):
        parse(f"data: {data}\n\n".encode(), max_event_bytes=11)


def test_limit_resets_per_event():
    stream = b"".join(b"data: " + b"x" * 8 + b"\n\n" for _ in range(100))
    assert len(parse(stream, max_event_bytes=10)) == 100


def test_huge_event_in_many_lines_raises_before_completion():
    parser = SSEParser(max_event_bytes=1000)
    with pytest.raises(EventTooLarge):
        for _ in range(1000):
            parser.feed(b"data: 0123456789\n")  # never a blank line
    with pytest.raises(RuntimeError):
        parser.feed(b"\n")
    with pytest.raises(RuntimeError):
        parser.close()
    parser.reconnect()
    assert parser.feed(b"data: fine\n\n") == [msg("fine")]


def test_endless_line_raises():
    parser = SSEParser(max_event_bytes=100)
    parser.feed(b"data: ")
    fed = 0
    with pytest.raises(EventTooLarge):
        while fed < 10_000:
            parser.feed(b"x" * 7)
            fed += 7
    assert fed <= 110  # bounded near the limit, not buffered forever


@pytest.mark.parametrize("prefix", [b"", b":", b"event: ", b"id: ", b"data"])
def test_endless_line_of_any_kind_raises(prefix: bytes):
    parser = SSEParser(max_event_bytes=50)
    with pytest.raises(EventTooLarge):
        parser.feed(prefix)
        for _ in range(100):
            parser.feed(b"y")


def test_long_complete_comment_raises():
    with pytest.raises(EventTooLarge):
        parse(b":" + b"z" * 51 + b"\n", max_event_bytes=50)
    assert parse(b":" + b"z" * 50 + b"\n", max_event_bytes=50) == []


@pytest.mark.parametrize("size", [98, 99, 100, 101, 102])
def test_raising_does_not_depend_on_chunking(size: int):
    stream = b"data: " + b"q" * size + b"\n\n"
    one_shot: bool
    try:
        parse(stream, max_event_bytes=100)
        one_shot = False
    except EventTooLarge:
        one_shot = True
    assert one_shot == (size > 100)
    for cut in range(len(stream) + 1):
        if one_shot:
            with pytest.raises(EventTooLarge):
                parse_chunks([stream[:cut], stream[cut:]], max_event_bytes=100)
        else:
            assert parse_chunks([stream[:cut], stream[cut:]], max_event_bytes=100) == [msg("q" * size)]


def test_unterminated_line_at_close_is_checked():
    parser = SSEParser(max_event_bytes=5)
    parser.feed(b"data:123456")  # unterminated value of 6 bytes: within the one-byte slack
    with pytest.raises(EventTooLarge):
        parser.close()


def test_invalid_limit():
    with pytest.raises(ValueError):
        SSEParser(max_event_bytes=0)


# -- property: serialize random events, parse them back ---------------------

_line_text = st.text(st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), max_size=12)
_eol = st.sampled_from(["\n", "\r\n", "\r"])


@st.composite
def _streams(draw: st.DrawFn) -> tuple[bytes, list[Event], int, str | None, list[int]]:
    events: list[Event] = []
    lines: list[str] = []
    comments = 0
    last_id: str | None = None
    if draw(st.booleans()):
        lines.append("\ufeff" + ": hello")  # BOM is prepended to the first line
        comments += 1
    for _ in range(draw(st.integers(0, 5))):
        name = draw(_line_text)
        if name:
            lines.append("event: " + name)
        new_id = draw(st.none() | _line_text.filter(lambda s: "\0" not in s))
        if new_id is not None:
            lines.append("id: " + new_id)
            last_id = new_id
        data_lines = draw(st.lists(_line_text, min_size=1, max_size=4))
        for data in data_lines:
            if draw(st.booleans()):
                lines.append(": " + draw(_line_text))
                comments += 1
            if data.startswith(" ") or draw(st.booleans()):
                lines.append("data: " + data)
            else:
                lines.append("data:" + data)
        lines.append("")
        events.append(Event(event=name or "message", data="\n".join(data_lines), id=last_id))
    if events and draw(st.booleans()):
        lines.pop()  # no blank line after the last event: close() still dispatches it
    text = ""
    prev_eol = ""
    for line in lines:
        eol = draw(_eol)
        if prev_eol == "\r" and line == "" and eol == "\n":
            eol = "\r\n"  # "\r" + "\n" would be one line end, swallowing the blank line
        text += line + eol
        prev_eol = eol
    raw = text.encode("utf-8")
    cuts = sorted(draw(st.lists(st.integers(0, len(raw)), max_size=8)))
    return raw, events, comments, last_id, cuts


@settings(max_examples=400, deadline=None)
@given(_streams())
def test_roundtrip_random_events_random_chunks(case: tuple[bytes, list[Event], int, str | None, list[int]]):
    raw, events, comments, last_id, cuts = case
    bounds = [0, *cuts, len(raw)]
    chunks = [raw[a:b] for a, b in itertools.pairwise(bounds)]
    parser = SSEParser()
    got: list[Event] = []
    for chunk in chunks:
        got += parser.feed(chunk)
    got += parser.close()
    assert got == events
    assert parser.comments_seen == comments
    assert parser.last_event_id == last_id
