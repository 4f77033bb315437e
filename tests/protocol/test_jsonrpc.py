import json
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcp_sync.errors import InvalidMessage
from mcp_sync.protocol import jsonrpc
from mcp_sync.protocol.jsonrpc import Kind


def test_request_and_notification_shapes():
    assert jsonrpc.request(7, "tools/list", None) == {"jsonrpc": "2.0", "id": 7, "method": "tools/list"}
    assert jsonrpc.request(7, "x", {"a": 1})["params"] == {"a": 1}
    assert jsonrpc.notification("notifications/initialized") == {
        "jsonrpc": "2.0", "method": "notifications/initialized"}
    assert "id" not in jsonrpc.notification("n", {})


def test_error_response_carries_data_only_when_given():
    assert jsonrpc.error_response(1, -32601, "nope") == {
        "jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "nope"}}
    assert jsonrpc.error_response(1, -32602, "bad", {"x": 1})["error"]["data"] == {"x": 1}


def test_encode_is_compact_single_line_utf8():
    data = jsonrpc.encode({"text": "line1\nline2 \u00e9"})
    assert b"\n" not in data
    assert data == '{"text":"line1\\nline2 \u00e9"}'.encode()


def test_encode_refuses_nan():
    with pytest.raises(ValueError):
        jsonrpc.encode({"x": float("nan")})


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20)


@given(st.dictionaries(st.text(max_size=8), json_values, max_size=5))
def test_encode_writes_what_the_standard_encoder_writes(message):
    # (`encode` keeps one C encoder for every message: the output must be
    # the standard library's, byte for byte.)
    assert jsonrpc.encode(message) == json.dumps(message, separators=(",", ":"), ensure_ascii=False,
                                                 allow_nan=False).encode()


def test_a_circle_is_named_on_a_thread_with_a_small_stack():
    # A circle is found by the ids of the containers being encoded, not by
    # running out of stack: a C encoder without them recursed until the
    # 3.13 C recursion limit (about 10,000), past what a 512 KiB thread
    # stack holds, and the process died. Checked in a process of its own.
    code = """if True:
        import threading
        from mcp_sync.protocol import jsonrpc
        circle = {}
        circle["self"] = [circle]
        said = []
        def encode():
            for _ in range(2):  # twice: the first failure leaves nothing behind
                try:
                    jsonrpc.encode({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                    "params": {"arguments": circle}})
                except ValueError as exc:
                    said.append(str(exc))
            said.append(jsonrpc.encode({"a": [circle["self"][0] is circle]}).decode())
        threading.stack_size(512 * 1024)
        thread = threading.Thread(target=encode)
        thread.start()
        thread.join()
        print(said)
    """
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == str(["Circular reference detected"] * 2 + ['{"a":[true]}'])


def test_encode_names_a_circle_and_refuses_what_json_cannot_hold():
    circle: list = []
    circle.append(circle)
    with pytest.raises(ValueError, match="Circular reference"):
        jsonrpc.encode({"arguments": {"a": circle}})
    with pytest.raises(TypeError, match="not JSON serializable"):
        jsonrpc.encode({"arguments": {"a": object()}})
    shared = {"x": [1, 2]}  # the same object twice is no circle
    assert jsonrpc.encode({"a": shared, "b": shared}) == b'{"a":{"x":[1,2]},"b":{"x":[1,2]}}'
    # After a failure the next message is encoded as usual (nothing is left over).
    assert jsonrpc.encode({"a": 1}) == b'{"a":1}'


@pytest.mark.parametrize("raw", [b"not json", b"[1,2]", b"42", b'"str"', b"\xff\xfe"])
def test_decode_rejects_non_objects(raw):
    with pytest.raises(InvalidMessage):
        jsonrpc.decode(raw)


@pytest.mark.parametrize(
    "message,kind",
    [
        ({"jsonrpc": "2.0", "id": 1, "method": "m"}, Kind.REQUEST),
        ({"jsonrpc": "2.0", "method": "m", "params": {}}, Kind.NOTIFICATION),
        ({"jsonrpc": "2.0", "id": "a", "result": {}}, Kind.RESPONSE),
        ({"jsonrpc": "2.0", "id": 1, "error": {"code": 1, "message": "x"}}, Kind.ERROR),
        ({"jsonrpc": "2.0", "id": None, "error": {"code": 1, "message": "x"}}, Kind.ERROR),
    ],
)
def test_classify(message, kind):
    assert jsonrpc.classify(message) is kind


