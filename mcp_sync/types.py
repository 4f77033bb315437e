"""Result types: frozen attrs classes built from the wire dicts.

Every type keeps what it does not know: `extra` holds unknown fields and
`raw` the wire dict exactly as received, so nothing a newer server sends is
lost and `to_wire()` round-trips. Python names are snake_case
(`structured_content`); the wire keeps its camelCase.

Example::

    >>> tool = Tool.from_wire({"name": "echo", "inputSchema": {"type": "object"}, "x-new": 1})
    >>> tool.input_schema, tool.extra
    ({'type': 'object'}, {'x-new': 1})
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Callable, ClassVar, TypeVar, Union

import attrs

from .errors import InvalidResult, ToolError
from .protocol.meta import META_SERVER_INFO
from .protocol.schemas import check_depth

T = TypeVar("T", bound="WireModel")

# The client's logger: leaving a tool out is something the client does.
log = logging.getLogger("mcp_sync.client")

__all__ = [
    "WireModel", "ItemList", "Implementation", "Tool", "TextContent", "ImageContent", "AudioContent",
    "ResourceLink", "EmbeddedResource", "UnknownContent", "ContentBlock", "TextResourceContents",
    "BlobResourceContents", "ResourceContents", "CallToolResult", "Resource", "ResourceTemplate",
    "ReadResourceResult", "PromptArgument", "Prompt", "PromptMessage", "GetPromptResult",
    "CompleteResult", "DiscoverResult", "InitializeResult", "Page", "Progress",
]


def _wire(name: str, convert: Callable[[Any], Any] | None = None, default: Any = None) -> Any:
    return attrs.field(default=default, metadata={"wire": name, "convert": convert})


def _raw_field() -> Any:
    return attrs.field(factory=dict, repr=False, eq=False)


class WireModel:
    """Shared `from_wire`/`to_wire` for every result type."""

    #: Wire fields that must be present; a result without them is invalid.
    _required: ClassVar[tuple[str, ...]] = ()
    extra: dict[str, Any]
    raw: dict[str, Any]

    @classmethod
    def from_wire(cls: type[T], raw: Any) -> T:
        """Build one from its wire dict (camelCase keys, as the server sent it).

        Known fields become attributes, the rest goes to `extra`, and `raw`
        keeps the dict. Raises `InvalidResult` when `raw` is not an object,
        lacks a required field, or has a field of the wrong shape.

        Args:
            raw: The object as received.

        Returns:
            The typed object.

        Raises:
            InvalidResult: `raw` is not an object, lacks a required field,
                or has a field of the wrong shape.
        """
        # `type() is dict` first: the ABC check is slow, and results are dicts.
        if type(raw) is not dict and not isinstance(raw, Mapping):
            raise InvalidResult(f"{cls.__name__}: expected an object, got {type(raw).__name__}")
        for name in cls._required:
            # null is no value: a tool named null is as nameless as one without a name.
            if raw.get(name) is None:
                raise InvalidResult(f"{cls.__name__}: missing required field {name!r}")
        # One pass over what was sent (usually fewer keys than the type has
        # fields), sorting each key into a field or `extra`: a listing of
        # 10,000 tools builds 10,000 of these.
        by_wire = _wire_index(cls)
        kwargs: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for wire, value in raw.items():
            found = by_wire.get(wire)
            if found is None:
                extra[wire] = value
                continue
            attribute, convert = found
            if convert is not None and value is not None:
                try:
                    value = convert(value)
                except (TypeError, ValueError, AttributeError) as exc:
                    raise InvalidResult(f"{cls.__name__}: bad field {wire!r}: {exc}") from None
            kwargs[attribute] = value
        kwargs["extra"] = extra
        # type(raw) keeps a cache's StaleResult marker (see `stale`).
        kwargs["raw"] = type(raw)(raw) if isinstance(raw, dict) else dict(raw)
        return cls(**kwargs)

    @property
    def stale(self) -> bool:
        """True when this result came from the cache after its TTL ran out,
        because the refetch failed (`connect(stale_if_error=True)`)."""
        return bool(getattr(self.raw, "stale", False))

    def to_wire(self) -> dict[str, Any]:
        """The wire dict this object was built from."""
        return dict(self.raw)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # IPython's pretty printer takes a class's own __repr__ (attrs writes
        # one) over an inherited _repr_pretty_: each class gets its own.
        setattr(cls, "_repr_pretty_", WireModel._repr_pretty_)

    # Jupyter and IPython show results through these, with the renderers
    # `mcp_sync.display` installs (see `show_with`).
    def _repr_html_(self) -> str | None:
        render = _RENDERERS.get("html")
        return render(self) if render is not None else None  # None: IPython shows the text instead

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        render = _RENDERERS.get("text")
        if cycle:
            printer.text(f"{type(self).__name__}(...)")
        else:
            printer.text(render(self) if render is not None else repr(self))


#: The renderers of `WireModel`'s notebook hooks, by format ("html",
#: "text"): installed by `mcp_sync.display` when it is imported (`import
#: mcp_sync` imports it), so that this module imports nothing above it.
_RENDERERS: dict[str, Callable[[Any], str]] = {}


def show_with(*, html: Callable[[Any], str], text: Callable[[Any], str]) -> None:
    """Render results, lists and pages in Jupyter (`html`) and IPython's
    terminal (`text`) with these functions (what `mcp_sync.display` does)."""
    _RENDERERS.update(html=html, text=text)


_INDEX: dict[type, dict[str, tuple[str, Any]]] = {}


def _wire_index(cls: type) -> dict[str, tuple[str, Any]]:
    """A type's wire name -> (attribute, converter), read from its attrs
    metadata once: every result is built from it."""
    found = _INDEX.get(cls)
    if found is None:
        # Two threads racing here only compute the same value twice.
        found = _INDEX[cls] = {
            field.metadata["wire"]: (field.name, field.metadata.get("convert"))
            for field in attrs.fields(cls)
            if field.metadata.get("wire") is not None
        }
    return found


def _list_of(cls: Any) -> Callable[[Any], list[Any]]:
    def convert(value: Any) -> list[Any]:
        if not isinstance(value, list):
            raise TypeError(f"expected a list, got {type(value).__name__}")
        return [cls.from_wire(v) if hasattr(cls, "from_wire") else cls(v) for v in value]

    return convert


def _object(value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise TypeError(f"expected an object, got {type(value).__name__}")
    return dict(value)


def _schema(value: Any) -> dict[str, Any]:
    """A tool schema: an object nested at most `MAX_SCHEMA_DEPTH` deep, so
    that nothing the client does with it (validation, the `x-mcp-header`
    walk, copies) can run out of stack."""
    schema = _object(value)
    check_depth(schema)
    return schema


def _string(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


@attrs.frozen
class Implementation(WireModel):
    """A client's or server's name and version (`serverInfo`, `clientInfo`).

    Attributes:
        name: The name meant for programs (required on the wire).
        version: Its version, or None when not given.
        title: A display name for people, or None (then show `name`).
        description: What it does, in prose, or None.
        website_url: Its website (wire `websiteUrl`), or None.
        icons: Icons for a user interface, as the wire dicts (`src`,
            `mimeType`, `sizes`, `theme`), or None.
        extra: The fields this client does not know, by wire name (empty when
            there are none).
        raw: The wire dict as received; `to_wire()` returns a copy.

    Example::

        >>> info = Implementation.from_wire({"name": "demo", "version": "1.0"})
        >>> info.name, info.version, info.title
        ('demo', '1.0', None)
    """

    _required = ("name",)
    name: str = _wire("name", _string, "")
    version: str | None = _wire("version")
    title: str | None = _wire("title")
    description: str | None = _wire("description")
    website_url: str | None = _wire("websiteUrl")
    icons: list[dict[str, Any]] | None = _wire("icons")
    extra: dict[str, Any] = _raw_field()
    raw: dict[str, Any] = _raw_field()


@attrs.frozen
class Tool(WireModel):
    """A tool definition from `list_tools()`. Pass it to `call_tool()`.

    `from_wire` raises `InvalidResult` for a definition without a string
    `name`, or whose `inputSchema` or `outputSchema` is not an object or is
    nested deeper than `mcp_sync.protocol.schemas.MAX_SCHEMA_DEPTH` (64).

    Attributes:
        name: The name to call it by (required on the wire).
        title: A display name for people, or None. For display the spec
            prefers `title`, then `annotations["title"]`, then `name`.
        description: What the tool does, for people and models, or None.
        input_schema: The JSON Schema of its arguments (wire `inputSchema`),
            an object; None when the server sent none.
        output_schema: The JSON Schema of its `structured_content` (wire
            `outputSchema`), or None. When there is one (protocol 2025-06-18
            on), `call_tool()` checks a result without `is_error` against it
            and raises `OutputValidationError` on a mismatch.
        annotations: Behaviour hints as sent (`title`, `readOnlyHint`,
            `destructiveHint`, `idempotentHint`, `openWorldHint`), or None.
            They are hints from the server, not guarantees.
        icons: Icons for a user interface, as the wire dicts (`src`,
            `mimeType`, `sizes`, `theme`), or None.
        meta: The `_meta` object the server attached (wire `_meta`), or None.
        execution: How the tool may be run (wire `execution`, 2025-11-25),
            or None; see `task_support`.
        extra: The fields this client does not know, by wire name (empty when
            there are none).
        raw: The wire dict as received; `to_wire()` returns a copy.

    Example::

        >>> tool = Tool.from_wire({"name": "add", "inputSchema": {"type": "object"},
        ...                        "annotations": {"readOnlyHint": True}})
        >>> tool.name, tool.annotations["readOnlyHint"], tool.output_schema
        ('add', True, None)
    """

    _required = ("name",)
    name: str = _wire("name", _string, "")
    title: str | None = _wire("title")
    description: str | None = _wire("description")
    input_schema: dict[str, Any] | None = _wire("inputSchema", _schema)
    output_schema: dict[str, Any] | None = _wire("outputSchema", _schema)
    annotations: dict[str, Any] | None = _wire("annotations", _object)
    icons: list[dict[str, Any]] | None = _wire("icons")
    meta: dict[str, Any] | None = _wire("_meta", _object)
    execution: dict[str, Any] | None = _wire("execution", _object)
    extra: dict[str, Any] = _raw_field()
    raw: dict[str, Any] = _raw_field()

    @property
    def task_support(self) -> str:
        """Whether the tool runs as a task (2025-11-25 `execution.taskSupport`):
        ``"required"`` (`call_tool()` then runs it as a task by itself),
        ``"optional"``, or ``"forbidden"``, which is also what a missing or
        unknown value means.

        Example::

            >>> Tool.from_wire({"name": "research", "execution": {"taskSupport": "required"}}).task_support
            'required'
        """
        support = self.execution.get("taskSupport") if self.execution is not None else None
        return support if support in ("required", "optional") else "forbidden"

    @classmethod
    def from_wire(cls, raw: Any) -> Tool:
        """Build one from its wire dict, as `WireModel.from_wire` does. The
        schemas, `annotations` and `_meta` are the objects of `raw`, not
        copies; `raw` itself is copied (shallow).

        Args:
            raw: The tool definition as `tools/list` gave it.

        Returns:
            The tool.

        Raises:
            InvalidResult: `raw` is not an object, lacks its `name`, or has
                a field of the wrong shape (an `inputSchema` that is not an
                object, ...).
        """
        return cls._build(raw, own=False)

    @classmethod
    def _build(cls, raw: Any, *, own: bool) -> Tool:
        """`from_wire` for a plain dict of the usual shape, without the
        generic loop: a listing of 10,000 tools builds 10,000, and each
        object it copies or allocates here is one more for the garbage
        collector to scan in the kept catalog. Anything else (a Mapping, a
        field of another type, a schema too deep, a subclass) takes the
        generic path, which words the error. `own`: `raw` is a decoded dict
        nobody else keeps, so it is kept as `raw` rather than copied."""
        if cls is not Tool or type(raw) is not dict:
            return super().from_wire(raw)
        get = raw.get
        name = get("name")
        input_schema = get("inputSchema")
        output_schema = get("outputSchema")
        annotations = get("annotations")
        meta = get("_meta")
        execution = get("execution")
        if (type(name) is not str or not (input_schema is None or type(input_schema) is dict)
                or not (output_schema is None or type(output_schema) is dict)
                or not (annotations is None or type(annotations) is dict)
                or not (meta is None or type(meta) is dict)
                or not (execution is None or type(execution) is dict)):
            return super().from_wire(raw)
        try:
            if input_schema is not None:
                check_depth(input_schema)
            if output_schema is not None:
                check_depth(output_schema)
        except ValueError:
            return super().from_wire(raw)
        extra: dict[str, Any] = {}
        for key in raw:
            if key not in _TOOL_WIRE:  # rare: one unknown key, then sort them all
                extra = {key: value for key, value in raw.items() if key not in _TOOL_WIRE}
                break
        # Positional, in field order: no keyword dict per tool.
        return cls(name, get("title"), get("description"), input_schema, output_schema, annotations, get("icons"),
                   meta, execution, extra, raw if own else dict(raw))


#: The wire names `Tool` knows (its fields' `_wire` names).
_TOOL_WIRE = frozenset(_wire_index(Tool))


def tools_from_wire(items: Sequence[Any], known: Mapping[str, Tool] | None = None) -> list[Tool]:
    """The tools of a `tools/list` result, leaving out the ones that cannot
    be used.

    One bad definition (no name, a schema that is not an object or is
    nested too deeply; see `Tool`) must not cost the user every other tool:
    it is left out and a warning on the ``mcp_sync.client`` logger names it
    and says why, as for a tool with an invalid `x-mcp-header` annotation.

    The item dicts become the tools' `raw` as they are, not copies: they
    are a decoded result's, given over. With `known` (tools listed before,
    by name), a definition equal (`==`) to a known tool's `raw` gives back
    that `Tool`: listing unchanged tools again builds nothing, and keeps
    nothing new for the garbage collector to scan.

        >>> [t.name for t in tools_from_wire([{"name": "echo"}, {"title": "no name"}])]
        ['echo']
    """
    tools: list[Tool] = []
    for index, item in enumerate(items):
        if known and type(item) is dict:
            name = item.get("name")
            before = known.get(name) if type(name) is str else None
            if before is not None and before.raw == item:
                tools.append(before)
                continue
        try:
            tools.append(Tool._build(item, own=True))
        except InvalidResult as exc:
            name = item.get("name") if isinstance(item, Mapping) else None
            label = repr(name[:100]) if isinstance(name, str) else f"#{index} of the list"
            log.warning("leaving out tool %s: %s", label, exc)
    return tools


# -- content ------------------------------------------------------------------------


@attrs.frozen
class TextContent(WireModel):
    """A block of text, in a tool result or a prompt message.

    Attributes:
        type: Always `"text"`.
        text: The text.
        annotations: Hints for the client as sent (`audience`, `priority`,
            `lastModified`), or None.
        meta: The `_meta` object the server attached (wire `_meta`), or None.
        extra: The fields this client does not know, by wire name (empty when
            there are none).
        raw: The wire dict as received; `to_wire()` returns a copy.

    Example::

        >>> TextContent.from_wire({"type": "text", "text": "hello"}).text
        'hello'
    """

    type: str = _wire("type", default="text")
    text: str = _wire("text", _string, "")
    annotations: dict[str, Any] | None = _wire("annotations")
    meta: dict[str, Any] | None = _wire("_meta")
    extra: dict[str, Any] = _raw_field()
    raw: dict[str, Any] = _raw_field()


@attrs.frozen
class _MediaContent(WireModel):
    """Base64 media content; `bytes` decodes it.

    Attributes:
        type: `"image"` or `"audio"`.
        data: The media, base64-encoded as on the wire.
        mime_type: Its media type (wire `mimeType`), or None when not given.
        annotations: Hints for the client as sent (`audience`, `priority`,
            `lastModified`), or None.
        meta: The `_meta` object the server attached (wire `_meta`), or None.
        extra: The fields this client does not know, by wire name (empty when
            there are none).
        raw: The wire dict as received; `to_wire()` returns a copy.
    """

    type: str = _wire("type", default="")
    data: str = _wire("data", _string, "")
    mime_type: str | None = _wire("mimeType")
    annotations: dict[str, Any] | None = _wire("annotations")
    meta: dict[str, Any] | None = _wire("_meta")
    extra: dict[str, Any] = _raw_field()
    raw: dict[str, Any] = _raw_field()

    @property
    def bytes(self) -> bytes:
        """The decoded bytes."""
        import base64  # here: with `struct`, a cost at import for every program

        return base64.b64decode(self.data)


@attrs.frozen
class ImageContent(_MediaContent):
    """An image, in a tool result or a prompt message; `bytes` decodes it.

    Attributes:
        type: Always `"image"`.
        data: The image, base64-encoded as on the wire.
        mime_type: Its media type (wire `mimeType`), such as `"image/png"`,
            or None when not given.
        annotations: Hints for the client as sent (`audience`, `priority`,
            `lastModified`), or None.
        meta: The `_meta` object the server attached (wire `_meta`), or None.
        extra: The fields this client does not know, by wire name (empty when
            there are none).
        raw: The wire dict as received; `to_wire()` returns a copy.

    Example::

        >>> image = ImageContent.from_wire({"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"})
        >>> image.mime_type, len(image.bytes)
        ('image/png', 8)
    """

    type: str = _wire("type", default="image")


@attrs.frozen
class AudioContent(_MediaContent):
    """A piece of audio, in a tool result or a prompt message; `bytes`
    decodes it.

    Attributes:
        type: Always `"audio"`.
        data: The audio, base64-encoded as on the wire.
        mime_type: Its media type (wire `mimeType`), such as `"audio/wav"`,
            or None when not given.
        annotations: Hints for the client as sent (`audience`, `priority`,
            `lastModified`), or None.
        meta: The `_meta` object the server attached (wire `_meta`), or None.
        extra: The fields this client does not know, by wire name (empty when
            there are none).
        raw: The wire dict as received; `to_wire()` returns a copy.
    """

    type: str = _wire("type", default="audio")


@attrs.frozen
class ResourceLink(WireModel):
    """A link to a resource, in a tool result or a prompt message; read it
    with `read_resource(link.uri)` (it need not be in `list_resources()`).

    Attributes:
        type: Always `"resource_link"`.
        uri: The resource's URI.
        name: Its name meant for programs, or None.
        title: A display name for people, or None (then show `name`).
        description: What the resource is, or None.
        mime_type: Its media type (wire `mimeType`), or None if unknown.
        size: Its size in bytes (before any base64 encoding), or None if
            unknown.
        annotations: Hints for the client as sent (`audience`, `priority`,
            `lastModified`), or None.
        meta: The `_meta` object the server attached (wire `_meta`), or None.
        extra: The fields this client does not know, by wire name (empty when
            there are none).
        raw: The wire dict as received; `to_wire()` returns a copy.
    """

    type: str = _wire("type", default="resource_link")
    uri: str = _wire("uri", _string, "")
    name: str | None = _wire("name")
    title: str | None = _wire("title")
    description: str | None = _wire("description")
    mime_type: str | None = _wire("mimeType")
    size: int | None = _wire("size")
    annotations: dict[str, Any] | None = _wire("annotations")
    meta: dict[str, Any] | None = _wire("_meta")
    extra: dict[str, Any] = _raw_field()
    raw: dict[str, Any] = _raw_field()


@attrs.frozen
class TextResourceContents(WireModel):
    """The contents of a text resource, from `read_resource()` or in an
    `EmbeddedResource`.

    Attributes:
        uri: The URI of the resource (or of the part of it) they are.
        text: The text.
        mime_type: Its media type (wire `mimeType`), or None if unknown.
        meta: The `_meta` object the server attached (wire `_meta`), or None.
        extra: The fields this client does not know, by wire name (empty when
            there are none).
        raw: The wire dict as received; `to_wire()` returns a copy.
    """

    uri: str = _wire("uri", _string, "")
    text: str = _wire("text", _string, "")
    mime_type: str | None = _wire("mimeType")
    meta: dict[str, Any] | None = _wire("_meta")
    extra: dict[str, Any] = _raw_field()
    raw: dict[str, Any] = _raw_field()


@attrs.frozen
class BlobResourceContents(WireModel):
    """The contents of a binary resource, from `read_resource()` or in an
    `EmbeddedResource`; `bytes` decodes them.

    Attributes:
        uri: The URI of the resource (or of the part of it) they are.
        blob: The data, base64-encoded as on the wire.
        mime_type: Its media type (wire `mimeType`), or None if unknown.
        meta: The `_meta` object the server attached (wire `_meta`), or None.
        extra: The fields this client does not know, by wire name (empty when
            there are none).
        raw: The wire dict as received; `to_wire()` returns a copy.

    Example::

        >>> BlobResourceContents.from_wire({"uri": "file:///a.bin", "blob": "aGk="}).bytes
        b'hi'
    """

    uri: str = _wire("uri", _string, "")
    blob: str = _wire("blob", _string, "")
    mime_type: str | None = _wire("mimeType")
    meta: dict[str, Any] | None = _wire("_meta")
    extra: dict[str, Any] = _raw_field()
    raw: dict[str, Any] = _raw_field()

    @property
    def bytes(self) -> bytes:
        """The decoded blob."""
        import base64

        return base64.b64decode(self.blob)


ResourceContents = Union[TextResourceContents, BlobResourceContents]


def resource_contents(value: Any) -> ResourceContents:
    if isinstance(value, Mapping) and "blob" in value:
        return BlobResourceContents.from_wire(value)
    if isinstance(value, Mapping) and "text" in value:
        return TextResourceContents.from_wire(value)
    raise TypeError("resource contents need 'text' or 'blob'")


@attrs.frozen
class EmbeddedResource(WireModel):
    """A resource's contents embedded in a tool result or a prompt message.

    Attributes:
        type: Always `"resource"`.
        resource: The contents: a `BlobResourceContents` when the wire object
            has `blob`, else a `TextResourceContents` when it has `text`
            (`from_wire` raises `InvalidResult` for one with neither); None
            when the server sent none.
        annotations: Hints for the client as sent (`audience`, `priority`,
            `lastModified`), or None.
        meta: The `_meta` object the server attached (wire `_meta`), or None.
        extra: The fields this client does not know, by wire name (empty when
            there are none).
        raw: The wire dict as received; `to_wire()` returns a copy.

    Example::

        >>> block = EmbeddedResource.from_wire(
        ...     {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "hi"}})
        >>> block.resource.text
        'hi'
    """

    type: str = _wire("type", default="resource")
    resource: ResourceContents | None = _wire("resource", resource_contents)
    annotations: dict[str, Any] | None = _wire("annotations")
    meta: dict[str, Any] | None = _wire("_meta")
    extra: dict[str, Any] = _raw_field()
    raw: dict[str, Any] = _raw_field()


@attrs.frozen
class UnknownContent(WireModel):
    """A content block of a type this client does not know; see `raw`.

    Attributes:
        type: The `type` the server gave, or None when it gave none.
        extra: Every other field of the block, by wire name.
        raw: The wire dict as received; `to_wire()` returns a copy.
    """

    type: str | None = _wire("type")
    extra: dict[str, Any] = _raw_field()
    raw: dict[str, Any] = _raw_field()


ContentBlock = Union[TextContent, ImageContent, AudioContent, ResourceLink, EmbeddedResource, UnknownContent]
_CONTENT_TYPES: dict[str, Any] = {
    "text": TextContent, "image": ImageContent, "audio": AudioContent,
    "resource_link": ResourceLink, "resource": EmbeddedResource,
}


def content_block(value: Any) -> ContentBlock:
    # `type() is dict` first: the ABC check is slow, and blocks are dicts.
    if type(value) is not dict and not isinstance(value, Mapping):
        raise TypeError("a content block must be an object")
    cls = _CONTENT_TYPES.get(value.get("type"), UnknownContent)  # type: ignore[arg-type]
    return cls.from_wire(value)  # type: ignore[no-any-return]


#: The wire names of `CallToolResult` (plus `resultType`, which every
#: 2026-07-28 result carries and which goes to `extra`) and of a text block:
#: the shapes its `from_wire` builds directly.
_CALL_RESULT_WIRE = frozenset(("content", "structuredContent", "isError", "_meta", "resultType"))
_TEXT_WIRE = frozenset(("type", "text", "annotations", "_meta"))


def _content_list(value: Any) -> list[ContentBlock]:
    if not isinstance(value, list):
        raise TypeError("content must be a list")
    return [content_block(v) for v in value]


def _text_of(blocks: Sequence[Any]) -> str:
    return "\n".join(b.text for b in blocks if isinstance(b, TextContent))


@attrs.frozen
class CallToolResult(WireModel):
    """The result of `call_tool()`.

    A tool that ran and failed is a result with `is_error` True, not an
    exception; call `raise_for_error()` to turn it into one::

        result = client.call_tool("add", {"a": 1, "b": 2})
        result.raise_for_error()
        print(result.text, result.structured_content)

    Attributes:
        content: The result as content blocks: `TextContent`,
            `ImageContent`, `AudioContent`, `ResourceLink`,
            `EmbeddedResource`, or `UnknownContent` for a type this client
            does not know; empty when the server sent none.
        structured_content: The structured result (wire
            `structuredContent`), any JSON value; None when the server sent
            none. When the tool's `output_schema` is known, `call_tool()`
            checks it against that schema (protocol 2025-06-18 on).
        is_error: True when the tool ran and reported failure (wire
            `isError`); False when the server left it out.
        meta: The `_meta` object the server attached (wire `_meta`), or None.
        extra: The fields this client does not know, by wire name (empty when
            there are none).
        raw: The wire dict as received; `to_wire()` returns a copy.
    """

    content: list[ContentBlock] = _wire("content", _content_list, attrs.Factory(list))
    structured_content: Any = _wire("structuredContent")
    is_error: bool = _wire("isError", bool, False)
    meta: dict[str, Any] | None = _wire("_meta")
    extra: dict[str, Any] = _raw_field()
    raw: dict[str, Any] = _raw_field()

    @classmethod
    def from_wire(cls, raw: Any) -> CallToolResult:
        """Build one from its wire dict, as `WireModel.from_wire` does
        (tests/test_types.py compares the two on many shapes). Every
        `call_tool()` builds one, so the usual shape (a plain dict, known
        keys, text blocks) is built directly, without the generic loop;
        anything else takes the generic path, which words the errors.

        Args:
            raw: The `tools/call` result as received.

        Returns:
            The result.

        Raises:
            InvalidResult: `raw` is not an object, or a field has the wrong
                shape (`content` not a list, ...).
        """
        if cls is CallToolResult and type(raw) is dict and _CALL_RESULT_WIRE.issuperset(raw):
            content = raw.get("content")
            is_error = raw.get("isError", False)
            if type(content) is list and type(is_error) is bool:
                blocks: list[ContentBlock] = []
                for block in content:
                    if (type(block) is not dict or block.get("type") != "text" or type(block.get("text")) is not str
                            or not _TEXT_WIRE.issuperset(block)):
                        break
                    # Built through the slots' own setters, not attrs'
                    # `__init__` (one `object.__setattr__` per field of a
                    # frozen class): every call builds these.
                    # tests/test_types.py checks the two agree.
                    text: TextContent = _new(TextContent)
                    _text_type(text, "text")
                    _text_text(text, block["text"])
                    _text_annotations(text, block.get("annotations"))
                    _text_meta(text, block.get("_meta"))
                    _text_extra(text, {})
                    _text_raw(text, dict(block))
                    blocks.append(text)
                else:
                    made: CallToolResult = _new(CallToolResult)
                    _result_content(made, blocks)
                    _result_structured(made, raw.get("structuredContent"))
                    _result_is_error(made, is_error)
                    _result_meta(made, raw.get("_meta"))
                    _result_extra(made, {"resultType": raw["resultType"]} if "resultType" in raw else {})
                    _result_raw(made, dict(raw))
                    return made
        return super().from_wire(raw)

    @property
    def text(self) -> str:
        """All text content blocks joined by newlines."""
        content = self.content
        if len(content) == 1 and type(content[0]) is TextContent:
            # The usual result, one text block: its text, without the join
            # (what the join gives; anything but a `str` takes the join,
            # which says what is wrong).
            text = content[0].text
            if type(text) is str:
                return text
        return _text_of(content)

    def raise_for_error(self) -> CallToolResult:
        """Raise `ToolError` if the tool reported failure; else return self."""
        if self.is_error:
            raise ToolError(f"the tool reported an error: {self.text or json.dumps(self.raw)[:200]}", result=self)
        return self


_new = object.__new__
_text_type, _text_text, _text_annotations, _text_meta, _text_extra, _text_raw = (
    TextContent.__dict__[name].__set__ for name in ("type", "text", "annotations", "meta", "extra", "raw"))
_result_content, _result_structured, _result_is_error, _result_meta, _result_extra, _result_raw = (
    CallToolResult.__dict__[name].__set__
    for name in ("content", "structured_content", "is_error", "meta", "extra", "raw"))


# -- resources ----------------------------------------------------------------------------


@attrs.frozen
class Resource(WireModel):
    """A resource the server can read, from `list_resources()`; read it
    with `read_resource(resource.uri)`.

    Attributes:
        uri: Its URI (required on the wire).
        name: Its name meant for programs, or None.
        title: A display name for people, or None (then show `name`).
        description: What it is, for people and models, or None.
        mime_type: Its media type (wire `mimeType`), or None if unknown.
        size: Its size in bytes (before any base64 encoding), or None if
            unknown.
        annotations: Hints for the client as sent (`audience`, `priority`,
            `lastModified`), or None.
        icons: Icons for a user interface, as the wire dicts (`src`,
            `mimeType`, `sizes`, `theme`), or None.
        meta: The `_meta` object the server attached (wire `_meta`), or None.
        extra: The fields this client does not know, by wire name (empty when
            there are none).
        raw: The wire dict as received; `to_wire()` returns a copy.

    Example::

        for resource in client.list_resources():
            print(resource.uri, resource.mime_type, resource.size)
    """

    _required = ("uri",)
    uri: str = _wire("uri", _string, "")
    name: str | None = _wire("name")
    title: str | None = _wire("title")
    description: str | None = _wire("description")
    mime_type: str | None = _wire("mimeType")
    size: int | None = _wire("size")
    annotations: dict[str, Any] | None = _wire("annotations")
    icons: list[dict[str, Any]] | None = _wire("icons")
    meta: dict[str, Any] | None = _wire("_meta")
    extra: dict[str, Any] = _raw_field()
    raw: dict[str, Any] = _raw_field()


@attrs.frozen
class ResourceTemplate(WireModel):
    """A family of resources named by a URI template (RFC 6570), from
    `list_resource_templates()`. Fill the template in to get a URI for
    `read_resource()`; `complete()` suggests values for its variables.

    Attributes:
        uri_template: The template (wire `uriTemplate`), such as
            `"file:///{path}"`; required on the wire.
        name: Its name meant for programs, or None.
        title: A display name for people, or None (then show `name`).
        description: What the template is for, or None.
        mime_type: The media type of every resource it names (wire
            `mimeType`), when they all share one; else None.
        annotations: Hints for the client as sent (`audience`, `priority`,
            `lastModified`), or None.
        icons: Icons for a user interface, as the wire dicts (`src`,
            `mimeType`, `sizes`, `theme`), or None.
        meta: The `_meta` object the server attached (wire `_meta`), or None.
        extra: The fields this client does not know, by wire name (empty when
            there are none).
        raw: The wire dict as received; `to_wire()` returns a copy.

    Example::

        for template in client.list_resource_templates():
            print(template.uri_template, template.description)
    """

    _required = ("uriTemplate",)
    uri_template: str = _wire("uriTemplate", _string, "")
    name: str | None = _wire("name")
    title: str | None = _wire("title")
    description: str | None = _wire("description")
    mime_type: str | None = _wire("mimeType")
    annotations: dict[str, Any] | None = _wire("annotations")
    icons: list[dict[str, Any]] | None = _wire("icons")
    meta: dict[str, Any] | None = _wire("_meta")
    extra: dict[str, Any] = _raw_field()
    raw: dict[str, Any] = _raw_field()


@attrs.frozen
class ReadResourceResult(WireModel):
    """The result of `read_resource()`: `contents`, and `text` for convenience.

    Attributes:
        contents: A `TextResourceContents` or `BlobResourceContents` for each
            item the server returned (one resource may have several parts);
            required on the wire.
        meta: The `_meta` object the server attached (wire `_meta`), or None.
        extra: The fields this client does not know, by wire name (empty when
            there are none).
        raw: The wire dict as received; `to_wire()` returns a copy.

    Example::

        result = client.read_resource("file:///notes.txt")
        print(result.text)
    """

    _required = ("contents",)
    contents: list[ResourceContents] = _wire("contents", lambda v: [resource_contents(c) for c in v], attrs.Factory(list))
    meta: dict[str, Any] | None = _wire("_meta")
    extra: dict[str, Any] = _raw_field()
    raw: dict[str, Any] = _raw_field()

    @property
    def text(self) -> str:
        """All text contents joined by newlines."""
        return "\n".join(c.text for c in self.contents if isinstance(c, TextResourceContents))


# -- prompts ------------------------------------------------------------------------------------


@attrs.frozen
class PromptArgument(WireModel):
    """An argument a prompt takes (see `Prompt.arguments`).

    Attributes:
        name: The argument's name: its key in `get_prompt()`'s arguments.
        title: A display name for people, or None (then show `name`).
        description: What it is for, or None.
        required: Whether `get_prompt()` must be given it; False when the
            server left it out.
        extra: The fields this client does not know, by wire name (empty when
            there are none).
        raw: The wire dict as received; `to_wire()` returns a copy.
    """

    name: str = _wire("name", _string, "")
    title: str | None = _wire("title")
    description: str | None = _wire("description")
    required: bool = _wire("required", bool, False)
    extra: dict[str, Any] = _raw_field()
    raw: dict[str, Any] = _raw_field()


@attrs.frozen
class Prompt(WireModel):
    """A prompt (or prompt template) the server offers, from
    `list_prompts()`; `get_prompt(name, arguments)` fills it in.

    Attributes:
        name: The name to get it by (required on the wire).
        title: A display name for people, or None (then show `name`).
        description: What the prompt is for, or None.
        arguments: The arguments it takes, as `PromptArgument`s; empty when
            it takes none.
        icons: Icons for a user interface, as the wire dicts (`src`,
            `mimeType`, `sizes`, `theme`), or None.
        meta: The `_meta` object the server attached (wire `_meta`), or None.
        extra: The fields this client does not know, by wire name (empty when
            there are none).
        raw: The wire dict as received; `to_wire()` returns a copy.

    Example::

        for prompt in client.list_prompts():
            print(prompt.name, [a.name for a in prompt.arguments if a.required])
    """

    _required = ("name",)
    name: str = _wire("name", _string, "")
    title: str | None = _wire("title")
    description: str | None = _wire("description")
    arguments: list[PromptArgument] = _wire("arguments", _list_of(PromptArgument), attrs.Factory(list))
    icons: list[dict[str, Any]] | None = _wire("icons")
    meta: dict[str, Any] | None = _wire("_meta")
    extra: dict[str, Any] = _raw_field()
    raw: dict[str, Any] = _raw_field()


@attrs.frozen
class PromptMessage(WireModel):
    """One message of a filled-in prompt (see `GetPromptResult.messages`).

    Attributes:
        role: Who speaks: `"user"` or `"assistant"`.
        content: The message, one content block (`TextContent`,
            `ImageContent`, `AudioContent`, `ResourceLink`,
            `EmbeddedResource`, or `UnknownContent`); None when the server
            sent none.
        extra: The fields this client does not know, by wire name (empty when
            there are none).
        raw: The wire dict as received; `to_wire()` returns a copy.
    """

    role: str = _wire("role", _string, "")
    content: ContentBlock | None = _wire("content", content_block)
    extra: dict[str, Any] = _raw_field()
    raw: dict[str, Any] = _raw_field()


@attrs.frozen
class GetPromptResult(WireModel):
    """The result of `get_prompt()`: the prompt's messages, filled in with
    the arguments given.

    Attributes:
        description: A description of the prompt, or None.
        messages: The `PromptMessage`s, in order (required on the wire).
        meta: The `_meta` object the server attached (wire `_meta`), or None.
        extra: The fields this client does not know, by wire name (empty when
            there are none).
        raw: The wire dict as received; `to_wire()` returns a copy.

    Example::

        result = client.get_prompt("greet", {"name": "Ada"})
        for message in result.messages:
            print(message.role, message.content)
    """

    _required = ("messages",)
    description: str | None = _wire("description")
    messages: list[PromptMessage] = _wire("messages", _list_of(PromptMessage), attrs.Factory(list))
    meta: dict[str, Any] | None = _wire("_meta")
    extra: dict[str, Any] = _raw_field()
    raw: dict[str, Any] = _raw_field()


# -- completion, discovery, sessions, pages ----------------------------------------------------------


def _completion(value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping) or not isinstance(value.get("values"), list):
        raise TypeError("completion needs a 'values' list")
    return dict(value)


@attrs.frozen
class CompleteResult(WireModel):
    """Suggestions from `complete()`: `values`, `total`, `has_more`.

    Attributes:
        completion: The wire `completion` object as sent: `values`, and
            `total` and `hasMore` when given (required on the wire).
        meta: The `_meta` object the server attached (wire `_meta`), or None.
        extra: The fields this client does not know, by wire name (empty when
            there are none).
        raw: The wire dict as received; `to_wire()` returns a copy.

    Example::

        >>> result = CompleteResult.from_wire({"completion": {"values": ["fr", "fi"], "hasMore": True}})
        >>> result.values, result.total, result.has_more
        (['fr', 'fi'], None, True)
    """

    _required = ("completion",)
    completion: dict[str, Any] = _wire("completion", _completion, attrs.Factory(dict))
    meta: dict[str, Any] | None = _wire("_meta")
    extra: dict[str, Any] = _raw_field()
    raw: dict[str, Any] = _raw_field()

    @property
    def values(self) -> list[str]:
        """The suggested values, in the server's order (a new list)."""
        return list(self.completion.get("values", []))

    @property
    def total(self) -> int | None:
        """How many suggestions there are in all (which can be more than
        `values` holds), or None when the server did not say."""
        return self.completion.get("total")

    @property
    def has_more(self) -> bool:
        """True when the server has more suggestions than `values` holds
        (wire `hasMore`); False when it did not say."""
        return bool(self.completion.get("hasMore", False))


