"""Streamable HTTP request headers: the MCP 2026-07-28 mirroring rules.

This module owns the rules of the "Request Metadata" section of the
2026-07-28 Streamable HTTP transport (`basic/transports/streamable-http.mdx`)
and the `x-mcp-header` tool-schema extension (`server/tools.mdx`):

* which JSON-RPC body fields are mirrored into `Mcp-Method`, `Mcp-Name` and
  `MCP-Protocol-Version` (`standard_headers`);
* the Base64 sentinel encoding `=?base64?...?=` of header values
  (`encode_header_value` / `decode_header_value`);
* which tool parameters a tool's `inputSchema` designates with
  `x-mcp-header`, and whether the designation is valid (`header_params`);
* reading those parameters out of call arguments into `Mcp-Param-{Name}`
  headers (`param_headers`);
* which extra headers a user may add to requests (`check_user_headers`).

It must not know how requests are sent, which protocol revision is in use
(the transport decides whether to call it at all), or what a tool does: its
inputs are plain dicts, its outputs plain `dict[str, str]` of header names
to header values, ready to merge into a request.

How it works: the schema walk is done once per tool (at `tools/list` time)
and yields `HeaderParam`s, each the exact chain of `properties` keys leading
to an annotated property. A tool whose schema breaks any `x-mcp-header`
constraint raises `InvalidHeaderAnnotation`, and the spec tells the client to
leave that tool out of the list. At call time `param_headers` just follows
the recorded paths. The walk keeps its own stack rather than recursing, so
a schema nested thousands deep is walked like any other.

Errors: a malformed header value from the server raises `InvalidHeaderValue`
(an `mcp_sync.InvalidMessage`, and a `ValueError`); a tool schema breaking
a rule, `InvalidHeaderAnnotation` (a `ValueError`, which the client turns
into leaving the tool out).
"""

from __future__ import annotations

import functools
import re
import reprlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidMessage
from .meta import META_PROTOCOL_VERSION

__all__ = [
    "MAX_SAFE_INTEGER",
    "OWNED_HEADERS",
    "PARAM_HEADER_PREFIX",
    "SENTINEL_PREFIX",
    "SENTINEL_SUFFIX",
    "HeaderParam",
    "InvalidHeaderAnnotation",
    "InvalidHeaderValue",
    "check_user_headers",
    "decode_header_value",
    "encode_header_value",
    "header_params",
    "param_header_value",
    "param_headers",
    "standard_headers",
]

SENTINEL_PREFIX = "=?base64?"
SENTINEL_SUFFIX = "?="
#: Largest integer a header may carry: 2**53 - 1, the IEEE 754 double safe range.
MAX_SAFE_INTEGER = 2**53 - 1
PARAM_HEADER_PREFIX = "Mcp-Param-"

#: Headers the transport sets itself; users may not supply them (any case).
#: Every `Mcp-Param-*` header is refused as well.
OWNED_HEADERS: frozenset[str] = frozenset(
    name.lower()
    for name in (
        "Accept",
        "Accept-Encoding",  # `compress=` decides it, and the decoder must know what it asked for
        "Content-Type",
        "Content-Length",
        "Host",
        "Transfer-Encoding",
        "Connection",
        "MCP-Protocol-Version",
        "Mcp-Method",
        "Mcp-Name",
        "Mcp-Session-Id",
        "Last-Event-ID",
    )
)

# RFC 9110 section 5.6.2: token = 1*tchar.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# RFC 9110 section 5.5 field-value characters, as the MCP spec restricts them:
# visible ASCII, space and horizontal tab.
_PLAIN_CHARS = re.compile(r"[\x20-\x7e]*")  # what this client sends as is
_FIELD_VALUE_CHARS = re.compile(r"[\x20-\x7e\t]*")  # what RFC 9110 allows in a value
_METHODS_WITH_NAME = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri",
                      # The tasks extension routes a task's requests by its id.
                      "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId"}


# -- value encoding -------------------------------------------------------


class InvalidHeaderValue(InvalidMessage, ValueError):
    """A header value that is not well formed: characters no header may
    hold, or a Base64 sentinel value that does not decode to UTF-8 text.

    An `InvalidMessage` (the server sent it) and a `ValueError` (so
    callers that decode a value themselves catch what they expect).

        >>> decode_header_value("=?base64?not base64?=")
        Traceback (most recent call last):
        ...
        mcp_sync.protocol.headers.InvalidHeaderValue: malformed Base64 sentinel value '=?base64?not base64?=': Only base64 data is allowed
    """


