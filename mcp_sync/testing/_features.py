"""What a test server offers: tool, resource, template, prompt and completion entries.

This module owns the registered definitions and the protocol-independent
work around them: the wire form of each definition (`describe()`), checking
tool arguments against the simple subset of JSON Schema the server enforces
(required keys and primitive `type`s of top-level properties, filling in
top-level `default`s), turning a tool function's return value into a
`CallToolResult` body, matching `{var}` URI templates, and the opaque
pagination cursors. Everything here is plain data and functions; the
handlers in `_handlers` and the session in `_session` decide what to call
and how errors reach the wire.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from ._protocol import json_problem

JSONDict = dict[str, Any]

_log = logging.getLogger("mcp_sync.testing")

#: JSON Schema primitive type -> check of a decoded JSON value.
_TYPE_CHECKS: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool))
    or (isinstance(v, float) and v.is_integer()),
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "null": lambda v: v is None,
}


class ArgumentError(ValueError):
    """Tool or prompt arguments that do not fit the declared shape."""


@dataclass
class ToolDef:
    name: str
    fn: Callable[..., Any]
    description: str | None
    input_schema: JSONDict
    output_schema: JSONDict | None
    annotations: JSONDict | None
    title: str | None

    def describe(self) -> JSONDict:
        out: JSONDict = {"name": self.name}
        if self.title is not None:
            out["title"] = self.title
        if self.description is not None:
            out["description"] = self.description
        out["inputSchema"] = self.input_schema
        if self.output_schema is not None:
            out["outputSchema"] = self.output_schema
        if self.annotations is not None:
            out["annotations"] = self.annotations
        return out

    def check_arguments(self, arguments: JSONDict) -> JSONDict:
        """The arguments with top-level defaults filled in; ArgumentError if
        a required key is missing or a declared primitive type is wrong."""
        schema = self.input_schema
        properties = schema.get("properties")
        if not isinstance(properties, dict):
            properties = {}
        required = schema.get("required")
        for key in required if isinstance(required, list) else []:
            if isinstance(key, str) and key not in arguments:  # (a name that is not a string names nothing)
                raise ArgumentError(f"Missing required property '{key}'")
        checked = dict(arguments)
        for key, prop in properties.items():
            if not isinstance(prop, dict):
                continue
            if key not in checked:
                if "default" in prop:
                    checked[key] = prop["default"]
                continue
            declared = prop.get("type")
            types = [declared] if isinstance(declared, str) else declared
            if isinstance(types, list):
                known = [t for t in types if t in _TYPE_CHECKS]
                if known and not any(_TYPE_CHECKS[t](checked[key]) for t in known):
                    raise ArgumentError(
                        f"Property '{key}' must be of type {' or '.join(known)}, "
                        f"got {_json_type(checked[key])}"
                    )
        if schema.get("additionalProperties") is False:
            patterns = schema.get("patternProperties")
            extra = sorted(key for key in set(checked) - set(properties)
                           if not (isinstance(patterns, dict) and any(_matches(p, key) for p in patterns)))
            if extra:
                raise ArgumentError(f"Unexpected properties: {', '.join(extra)}")
        return checked

    def result_from(self, value: Any) -> JSONDict:
        """A CallToolResult body (without resultType/_meta) from a return value."""
        if isinstance(value, str):
            return {"content": [text_content(value)]}
        if isinstance(value, dict) and "content" in value:
            result = dict(value)
            content = result["content"]
            if isinstance(content, list):
                result["content"] = [_content_block(item) for item in content]
            return result
        if isinstance(value, list):
            return {"content": [_content_block(item) for item in value]}
        if value is None:
            return {"content": []}
        # Structured output: a plain dict (or any other JSON value), mirrored
        # as JSON text for clients that only read content.
        return {
            "content": [text_content(json.dumps(value, ensure_ascii=False))],
            "structuredContent": value,
        }

    def answer(self, value: Any) -> JSONDict:
        """The CallToolResult body for a return value, as `result_from`, or
        an `isError` result when it is not one a client can receive: a value
        JSON cannot encode (a datetime in `structuredContent`) is named
        here, with where it is, rather than dropped by the transport that
        fails to write it."""
        try:
            result = self.result_from(value)
        except (TypeError, ValueError, RecursionError) as exc:  # not a content block; a value JSON has no form for
            problem = json_problem(value)
            return failure_result(exc if problem is None else _unencodable(self.name, problem))
        problem = json_problem(result)
        return result if problem is None else failure_result(_unencodable(self.name, problem))


def _unencodable(tool: str, problem: str) -> TypeError:
    # A warning as well as the isError result: the server's side of a stdio
    # or HTTP test sees it too (`serve_stdio` shows warnings on stderr).
    _log.warning("the result of tool %s cannot be encoded as JSON: %s", tool, problem)
    return TypeError(f"the result of tool {tool} cannot be encoded as JSON: {problem}; "
                     "return JSON values only (str, int, float, bool, None, list, dict)")


def failure_result(exc: BaseException) -> JSONDict:
    """The `isError` CallToolResult body of a tool that raised `exc`: its message as text."""
    return {"content": [text_content(str(exc) or type(exc).__name__)], "isError": True}


@dataclass
class ResourceDef:
    uri: str
    name: str
    fn: Callable[..., str | bytes]
    mime_type: str | None
    description: str | None
    title: str | None
    with_context: bool = False

    def describe(self) -> JSONDict:
        return _describe_resource({"uri": self.uri}, self.name, self.title, self.description, self.mime_type)


@dataclass
class TemplateDef:
    uri_template: str
    name: str
    fn: Callable[..., str | bytes | None]
    mime_type: str | None
    description: str | None
    title: str | None
    with_context: bool = False
    pattern: re.Pattern[str] = field(init=False)
    variables: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        self.pattern, self.variables = compile_template(self.uri_template)

    def describe(self) -> JSONDict:
        return _describe_resource(
            {"uriTemplate": self.uri_template}, self.name, self.title, self.description, self.mime_type
        )

    def match(self, uri: str) -> dict[str, str] | None:
        found = self.pattern.fullmatch(uri)
        if found is None:
            return None
        return {key: urllib.parse.unquote(value) for key, value in found.groupdict().items()}


@dataclass
class PromptDef:
    name: str
    fn: Callable[..., Any]
    description: str | None
    arguments: list[JSONDict]
    title: str | None
    with_context: bool = False

    def describe(self) -> JSONDict:
        out: JSONDict = {"name": self.name}
        if self.title is not None:
            out["title"] = self.title
        if self.description is not None:
            out["description"] = self.description
        if self.arguments:
            out["arguments"] = [dict(arg) for arg in self.arguments]
        return out

    def check_arguments(self, arguments: JSONDict) -> dict[str, str]:
        for key, value in arguments.items():
            if not isinstance(value, str):
                raise ArgumentError(f"Argument '{key}' must be a string")
        for arg in self.arguments:
            if arg.get("required") and arg["name"] not in arguments:
                raise ArgumentError(f"Missing required argument '{arg['name']}'")
        return dict(arguments)

    def messages_from(self, value: Any) -> list[JSONDict]:
        if isinstance(value, str):
            return [{"role": "user", "content": text_content(value)}]
        if isinstance(value, list):
            messages: list[JSONDict] = []
            for item in value:
                if isinstance(item, str):
                    messages.append({"role": "user", "content": text_content(item)})
                elif isinstance(item, dict) and "role" in item and "content" in item:
                    messages.append({"role": item["role"], "content": _content_block(item["content"])})
                else:
                    raise TypeError(f"prompt {self.name!r} returned an invalid message: {item!r}")
            return messages
        raise TypeError(f"prompt {self.name!r} must return a str or a list of messages")


#: (ref type, prompt name or resource URI/template, argument name) -> completer
CompletionKey = tuple[str, str, str]
Completer = Callable[[str, dict[str, str]], Iterable[str]]


def object_schema(properties: JSONDict, required: Iterable[str] = ()) -> JSONDict:
    """A JSON Schema object type with these `properties` (and `required`)."""
    schema: JSONDict = {"type": "object", "properties": properties}
    required = list(required)
    if required:
        schema["required"] = required
    return schema


def text_content(text: str) -> JSONDict:
    return {"type": "text", "text": text}


def _content_block(item: Any) -> JSONDict:
    if isinstance(item, str):
        return text_content(item)
    if isinstance(item, dict):
        return item
    raise TypeError(f"not a content block: {item!r}")


def _describe_resource(
    out: JSONDict, name: str, title: str | None, description: str | None, mime_type: str | None
) -> JSONDict:
    out["name"] = name
    if title is not None:
        out["title"] = title
    if description is not None:
        out["description"] = description
    if mime_type is not None:
        out["mimeType"] = mime_type
    return out


def resource_contents(uri: str, mime_type: str | None, data: str | bytes) -> JSONDict:
    """One TextResourceContents or BlobResourceContents entry."""
    out: JSONDict = {"uri": uri}
    if mime_type is not None:
        out["mimeType"] = mime_type
    if isinstance(data, bytes):
        out["blob"] = base64.b64encode(data).decode("ascii")
    elif isinstance(data, str):
        out["text"] = data
    else:
        raise TypeError(f"resource {uri!r} must produce str or bytes, not {type(data).__name__}")
    return out


_TEMPLATE_VAR = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def compile_template(uri_template: str) -> tuple[re.Pattern[str], tuple[str, ...]]:
    """A regex for a simple `{var}` URI template (each variable matches one
    non-empty run of characters other than `/`, `?` and `#`) and its
    variable names. ValueError for any other RFC 6570 form."""
    parts: list[str] = []
    names: list[str] = []
    pos = 0
    for found in _TEMPLATE_VAR.finditer(uri_template):
        parts.append(_literal(uri_template[pos:found.start()], uri_template))
        name = found.group(1)
        if name in names:
            raise ValueError(f"variable {name!r} appears twice in {uri_template!r}")
        names.append(name)
        parts.append(f"(?P<{name}>[^/?#]+)")
        pos = found.end()
    parts.append(_literal(uri_template[pos:], uri_template))
    return re.compile("".join(parts)), tuple(names)


def _literal(text: str, uri_template: str) -> str:
    if "{" in text or "}" in text:
        raise ValueError(f"only simple {{var}} URI templates are supported: {uri_template!r}")
    return re.escape(text)


def encode_cursor(kind: str, offset: int) -> str:
    return base64.urlsafe_b64encode(f"{kind}:{offset}".encode()).decode("ascii")


def decode_cursor(kind: str, cursor: Any, total: int) -> int:
    """The offset a cursor from `encode_cursor(kind, ...)` stands for; ValueError otherwise."""
    if not isinstance(cursor, str):
        raise ValueError("cursor must be a string")
    try:
        text = base64.urlsafe_b64decode(cursor.encode("ascii")).decode("utf-8")
    except (UnicodeError, binascii.Error, ValueError):
        raise ValueError("malformed cursor") from None
    prefix, _, number = text.partition(":")
    if prefix != kind or not number.isdigit():
        raise ValueError("cursor does not belong to this list")
    offset = int(number)
    if not 0 < offset < total:
        raise ValueError("cursor is out of range")
    return offset


def paginate(kind: str, items: Sequence[JSONDict], cursor: Any, page_size: int | None) -> tuple[list[JSONDict], str | None]:
    """One page of `items` starting at `cursor` (None: the first page) and the next cursor."""
    start = 0 if cursor is None else decode_cursor(kind, cursor, len(items))
    if page_size is None:
        return list(items[start:]), None
    end = start + page_size
    return list(items[start:end]), (encode_cursor(kind, end) if end < len(items) else None)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _matches(pattern: str, name: str) -> bool:
    """Whether a `patternProperties` pattern allows `name` (searched, as
    JSON Schema does); one this `re` cannot read or run allows every name,
    as the client's own check does (a schema's fault is not the caller's)."""
    try:
        return re.search(pattern, name) is not None
    except Exception:  # re.error, OverflowError ("x{4294967296}"), TypeError (not a string)...
        return True