def _server_info_of(meta: Any) -> Implementation | None:
    if isinstance(meta, Mapping) and isinstance(meta.get(META_SERVER_INFO), Mapping):
        return Implementation.from_wire(meta[META_SERVER_INFO])
    return None


@attrs.frozen
class DiscoverResult(WireModel):
    """What `server/discover` says: versions, capabilities, identity
    (2026-07-28); `discover()` returns it.

    Attributes:
        supported_versions: The protocol versions the server speaks (wire
            `supportedVersions`; required on the wire).
        capabilities: The server's capabilities object as sent (`tools`,
            `resources`, `prompts`, ...); empty when it sent none.
        instructions: How to use the server, in prose (for a model's system
            prompt), or None.
        meta: The `_meta` object the server attached (wire `_meta`), or
            None; `server_info` comes from it.
        extra: The fields this client does not know, by wire name (such as
            the caching hints `ttlMs` and `cacheScope`).
        raw: The wire dict as received; `to_wire()` returns a copy.

    Example::

        info = client.discover()
        print(info.supported_versions, info.server_info)
    """

    _required = ("supportedVersions",)
    supported_versions: list[str] = _wire("supportedVersions", list, attrs.Factory(list))
    capabilities: dict[str, Any] = _wire("capabilities", _object, attrs.Factory(dict))
    instructions: str | None = _wire("instructions")
    meta: dict[str, Any] | None = _wire("_meta")
    extra: dict[str, Any] = _raw_field()
    raw: dict[str, Any] = _raw_field()

    @property
    def server_info(self) -> Implementation | None:
        """The server's name and version, from
        `_meta["io.modelcontextprotocol/serverInfo"]`; None when it sent none."""
        return _server_info_of(self.meta)