def _is_plain_safe(value: str) -> bool:
    """Visible ASCII and SP only, with no leading or trailing space.

    RFC 9110 also allows HTAB inside a value, but intermediaries and parsers
    disagree about tabs (and the official conformance suite expects them
    encoded), so a value with a tab goes Base64: always safe, since servers
    must decode the sentinel form.
    """
    return _PLAIN_CHARS.fullmatch(value) is not None and value == value.strip(" ")


def _looks_like_sentinel(value: str) -> bool:
    return value.startswith(SENTINEL_PREFIX) and value.endswith(SENTINEL_SUFFIX)


def encode_header_value(value: str) -> str:
    """The header form of `value`: as is when safe, else the Base64 sentinel form.

    A value is sent as is when every character is visible ASCII (0x21-0x7E)
    or space, it neither starts nor ends with a space, and it does
    not match the sentinel pattern (starting with "=?base64?" and ending with
    "?="). Anything else becomes "=?base64?" + Base64(UTF-8 of value) + "?=".
    The empty string is sent as an empty header value (HTTP allows empty field
    values, and an empty value has nothing unsafe in it).

        >>> encode_header_value("us-west1")
        'us-west1'
        >>> encode_header_value("Hello, 世界")
        '=?base64?SGVsbG8sIOS4lueVjA==?='
    """
    if not isinstance(value, str):
        raise TypeError(f"header value must be a string, not {type(value).__name__}")
    if _is_plain_safe(value) and not _looks_like_sentinel(value):
        return value
    import base64  # here: it (and `struct`) would cost every `import mcp_sync`

    encoded = base64.b64encode(value.encode("utf-8")).decode("ascii")
    return SENTINEL_PREFIX + encoded + SENTINEL_SUFFIX


