"""JSON-RPC 2.0 framing: build, encode, decode and classify messages.

This module knows the shape of JSON-RPC messages and nothing of MCP methods.
`decode` turns bytes into a dict or raises `InvalidMessage`; `parse` is the
same for what a server sends, where a JSON-RPC batch (an array) is allowed
too; `classify` says which of the four kinds a decoded dict is, so the
engine can route it without looking inside.

Batches: revision 2025-03-26 says implementations MUST support receiving
them (a server may batch its responses, notifications and requests);
2024-11-05 frames every message as JSON-RPC 2.0, which defines them;
2025-06-18 removed them. The client accepts a batch whatever the revision
(the first messages arrive before any version is settled, and an array's
meaning is never in doubt): `parse` returns it as a list, whose items the
engine routes one by one (`Connection.deliver`). It never sends one: the
answers to a batch's requests go out one by one, which 2025-03-26 allows
(implementations MAY send batches; only receiving them is a MUST).
"""

from __future__ import annotations

import enum
import json
import reprlib
import threading
from collections.abc import Callable, Mapping, Sequence
from json.scanner import make_scanner
from operator import itemgetter
from typing import Any

from ..errors import InvalidMessage
from . import codes

JSONRPC = "2.0"
"""The `jsonrpc` member every message carries, and `classify` requires."""

# Compact separators: messages go on the wire once, and stdio forbids newlines.
_encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
# For text UTF-8 cannot carry (a lone surrogate, which a server may send as
# "\ud800"): escaped, it goes back exactly as it came.
_ascii_encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True, allow_nan=False)
# What `_encoder.encode()` does for a message, with the C encoder it makes
# for each call made once per thread (that is most of its cost on a small
# message): the same output and errors. Per thread because of `markers`, the
# ids of the containers being encoded, which find a circle ("Circular
# reference detected", `ValueError`): another thread's would be other ids.
# A failure leaves its ids behind, so they are cleared after one. Without a
# C encoder (not CPython), `_encoder` itself.
_c_make_encoder = getattr(json.encoder, "c_make_encoder", None)
_thread_encoders = threading.local()


def unencodable(value: Any) -> str | None:
    """Why `value` cannot go on the wire as JSON (NaN or an infinity, a
    circle, a type JSON has no form for, nesting too deep), or None when
    it can. It encodes `value` once: for answers the client builds from
    user code (a handler's), not for every message.

        >>> unencodable({"x": 1.5}), unencodable({"x": float("nan")}).startswith("Out of range float values")
        (None, True)
    """
    try:
        _ascii_encoder.encode(value)
    except (ValueError, TypeError, RecursionError) as exc:
        return str(exc) or type(exc).__name__
    return None


def _thread_encoder() -> tuple[dict[int, Any], Callable[[Any, int], Sequence[str]]]:
    """This thread's (markers, C encoder), made at its first message."""
    markers: dict[int, Any] = {}
    made = _c_make_encoder(markers, _encoder.default, json.encoder.encode_basestring,  # type: ignore[misc]
                           None, ":", ",", False, False, False)
    _thread_encoders.pair = pair = (markers, made)
    return pair


# The scanner of a default `JSONDecoder` (C in CPython), as it makes its
# own: one value at an index, as `(value, end)`, StopIteration when no value
# starts there. Called directly (not through `JSONDecoder.raw_decode`, a
# Python frame around it): a line parsed alone and one parsed with the
# others of its read then meet the recursion limit at the same depth.
_scan = make_scanner(json.JSONDecoder())  # type: ignore[arg-type]  # (typeshed: a context with the decoder's settings)
_value_of, _end_of = itemgetter(0), itemgetter(1)


def _scan_from_start(text: str) -> tuple[Any, int]:
    """`JSONDecoder().raw_decode(text)`, for text that starts with `{`."""
    try:
        return _scan(text, 0)
    except StopIteration as stop:  # a nested value missing: raw_decode's error
        raise json.JSONDecodeError("Expecting value", text, stop.value) from None