@attrs.frozen
class InitializeResult(WireModel):
    """An initialize-era session: what the server answered to `initialize`
    (`Client.session`).

    Attributes:
        protocol_version: The protocol version the server chose (wire
            `protocolVersion`; required on the wire).
        capabilities: The server's capabilities object as sent (`tools`,
            `resources`, `prompts`, `logging`, ...); empty when it sent none.
        server_info: The server's name and version (wire `serverInfo`), or
            None when it sent none.
        instructions: How to use the server, in prose (for a model's system
            prompt), or None.
        meta: The `_meta` object the server attached (wire `_meta`), or None.
        extra: The fields this client does not know, by wire name (empty when
            there are none).
        raw: The wire dict as received; `to_wire()` returns a copy.

    Example::

        if client.session is not None:
            print(client.session.protocol_version, client.session.server_info)
    """

    _required = ("protocolVersion",)
    protocol_version: str = _wire("protocolVersion", _string, "")
    capabilities: dict[str, Any] = _wire("capabilities", _object, attrs.Factory(dict))
    server_info: Implementation | None = _wire("serverInfo", Implementation.from_wire)
    instructions: str | None = _wire("instructions")
    meta: dict[str, Any] | None = _wire("_meta")
    extra: dict[str, Any] = _raw_field()
    raw: dict[str, Any] = _raw_field()