@pytest.mark.parametrize(
    "message",
    [
        {"id": 1, "result": {}},  # no jsonrpc
        {"jsonrpc": "1.0", "id": 1, "result": {}},
        {"jsonrpc": "2.0", "id": 1},  # nothing
        {"jsonrpc": "2.0", "method": 5},
        {"jsonrpc": "2.0", "method": "m", "params": [1]},
        {"jsonrpc": "2.0", "id": None, "result": {}},
        {"jsonrpc": "2.0", "id": True, "result": {}},
    ],
)
def test_classify_rejects_malformed(message):
    with pytest.raises(InvalidMessage):
        jsonrpc.classify(message)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=20,
)


@given(st.integers(min_value=-(2**53), max_value=2**53) | st.text(), st.text(min_size=1),
       st.dictionaries(st.text(), json_values))
def test_round_trip(request_id, method, params):
    message = jsonrpc.request(request_id, method, params)
    encoded = jsonrpc.encode(message)
    assert b"\n" not in encoded
    decoded = jsonrpc.decode(encoded)
    assert decoded == json.loads(json.dumps(message))
    assert jsonrpc.classify(decoded) is Kind.REQUEST


def _line_by_line(data: bytes) -> list[object] | InvalidMessage:
    """What `parse` makes of each line of `data` (blank lines skipped, as
    the stdio reader skips them), or the first error."""
    values = []
    for line in data.split(b"\n")[:-1]:  # as the stdio reader splits them
        line += b"\n"
        if line.isspace():
            continue
        try:
            values.append(jsonrpc.parse(line))
        except InvalidMessage as exc:
            return exc
    return values


# Lines a server may write: messages, and what `parse_lines` must leave to
# `parse` (a batch, a scalar, blanks around a value, two values on a line, a
# value cut over two lines, bytes that are not UTF-8, a BOM, UTF-16).
_lines = st.lists(
    st.one_of(
        st.builds(lambda value: json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass"),
                  st.dictionaries(st.text(max_size=5), json_values, max_size=4)),
        st.sampled_from([
            b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":2}}',
            b'[{"jsonrpc":"2.0","method":"m"}]', b"[]", b"3", b'"x"', b"null", b"", b" ", b"\r",
            b' {"a":1}', b'{"a":1} ', b'{"a":1}\r', b"{}{}", b"{},{}", b'{"a":[1', b"2]}", b"{}],[{}",
            b'{"a":"\xff"}', b'{"a":"\\ud800"}', b"\xef\xbb\xbf{}", '{"a":1}'.encode("utf-16-le"), b"{",
        ]),
    ),
    min_size=1, max_size=8,
)


@given(_lines, st.sampled_from([b"\n", b"\r\n"]))
def test_parse_lines_is_parse_line_by_line_or_leaves_it_to_parse(lines, end):
    data = b"".join(line + end for line in lines)
    parsed = jsonrpc.parse_lines(data)
    expected = _line_by_line(data)
    if parsed is not None:
        # Only ever a whole read of objects, and the very ones `parse` gives.
        assert parsed == expected
        assert len(parsed) == len(lines) and all(type(value) is dict for value in parsed)


def test_parse_lines_takes_a_flood_whole():
    line = b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":%d}}\n'
    data = b"".join(line % i for i in range(500))
    assert jsonrpc.parse_lines(data) == [jsonrpc.parse(line % i) for i in range(500)]
    # Lines ended by CRLF, as a server on Windows writes them: the same messages.
    assert jsonrpc.parse_lines(data.replace(b"\n", b"\r\n")) == jsonrpc.parse_lines(data)
    # One line in the middle that is not an object: the whole read goes line by line.
    assert jsonrpc.parse_lines(data + b"[]\n" + data) is None
    assert jsonrpc.parse_lines(data + b"\n" + data) is None


def test_parse_lines_refuses_the_depth_parse_refuses():
    # Nesting is bounded by the recursion limit, so by the stack's depth:
    # a line must meet it at the same depth whether it is parsed alone
    # (`parse`) or with the other lines of its read (`parse_lines`), called
    # from the same frame, as the stdio reader calls both.
    def line(depth):
        return b'{"a":' + b"[" * depth + b"]" * depth + b"}\n"

    accepted, refused = 1, 100_000  # bisected in this frame: a helper's frame would move the limit
    while refused - accepted > 1:
        depth = (accepted + refused) // 2
        try:
            jsonrpc.parse(line(depth))
        except InvalidMessage:
            refused = depth
        else:
            accepted = depth
    deepest = line(accepted)
    assert jsonrpc.parse_lines(b'{"x":1}\n' + deepest) == [{"x": 1}, jsonrpc.parse(deepest)]
    assert jsonrpc.parse_lines(b'{"x":1}\n' + line(refused)) is None  # left to `parse`, which refuses it