def _loads_line(data: bytes | str) -> Any:
    """`json.loads`, with its cheapest way for a line as servers write them:
    UTF-8 bytes starting with the value. `json.loads` on bytes first guesses
    the encoding, then matches the leading and trailing whitespace with
    regular expressions: a tenth of the cost of a small message. Anything
    else (a BOM, another encoding, leading blanks, a str) goes to
    `json.loads` itself, so what is accepted, and every error, is the same."""
    # `{` then NUL would be UTF-16 or UTF-32 to `json.loads`: its way.
    if type(data) is bytes and data[:1] == b"{" and data[1:2] != b"\x00":
        text = data.decode("utf-8", "surrogatepass")  # as json.loads decodes UTF-8
        value, end = _scan_from_start(text)
        if end == len(text) or not text[end:].strip(" \t\n\r"):  # json's own whitespace
            return value
    return json.loads(data)


# The parser, by name so tests can stand in for it.
_loads = _loads_line
# What a malformed message can make the parser raise: nesting deeper than
# the interpreter's recursion limit (RecursionError), bytes that are not
# text (UnicodeError, a ValueError), a number too long to convert
# (ValueError), and OverflowError for good measure. All are the server's
# fault, so all become InvalidMessage; nothing else is caught.
_PARSE_ERRORS = (ValueError, RecursionError, OverflowError)

MAX_BATCH_ITEMS = 1000
"""The most messages one inbound batch may hold. The byte limits of each
transport bound a batch as they bound any message (it is one line, body
or event); this bounds the count, since this client never sends a batch:
a server's batch holds only what it would otherwise have sent one by one
around the same moment (answers, progress), never thousands."""

# Previews of a decoded message in error messages: bounded in size and in
# depth, so a huge or deeply nested message costs little and cannot recurse.
_preview_repr = reprlib.Repr()
_preview_repr.maxlevel = 4
_preview_repr.maxdict = _preview_repr.maxlist = 8
_preview_repr.maxstring = _preview_repr.maxother = 80


class Kind(enum.Enum):
    """The four kinds of JSON-RPC message, as `classify` tells them apart."""

    REQUEST = "request"
    """A request: a string `method` and an `id`; it expects an answer."""
    NOTIFICATION = "notification"
    """A notification: a string `method` and no `id`; it gets no answer."""
    RESPONSE = "response"
    """A successful response: a `result` and a string or integer `id`."""
    ERROR = "error"
    """An error response: an `error` and no `result` (its `id` may be null,
    when the peer could not read the request's)."""