@attrs.frozen
class Page:
    """One page of a list call: `items`, and `next_cursor` for the next one.
    `list_page()` returns it.

    Attributes:
        items: The page's items, typed as the list call's (`Tool`,
            `Resource`, `ResourceTemplate` or `Prompt`); a tool definition
            that cannot be used is left out with a warning.
        next_cursor: The cursor to pass for the next page (wire
            `nextCursor`), or None on the last page.
        raw: The wire result as received.

    Example::

        page = client.list_page("resources")
        names = [r.name for r in page.items]
        while page.next_cursor:
            page = client.list_page("resources", page.next_cursor)
            names += [r.name for r in page.items]
    """

    items: list[Any]
    next_cursor: str | None
    raw: dict[str, Any] = attrs.field(factory=dict, repr=False, eq=False)

    _repr_html_ = WireModel._repr_html_  # a table in Jupyter (see `mcp_sync.display`)
    _repr_pretty_ = WireModel._repr_pretty_


class ItemList(list):  # type: ignore[type-arg]
    """What `list_tools()` and the other list calls return: a plain `list`
    that Jupyter shows as a table (see `mcp_sync.display`).

    Example::

        >>> ItemList([Tool.from_wire({"name": "echo"})])[0].name
        'echo'
    """

    _repr_html_ = WireModel._repr_html_
    _repr_pretty_ = WireModel._repr_pretty_