def decode_header_value(value: str) -> str:
    """The original value of a header produced by `encode_header_value`.

    A value matching the sentinel pattern is Base64-decoded (strictly: the
    standard alphabet with padding, and the bytes must be UTF-8); any other
    value is returned as is. Raises `InvalidHeaderValue` (a `ValueError`)
    for a malformed sentinel value or for characters no header value may
    contain (anything but visible ASCII, space and tab), whatever the text.
    """
    if not isinstance(value, str):
        raise TypeError(f"header value must be a string, not {type(value).__name__}")
    if _FIELD_VALUE_CHARS.fullmatch(value) is None:
        raise InvalidHeaderValue(f"header value {_show(value)} contains characters not allowed in a header")
    if not _looks_like_sentinel(value):
        return value
    if len(value) < len(SENTINEL_PREFIX) + len(SENTINEL_SUFFIX):
        raise InvalidHeaderValue(f"malformed Base64 sentinel value {_show(value)}")
    payload = value[len(SENTINEL_PREFIX) : -len(SENTINEL_SUFFIX)]
    import base64
    import binascii

    try:
        return base64.b64decode(payload, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise InvalidHeaderValue(f"malformed Base64 sentinel value {_show(value)}: {exc}") from None


# Values quoted in error messages: bounded in length and depth, whatever
# the server sent (a schema may put a list nested 900 deep where a header
# name belongs).
_short_repr = reprlib.Repr()
_short_repr.maxlevel = 3
_short_repr.maxstring = _short_repr.maxother = 100


def _show(value: object) -> str:
    return _short_repr.repr(value)


def param_header_value(value: object) -> str | None:
    """The encoded header value of a tool argument, or None to omit the header.

    Strings are used as is, booleans become "true"/"false", integers their
    decimal form (within +/-(2**53 - 1), else `ValueError`); the result is
    then encoded with `encode_header_value`. None (JSON null) means "omit".
    Any other type (floats included, even integral ones) raises `TypeError`:
    `x-mcp-header` may only annotate string, integer and boolean parameters.
    """
    if value is None:
        return None
    if isinstance(value, bool):  # before int: bool is a subclass of int
        return "true" if value else "false"
    if isinstance(value, int):
        if not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            raise ValueError(f"integer {value} is outside the safe range +/-(2**53 - 1) for a header")
        return str(value)
    if isinstance(value, str):
        return encode_header_value(value)
    raise TypeError(f"cannot put a {type(value).__name__} in a header: only str, int and bool")


# -- standard headers -----------------------------------------------------


def _plain_header(header: str, value: object) -> str:
    """A value for a header that does not allow the Base64 sentinel form."""
    if not isinstance(value, str) or not value or not _is_plain_safe(value):
        raise ValueError(f"{header} value {value!r} cannot be sent as an HTTP header")
    return value


# Every request over Streamable HTTP mirrors its method and name into
# headers, mostly the same few values: remembered (a bounded table, safe
# from any thread), a value is checked and encoded once, not per request.
# An invalid value raises each time (exceptions are not remembered).
_plain_header_cached = functools.lru_cache(maxsize=256)(_plain_header)
_encode_cached = functools.lru_cache(maxsize=1024)(encode_header_value)


def standard_headers(message: Mapping[str, Any]) -> dict[str, str]:
    """The headers mirrored from a JSON-RPC message body.

    `Mcp-Method` carries `method`; `Mcp-Name` carries `params.name` for
    `tools/call` and `prompts/get`, `params.uri` for `resources/read` and
    `params.taskId` for `tasks/get`, `tasks/update` and `tasks/cancel`
    (Base64-sentinel encoded when needed); `MCP-Protocol-Version` carries
    `params._meta["io.modelcontextprotocol/protocolVersion"]` when the body
    has it. A message without a `method` (a response) gets no headers.

    `Mcp-Method` and `MCP-Protocol-Version` have no encoded form, so a
    method or version that is not a plain header value raises `ValueError`,
    as does a `tools/call`, `prompts/get` or `resources/read` request
    without its string name or uri.
    """
    if "method" not in message:
        return {}
    method = message["method"]
    # (Only a str is remembered: anything else is refused, and may not hash.)
    headers = {"Mcp-Method": (_plain_header_cached if type(method) is str else _plain_header)("Mcp-Method", method)}
    params = message.get("params")
    if params is not None and not isinstance(params, Mapping):
        raise ValueError("params must be an object")
    source = _METHODS_WITH_NAME.get(method)
    if source is not None:
        name = params.get(source) if params is not None else None
        if not isinstance(name, str):
            raise ValueError(f"{method} request needs a string params.{source} for the Mcp-Name header")
        headers["Mcp-Name"] = _encode_cached(name)
    meta = params.get("_meta") if params is not None else None
    if isinstance(meta, Mapping) and META_PROTOCOL_VERSION in meta:
        version = meta[META_PROTOCOL_VERSION]
        headers["MCP-Protocol-Version"] = (_plain_header_cached if type(version) is str else _plain_header)(
            "MCP-Protocol-Version", version)
    return headers


# -- x-mcp-header ---------------------------------------------------------


class InvalidHeaderAnnotation(ValueError):
    """A tool's `inputSchema` breaks an `x-mcp-header` rule; the message says which.

    The spec has the client leave such a tool out of `tools/list` (and log a
    warning naming the tool and this reason).
    """


@dataclass(frozen=True)
class HeaderParam:
    """One annotated tool parameter: where it sits, and its header name part.

    `path` is the chain of `properties` keys from the schema root to the
    property; the header is `Mcp-Param-{name}`.
    """

    path: tuple[str, ...]
    name: str

    @property
    def header(self) -> str:
        return PARAM_HEADER_PREFIX + self.name


_ANNOTATION = "x-mcp-header"
_PRIMITIVE_TYPES = frozenset({"string", "integer", "boolean"})
# Keywords whose value is instance data, not schemas: never searched.
_DATA_KEYWORDS = frozenset({"const", "enum", "default", "examples"})
# Keywords whose value maps names (not keywords) to subschemas.
_SCHEMA_MAP_KEYWORDS = frozenset(
    {"patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"}
)


def _where(path: tuple[str, ...]) -> str:
    return "/" + "/".join(path) if path else "the schema root"


def _check_name(name: object, location: str) -> str:
    if not isinstance(name, str):
        raise InvalidHeaderAnnotation(f"x-mcp-header at {location} is not a string: {_show(name)}")
    if not name:
        raise InvalidHeaderAnnotation(f"x-mcp-header at {location} is empty")
    if any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in name):
        raise InvalidHeaderAnnotation(f"x-mcp-header {name!r} at {location} contains control characters")
    if _TOKEN.fullmatch(name) is None:
        raise InvalidHeaderAnnotation(
            f"x-mcp-header {name!r} at {location} is not an HTTP token (RFC 9110 1*tchar)"
        )
    return name