def request(request_id: int | str, method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
    """A request message; `params` left out when None.

    >>> request(1, "tools/list", {})
    {'jsonrpc': '2.0', 'id': 1, 'method': 'tools/list', 'params': {}}

    Args:
        request_id: The request's id, a string or an integer.
        method: The method, such as ``"tools/call"``.
        params: Its params, or None for none.

    Returns:
        The message, ready for `encode()`.
    """
    message: dict[str, Any] = {"jsonrpc": JSONRPC, "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def notification(method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A notification message (no `id`); `params` left out when None.

    >>> notification("notifications/initialized")
    {'jsonrpc': '2.0', 'method': 'notifications/initialized'}

    Args:
        method: The method, such as ``"notifications/progress"``.
        params: Its params, or None for none.

    Returns:
        The message, ready for `encode()`.
    """
    message: dict[str, Any] = {"jsonrpc": JSONRPC, "method": method}
    if params is not None:
        message["params"] = params
    return message


def result_response(request_id: Any, result: Mapping[str, Any]) -> dict[str, Any]:
    """The successful response to the request with id `request_id`.

    Args:
        request_id: The id of the request answered, as it came.
        result: The result.

    Returns:
        The message, ready for `encode()`.
    """
    return {"jsonrpc": JSONRPC, "id": request_id, "result": result}


def error_response(request_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    """The error response to the request with id `request_id`; the error's
    `data` is left out when None.

    >>> error_response(7, -32601, "Method not found")
    {'jsonrpc': '2.0', 'id': 7, 'error': {'code': -32601, 'message': 'Method not found'}}

    Args:
        request_id: The id of the request answered, as it came (None when
            it could not be read).
        code: The JSON-RPC error code.
        message: The error's message.
        data: The error's `data`, or None for none.

    Returns:
        The message, ready for `encode()`.
    """
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": JSONRPC, "id": request_id, "error": error}


class Refusal(Exception):
    """Raised by this client's answerer of a server request to answer it
    with a JSON-RPC error: a local decision (a method it does not handle,
    params it cannot take), never an error the peer sent, so not a
    `ServerError`. Caught where the answer is written; never leaves the
    engine.

    >>> Refusal(-32601, "Method not found").error()
    {'code': -32601, 'message': 'Method not found'}
    """

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data

    def error(self) -> dict[str, Any]:
        """The JSON-RPC error object that says it."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


def encode(message: Mapping[str, Any]) -> bytes:
    """One message as compact UTF-8 JSON, without a line end.

    A string holding a lone surrogate (UTF-8 has no form for one; a server
    may send one as a JSON escape, in a cursor say) makes the whole message
    ASCII with escapes, which every JSON parser reads back to the same text.

    Args:
        message: One JSON-RPC message.

    Returns:
        The UTF-8 bytes.
    """
    if _c_make_encoder is None:
        text = _encoder.encode(message)
    else:
        markers, encoder = getattr(_thread_encoders, "pair", None) or _thread_encoder()
        try:
            text = "".join(encoder(message, 0))
        except BaseException:
            markers.clear()  # what the failure left (see `_thread_encoders`)
            raise
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _ascii_encoder.encode(message).encode("ascii")


def decode(data: bytes | str) -> dict[str, Any]:
    """Parse one message; anything but a JSON object raises `InvalidMessage`.

    Whatever the bytes (garbage, invalid UTF-8, nesting 100,000 deep, a
    number of 10,000 digits), `InvalidMessage` is the only error.

    Args:
        data: One message's JSON text.

    Returns:
        The message.

    Raises:
        InvalidMessage: Not JSON, or not a JSON object.
    """
    try:
        value = _loads(data)
    except _PARSE_ERRORS as exc:
        raise InvalidMessage(f"not JSON: {_preview(data)} ({_reason(exc)})") from None
    if not isinstance(value, dict):
        raise InvalidMessage(f"not a JSON-RPC message (a JSON {type(value).__name__}): {_preview(data)}")
    return value


def parse(data: bytes | str) -> dict[str, Any] | list[Any]:
    """Parse what a server sent: one message (a dict) or a batch (a list).

    A batch is returned as the list it is, items unchecked: each is routed
    (or reported invalid) on its own, so one bad item costs none of the
    others. An empty batch, or one of more than `MAX_BATCH_ITEMS` items,
    raises `InvalidMessage`, as does anything that is neither an object nor
    an array (see `decode`).

    Example::

        >>> parse(b'[{"jsonrpc":"2.0","method":"notifications/progress"}]')
        [{'jsonrpc': '2.0', 'method': 'notifications/progress'}]

    Args:
        data: What the server sent, as JSON text.

    Returns:
        One message, or a batch's list of items.

    Raises:
        InvalidMessage: Not JSON, neither an object nor an array, or an
            empty or too large batch.
    """
    try:
        if _loads is _loads_line and type(data) is bytes and data[:1] == b"{" and data[1:2] != b"\x00":
            # `_loads_line`'s first case, in this frame: every message a
            # server sends passes here.
            text = data.decode("utf-8", "surrogatepass")
            try:  # (`_scan_from_start`, in this frame: see `_scan`)
                value, end = _scan(text, 0)
            except StopIteration as stop:
                raise json.JSONDecodeError("Expecting value", text, stop.value) from None
            if end != len(text) and text[end:].strip(" \t\n\r"):
                value = json.loads(data)  # what follows the value is not whitespace: json's own error
        else:
            value = _loads(data)
    except _PARSE_ERRORS as exc:
        raise InvalidMessage(f"not JSON: {_preview(data)} ({_reason(exc)})") from None
    if type(value) is dict:
        return value
    if isinstance(value, list):
        check_batch(value)
        return value
    raise InvalidMessage(f"not a JSON-RPC message (a JSON {type(value).__name__}): {_preview(data)}")


def parse_lines(data: bytes) -> list[dict[str, Any]] | None:
    """The messages of whole lines read together (stdio), each line a JSON
    object, parsed in one pass: or None when any line is something else
    (an error, a batch, a blank line, blanks around the value other than a
    CRLF's CR, another encoding), for the caller to `parse` each line
    instead, which gives the exact result and error. What is accepted is
    what `parse` accepts line by line; only the per-line Python work goes
    (a flood's reads bring hundreds of lines: 3.3 µs a line becomes 1.9 µs).

    Example::

        >>> parse_lines(b'{"jsonrpc":"2.0","id":1,"result":{}}\\n{"jsonrpc":"2.0","method":"m"}\\n')
        [{'jsonrpc': '2.0', 'id': 1, 'result': {}}, {'jsonrpc': '2.0', 'method': 'm'}]
        >>> parse_lines(b'{"jsonrpc":"2.0","method":"m"} x\\n') is None
        True

    Args:
        data: One or more whole lines: it ends with its last line's `\\n`.

    Returns:
        One dict per line, in order; None to parse them one by one.
    """
    if _loads is not _loads_line:
        return None  # a stand-in parser (tests) sees every line itself
    try:
        text = data.decode("utf-8", "surrogatepass")  # as `parse` decodes each line
        if "\r" in text:
            # Lines ended by CRLF: the CR is blank space after the value to
            # `parse`; here it would end the scan before the line's end.
            text = text.replace("\r\n", "\n")
        # (Split whole, the empty end after the last newline taken off: a
        # slice of `text` would copy it, and one read may hold a 10 MB line.)
        lines = text.split("\n")
        lines.pop()
        del text  # the lines hold it all now: not a third copy while values are built
        # Each line scanned from its start. A line that does not start with
        # a value raises StopIteration, which ends `map` early: fewer
        # values than lines (below); a malformed one raises an error.
        scanned = list(map(_scan, lines, [0] * len(lines)))
    except _PARSE_ERRORS:
        return None
    # One value per line, each ending its line exactly (no blanks, nothing
    # more), and each an object.
    if list(map(_end_of, scanned)) != list(map(len, lines)):
        return None
    values = list(map(_value_of, scanned))
    if set(map(type, values)) != {dict}:
        return None
    return values


def check_batch(batch: list[Any]) -> None:
    """`InvalidMessage` for a batch no item of which may be routed: an empty
    one (JSON-RPC 2.0 calls `[]` invalid) or one over `MAX_BATCH_ITEMS`.

    Args:
        batch: The batch's items.

    Raises:
        InvalidMessage: The batch is empty or too large.
    """
    if not batch:
        raise InvalidMessage("an empty JSON-RPC batch ([]), which JSON-RPC 2.0 calls invalid")
    if len(batch) > MAX_BATCH_ITEMS:
        raise InvalidMessage(f"a JSON-RPC batch of {len(batch)} messages; at most {MAX_BATCH_ITEMS} are accepted")


def classify(message: Mapping[str, Any]) -> Kind:
    """Which kind of JSON-RPC message this is; `InvalidMessage` if none.

    A batch is split before this (`parse`); its items come here one by one.

    Args:
        message: One decoded message.

    Returns:
        Its kind: a request, a notification, a response or an error.

    Raises:
        InvalidMessage: It is none of these. A request or notification
            whose method or params is malformed is one of these too;
            `request_flaw` tells it from a message that is not JSON-RPC.
    """
    if message.get("jsonrpc") != JSONRPC:
        raise InvalidMessage(f"not JSON-RPC 2.0: {_preview(message)}")
    method = message.get("method")
    if method is not None:
        if not isinstance(method, str):
            raise InvalidMessage(f"method is not a string: {_preview(message)}")
        if "params" in message and not isinstance(message["params"], dict):
            raise InvalidMessage(f"params is not an object: {_preview(message)}")
        return Kind.REQUEST if "id" in message else Kind.NOTIFICATION
    if "result" in message:
        if not is_valid_id(message.get("id")):
            raise InvalidMessage(f"response without a valid id: {_preview(message)}")
        return Kind.RESPONSE
    if "error" in message:
        return Kind.ERROR
    raise InvalidMessage(f"neither request, notification nor response: {_preview(message)}")


def request_flaw(message: Mapping[str, Any]) -> Refusal | None:
    """Why `message`, a JSON-RPC 2.0 request or notification by its shape,
    is not a valid one, as the error that answers it; None when it is
    valid, or not shaped as one (then `classify` alone says what it is).

    Shaped as a request or notification: `"jsonrpc": "2.0"`, a `method`
    member that is not null, and neither `result` nor `error`. A message
    with either of those may be a response, whose id names a request of
    the receiver's own: an error sent back under that id would answer the
    wrong request, so it is left to `classify` (not JSON-RPC).

    The flaws, checked in this order: a method that is not a string
    (JSON-RPC 2.0's Invalid Request, `codes.INVALID_REQUEST`: there is no
    method whose params could be judged), then params that are not an
    object (MCP requires an object, and JSON-RPC 2.0 calls refused params
    Invalid params, `codes.INVALID_PARAMS`). An id is not looked at: the
    caller decides whether there is anyone to answer.

        >>> request_flaw({"jsonrpc": "2.0", "id": 7, "method": "roots/list", "params": [1]}).error()
        {'code': -32602, 'message': 'Invalid params: params must be an object, not an array'}
        >>> request_flaw({"jsonrpc": "2.0", "id": 7, "method": 5}).error()
        {'code': -32600, 'message': 'Invalid Request: method must be a string, not a number'}
        >>> request_flaw({"jsonrpc": "2.0", "id": 7, "params": {}}) is None  # no method: not a request
        True

    Args:
        message: One decoded message.

    Returns:
        The refusal to answer it with, or None.
    """
    if (message.get("jsonrpc") != JSONRPC or message.get("method") is None
            or "result" in message or "error" in message):
        return None
    method = message["method"]
    if not isinstance(method, str):
        return Refusal(codes.INVALID_REQUEST, f"Invalid Request: method must be a string, not {_json_type(method)}")
    if "params" in message and not isinstance(message["params"], dict):
        return Refusal(codes.INVALID_PARAMS,
                       f"Invalid params: params must be an object, not {_json_type(message['params'])}")
    return None


#: What JSON calls each decoded type, with its article.
_JSON_TYPES = {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "an array",
               dict: "an object", type(None): "null"}


def _json_type(value: Any) -> str:
    return _JSON_TYPES.get(type(value), f"a {type(value).__name__}")


def is_valid_id(value: Any) -> bool:
    """Whether `value` may be a request id here: a string or an integer (not
    a bool, not a float, not null).

    Args:
        value: The `id` member as received.

    Returns:
        Whether it is a usable request id.
    """
    return (isinstance(value, int) and not isinstance(value, bool)) or isinstance(value, str)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return str(exc)[:200]


def _preview(data: Any, limit: int = 200) -> str:
    if isinstance(data, (str, bytes, bytearray)):
        # Only the head is decoded: a preview of 16 MB costs no more than one of 200 bytes.
        head = data[: limit + 1]
        text = head if isinstance(head, str) else bytes(head).decode("utf-8", "replace")
        text = text.rstrip("\r\n")
        return text if len(text) <= limit else text[:limit] + f"... ({len(data)} {'chars' if isinstance(data, str) else 'bytes'})"
    return _preview_repr.repr(data)[:limit]