@attrs.frozen
class Progress:
    """One progress notification, as a `progress=` callback receives it.

    Example::

        client.call_tool("countdown", {"steps": 3},
                         progress=lambda p: print(f"{p.progress}/{p.total} {p.message}"))

    Attributes:
        progress: The progress so far (0 when the server sent no number);
            the server makes it grow with each notification, even when the
            total is unknown.
        total: The total it counts up to, or None when unknown.
        message: What is going on now, in prose, or None.
        raw: The notification's params as received (with `progressToken`).
    """

    progress: float
    total: float | None = None
    message: str | None = None
    raw: dict[str, Any] = attrs.field(factory=dict, repr=False, eq=False)

    #: The largest float (`sys.float_info.max`): what a number beyond a float's range becomes.
    _BIGGEST: ClassVar[float] = 1.7976931348623157e308

    @classmethod
    def from_wire(cls, params: Mapping[str, Any]) -> Progress:
        """A `Progress` from a `notifications/progress` notification's
        params. Lenient: a field of the wrong type becomes its default (0
        for `progress`, None for the others) instead of an error, and so
        does a NaN. The numbers kept are finite: one beyond a float's range
        (a JSON integer like 10**400, or an infinity) becomes the largest
        float of its sign, so `fraction` and a callback's own arithmetic
        cannot overflow; any other number is kept as sent.

        Example::

            >>> Progress.from_wire({"progressToken": 1, "progress": 2, "total": 5}).fraction
            0.4

        Args:
            params: The notification's params.

        Returns:
            The progress, never an error.
        """
        progress: Any = params.get("progress")  # any JSON value until checked below
        total: Any = params.get("total")
        message = params.get("message")
        # The usual number (an int or float within a float's range: False
        # for a NaN) is kept as it is, with no call: one per notification.
        biggest = Progress._BIGGEST
        if not (type(progress) in (int, float) and -biggest <= progress <= biggest):
            progress = Progress._finite(progress)
            progress = 0 if progress is None else progress
        if total is not None and not (type(total) in (int, float) and -biggest <= total <= biggest):
            total = Progress._finite(total)
        message = message if isinstance(message, str) else None
        if cls is not Progress:
            return cls(progress=progress, total=total, message=message, raw=dict(params))
        # One per progress notification, on the caller's thread: built
        # through the slots' own setters instead of attrs' `__init__` (which
        # goes through `object.__setattr__` per field, a frozen class's
        # cost). `tests/test_types.py` checks that the two agree.
        made: Progress = _new(Progress)
        _set_progress(made, progress)
        _set_total(made, total)
        _set_message(made, message)
        _set_raw(made, dict(params))
        return made

    @property
    def fraction(self) -> float | None:
        """progress / total between 0 and 1, when the total is known and
        positive (and the quotient a number: not for a NaN). Never raises,
        even for values `from_wire` would not make (an int beyond a float's
        range, an infinity)."""
        total = self.total
        if total is None or not total > 0:  # `not >`: a NaN total has no fraction either
            return None
        # Each side as a float (clamped): float division overflows to inf
        # where int division would raise.
        share = Progress._float(self.progress) / Progress._float(total)
        if share != share:  # NaN: a NaN progress, or inf / inf
            return None
        return min(1.0, max(0.0, share))

    @staticmethod
    def _float(value: float) -> float:
        """`value` as a float; an int beyond a float's range as the largest float of its sign."""
        try:
            return float(value)
        except OverflowError:
            return Progress._BIGGEST if value > 0 else -Progress._BIGGEST

    @staticmethod
    def _finite(value: Any) -> float | None:
        """A number from the wire as `Progress` keeps it (see `from_wire`):
        None for what is no number, NaN included; else a finite number, the
        value itself when it is in a float's range (an int stays exact)."""
        if not isinstance(value, (int, float)):
            return None
        if isinstance(value, float):
            if value != value:
                return None
            return max(-Progress._BIGGEST, min(Progress._BIGGEST, value))  # only an infinity changes
        return value if -Progress._BIGGEST <= value <= Progress._BIGGEST else Progress._float(value)


_set_progress, _set_total, _set_message, _set_raw = (
    Progress.__dict__[name].__set__ for name in ("progress", "total", "message", "raw"))