def _check_type(schema: Mapping[str, Any], location: str) -> None:
    """The annotated property must be exactly one primitive type, optionally nullable."""
    if "type" not in schema:
        raise InvalidHeaderAnnotation(
            f"x-mcp-header at {location} is on a property without a 'type' (need string, integer or boolean)"
        )
    declared = schema["type"]
    types = [declared] if isinstance(declared, str) else declared
    if not isinstance(types, list) or not all(isinstance(t, str) for t in types) or len(set(types)) != len(types):
        raise InvalidHeaderAnnotation(f"x-mcp-header at {location}: malformed 'type' {_show(declared)}")
    non_null = [t for t in types if t != "null"]
    if len(non_null) != 1 or non_null[0] not in _PRIMITIVE_TYPES:
        raise InvalidHeaderAnnotation(
            f"x-mcp-header at {location} is on a property of type {_show(declared)};"
            " only string, integer or boolean (optionally with null) are allowed"
        )


def header_params(input_schema: Mapping[str, Any] | None) -> tuple[HeaderParam, ...]:
    """Every `x-mcp-header` annotation of a tool's `inputSchema`, validated.

    Returns one `HeaderParam` per annotation, in schema order. Raises
    `InvalidHeaderAnnotation` naming the first broken rule:

    * the value is not a string, is empty, contains control characters, or
      is not an RFC 9110 token (ALPHA, DIGIT and ``!#$%&'*+-.^_`|~``);
    * two values are equal ignoring case;
    * the annotated property's `type` is not exactly one of "string",
      "integer", "boolean" -- a list such as ["string", "null"] is accepted
      (null values are omitted at call time), "number", "object", "array",
      two primitives, or no `type` at all are refused (a schema without a
      type cannot be shown to hold a primitive);
    * the annotation is not statically reachable: it must sit in a subschema
      reached from the root through `properties` keys only. One found
      anywhere else -- under `items`, `prefixItems`, `additionalProperties`,
      `patternProperties`, `oneOf`/`anyOf`/`allOf`/`not`,
      `if`/`then`/`else`, `$defs`/`definitions` (where `$ref` targets live),
      `dependentSchemas`, `contains`, unknown keywords holding objects, or on
      the root schema itself -- is invalid. The data keywords `const`,
      `enum`, `default` and `examples` hold instance values, not schemas,
      and are not searched.

    A None or non-object schema has no annotations.
    """
    if not isinstance(input_schema, Mapping):
        return ()
    if not _mentions_annotation(input_schema):
        return ()  # the common case, found without the checking walk
    found = _annotations(input_schema)
    seen: dict[str, HeaderParam] = {}
    for param in found:
        other = seen.get(param.name.lower())
        if other is not None:
            raise InvalidHeaderAnnotation(
                f"x-mcp-header {param.name!r} at {_where(param.path)} duplicates"
                f" {other.name!r} at {_where(other.path)} (header names ignore case)"
            )
        seen[param.name.lower()] = param
    return tuple(found)


def _mentions_annotation(item: Any, budget: int = 128) -> bool:
    """Whether any object inside `item` has an `x-mcp-header` key at all,
    even where it would not count (under `default`, say): a quick walk
    that lets most schemas skip `_annotations`, whose bookkeeping costs
    several times more (listing 10,000 tools over HTTP checks every
    schema). It recurses at most `budget` deep and answers True past that,
    leaving a deeper schema to the full walk."""
    if isinstance(item, Mapping):
        if _ANNOTATION in item:
            return True
        children: Any = item.values()
    elif isinstance(item, (list, tuple)):
        children = item
    else:
        return False
    if budget <= 0:
        return True
    for child in children:
        kind = type(child)
        if kind is str or kind is int or kind is bool or kind is float or child is None:
            continue  # the common scalars, without the slow ABC check
        if _mentions_annotation(child, budget - 1):
            return True
    return False


# One value still to visit: the value, its chain of `properties` keys, whether
# it is reached from the root by `properties` only, and the keyword it was
# found under when not.
_Visit = tuple[object, tuple[str, ...], bool, str]


def _annotations(root: Mapping[str, Any]) -> list[HeaderParam]:
    """Every annotation under `root`, in schema order (depth first, as
    written); raises `InvalidHeaderAnnotation` at the first broken rule.

    An explicit stack, not recursion: the schema comes from the server, and
    its depth must not decide whether the client can read it.
    """
    found: list[HeaderParam] = []
    stack: list[_Visit] = [(root, (), True, "")]
    while stack:
        value, path, reachable, via = stack.pop()
        if isinstance(value, list):
            # Items of a list are never statically reachable.
            stack.extend((item, (), False, via) for item in reversed(value))
        elif isinstance(value, Mapping):
            if _ANNOTATION in value:
                found.append(_annotation(value, path, reachable, via))
            stack.extend(reversed(_children(value, path, reachable, via)))
    return found


def _annotation(schema: Mapping[str, Any], path: tuple[str, ...], reachable: bool, via: str) -> HeaderParam:
    """The annotation on one subschema, checked."""
    if not reachable:
        raise InvalidHeaderAnnotation(
            f"x-mcp-header {_show(schema[_ANNOTATION])} is not statically reachable: found under {via!r}"
            f" (only chains of 'properties' are allowed)"
        )
    if not path:
        raise InvalidHeaderAnnotation("x-mcp-header on the schema root: it must annotate a property")
    location = _where(path)
    name = _check_name(schema[_ANNOTATION], location)
    _check_type(schema, location)
    return HeaderParam(path=path, name=name)


def _children(schema: Mapping[str, Any], path: tuple[str, ...], reachable: bool, via: str) -> list[_Visit]:
    """The values inside one subschema that may hold annotations, in order."""
    children: list[_Visit] = []
    for keyword, value in schema.items():
        if keyword == _ANNOTATION or keyword in _DATA_KEYWORDS:
            continue
        if keyword == "properties" and isinstance(value, Mapping):
            for prop, sub in value.items():
                if isinstance(sub, Mapping):
                    children.append((sub, path + (str(prop),), reachable, via))
                else:
                    children.append((sub, (), False, via or "properties"))
        elif keyword in _SCHEMA_MAP_KEYWORDS and isinstance(value, Mapping):
            children.extend((sub, (), False, keyword) for sub in value.values())
        else:
            children.append((value, (), False, keyword))
    return children


def param_headers(params: Sequence[HeaderParam], arguments: Mapping[str, Any] | None) -> dict[str, str]:
    """The `Mcp-Param-*` headers for one `tools/call`.

    For each parameter the value is read at its exact path in `arguments`;
    when any step is missing (or not an object), or the value is null, the
    header is omitted. Values are converted and encoded by
    `param_header_value`: `TypeError` for a value of the wrong kind,
    `ValueError` for an integer outside +/-(2**53 - 1).
    """
    headers: dict[str, str] = {}
    for param in params:
        value: Any = arguments
        for key in param.path:
            if not isinstance(value, Mapping) or key not in value:
                value = None
                break
            value = value[key]
        try:
            encoded = param_header_value(value)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"argument {'.'.join(param.path)} for header {param.header}: {exc}") from None
        if encoded is not None:
            headers[param.header] = encoded
    return headers


# -- user headers ---------------------------------------------------------


def check_user_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Validate extra HTTP headers supplied by the user; return a plain copy.

    Names must be RFC 9110 tokens and unique ignoring case; values must be
    strings without CR, LF or NUL (`TypeError` for non-strings, `ValueError`
    otherwise, naming the header). Headers the transport owns are refused
    whatever their case: Accept, Accept-Encoding, Content-Type, Content-Length, Host,
    Transfer-Encoding, Connection, MCP-Protocol-Version, Mcp-Method,
    Mcp-Name, Mcp-Session-Id, Last-Event-ID, and every `Mcp-Param-*`.
    """
    if not isinstance(headers, Mapping):
        raise TypeError(f"headers must be a mapping of names to values, not {type(headers).__name__}")
    out: dict[str, str] = {}
    seen: set[str] = set()
    for name, value in headers.items():
        if not isinstance(name, str):
            raise TypeError(f"header name must be a string, not {type(name).__name__}")
        if _TOKEN.fullmatch(name) is None:
            raise ValueError(f"invalid header name {name!r}: not an HTTP token")
        lower = name.lower()
        if lower in OWNED_HEADERS or lower.startswith(PARAM_HEADER_PREFIX.lower()):
            raise ValueError(f"header {name!r} is set by the transport and cannot be supplied")
        if lower in seen:
            raise ValueError(f"header {name!r} given twice (header names ignore case)")
        seen.add(lower)
        if not isinstance(value, str):
            raise TypeError(f"value of header {name!r} must be a string, not {type(value).__name__}")
        if any(c in value for c in "\r\n\0"):
            raise ValueError(f"value of header {name!r} contains CR, LF or NUL")
        out[name] = value
    return out
