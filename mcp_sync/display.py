"""How results look in Jupyter and IPython: HTML and plain-text renderings.

Owns turning the result types (`mcp_sync.types`) into readable HTML tables
and blocks (`to_html`) and text (`to_text`), which it installs as what the
types' `_repr_html_` and `_repr_pretty_` hooks call (`types.show_with`;
`import mcp_sync` imports this module). It knows nothing of clients or transports.

Everything a server sent is untrusted: every string goes through
`html.escape`; images are shown only for a raster type (`IMAGE_TYPES`)
whose base64 decodes, as a data URI inside ``<img>``; descriptions are
rendered as a small subset of Markdown (`markdown_html`) whose only links
are http, https and mailto ones (a resource link's URI is shown, never made
a link); and sizes are capped so a huge result cannot freeze a notebook.

Nor may a server's mistakes break a rendering: `from_wire` keeps most fields
as sent, so any field may hold any JSON value. Every piece a server sent
reaches the output through `_cut` or `_short`, which take any value (a
non-string is shown as its compact JSON) and cap its size with a visible
note; and the terminal view (`to_text`) shows control characters (but
newline and tab) as visible escapes, as the ``mcp-sync`` command does, so a
server cannot clear, recolour or retitle the terminal.

Example::

    >>> from mcp_sync.types import Tool
    >>> print(to_text(Tool.from_wire({"name": "add", "description": "Add two numbers.",
    ...     "inputSchema": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}})))
    Tool add: Add two numbers.
      a  integer  required
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from .control_chars import neutralise
from .types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    CompleteResult,
    EmbeddedResource,
    GetPromptResult,
    ImageContent,
    ItemList,
    Page,
    Prompt,
    PromptMessage,
    ReadResourceResult,
    Resource,
    ResourceLink,
    ResourceTemplate,
    TextContent,
    TextResourceContents,
    Tool,
    UnknownContent,
    WireModel,
    show_with,
)

__all__ = ["to_html", "to_text", "table", "Table", "markdown_html", "MAX_IMAGE_BYTES", "MAX_TEXT_CHARS",
           "IMAGE_TYPES"]

#: Larger images (decoded size) are described, not embedded.
MAX_IMAGE_BYTES = 2 * 1024 * 1024
# SVG is left out on purpose: inside <img> a browser runs none of its script,
# but an SVG is a document (script, external references), and a notebook saved
# with its outputs is shown by other renderers and exporters too. An SVG, like
# any type not listed, is described (type and size), not embedded.
#: The image types embedded in ``<img>`` (as a data URI): raster formats only.
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
#: Longer texts (and JSON) are cut, with a note of how much was left out.
MAX_TEXT_CHARS = 20_000
#: Rows shown in a table of a list.
MAX_ROWS = 500
#: A description in a table cell: its first line, this long at most.
_CELL_CHARS = 160
#: A name, URI, media type, cursor or other one-line piece: this long at most.
_LABEL_CHARS = 1000
_MEDIA_TYPE = re.compile(r"^[a-z]+/[a-z0-9.+\-]+$")
_STYLE = (
    "<style>.mcp-sync table{border-collapse:collapse;margin:.3em 0}"
    ".mcp-sync th,.mcp-sync td{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top}"
    ".mcp-sync pre{white-space:pre-wrap;margin:.3em 0}"
    ".mcp-sync-md p,.mcp-sync-md ul,.mcp-sync-md ol{margin:.3em 0}"
    ".mcp-sync-legend{font-size:90%;color:#555}"
    ".mcp-sync-error{border-left:4px solid #c00;padding-left:6px}"
    ".mcp-sync-error .mcp-sync-title{color:#c00}</style>"
)


# -- the two entry points ----------------------------------------------------------


def to_html(obj: Any) -> str:
    """An HTML rendering of a result, tool, resource, prompt, `Page` or a
    list of them (what Jupyter shows). Every server string is escaped."""
    return f'<div class="mcp-sync">{_STYLE}{_html(obj)}</div>'


def to_text(obj: Any) -> str:
    """A plain-text rendering of the same (what IPython's terminal shows),
    with control characters but newline and tab shown as escapes."""
    return neutralise("\n".join(_text(obj)))


show_with(html=to_html, text=to_text)


class Table(ItemList):
    """A list of tools, resources, templates or prompts shown as a table in
    Jupyter; made by `table()`. A plain `list` otherwise (an `ItemList`,
    what the list calls return)."""

    # IPython prefers a class's own __repr__ to an inherited _repr_pretty_.
    _repr_pretty_ = ItemList._repr_pretty_

    def __repr__(self) -> str:
        return f"Table({list.__repr__(self)})"


def table(items: Iterable[Any]) -> Table:
    """Any list of results (a filtered `list_tools()`, say) as a table in
    Jupyter.

    Example::

        from mcp_sync.display import table
        table(t for t in client.list_tools() if "weather" in t.name)
    """
    return Table(items)


# -- HTML ----------------------------------------------------------------------------


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _html(obj: Any) -> str:
    if isinstance(obj, Page):
        more = f"<p>next_cursor: <code>{_e(_short(obj.next_cursor))}</code></p>" if obj.next_cursor else ""
        return _html_list(obj.items) + more
    if isinstance(obj, (list, tuple)):
        return _html_list(list(obj))
    if isinstance(obj, Tool):
        return _html_tool(obj)
    if isinstance(obj, CallToolResult):
        return _html_result(obj)
    if isinstance(obj, (Resource, ResourceTemplate)):
        return _html_fields(obj, type(obj).__name__, _label(obj))
    if isinstance(obj, Prompt):
        return _html_prompt(obj)
    if isinstance(obj, GetPromptResult):
        parts = [markdown_html(obj.description) if obj.description else ""]
        parts += [_html_message(m) for m in obj.messages]
        return _block("Prompt messages", "".join(parts))
    if isinstance(obj, ReadResourceResult):
        return _block("Resource contents", "".join(_html_contents(c) for c in obj.contents))
    if isinstance(obj, CompleteResult):
        more = " (more available)" if obj.has_more else ""
        return _block("Completions", "<ul>" + "".join(f"<li>{_e(_short(v))}</li>" for v in obj.values[:MAX_ROWS])
                      + f"</ul><p>{len(obj.values)} values{_e(more)}</p>")
    if isinstance(obj, PromptMessage):
        return _html_message(obj)
    if isinstance(obj, WireModel):
        if _is_content(obj):
            return _html_content(obj)
        return _html_fields(obj, type(obj).__name__, "")
    return f"<pre>{_e(_cut(repr(obj)))}</pre>"


def _block(title: str, body: str, *, error: bool = False) -> str:
    css = ' class="mcp-sync-error"' if error else ""
    return f'<div{css}><b class="mcp-sync-title">{title}</b>{body}</div>'


def _html_tool(tool: Tool) -> str:
    title = f"Tool <code>{_e(_short(tool.name))}</code>"
    if tool.title and tool.title != tool.name:
        title += f" ({_e(_short(tool.title))})"
    body = markdown_html(tool.description) if tool.description else ""
    hints = _hints(tool.annotations)
    if hints:
        body += f"<p><i>{_e(hints)}</i></p>"
    rows = _parameters(tool.input_schema)
    body += _html_table(["parameter", "type", "required", "description"],
                        [[f"<code>{_e(n)}</code>", _e(t), "yes" if r else "", _e(d)] for n, t, r, d in rows]) \
        if rows else "<p>No parameters.</p>"
    if tool.output_schema:
        out = _parameters(tool.output_schema)
        body += "<p>Structured output:</p>" + (
            _html_table(["field", "type", "required", "description"],
                        [[f"<code>{_e(n)}</code>", _e(t), "yes" if r else "", _e(d)] for n, t, r, d in out])
            if out else f"<pre>{_e(_cut(_json(tool.output_schema)))}</pre>")
    return _block(title, body)


def _html_result(result: CallToolResult) -> str:
    title = "Tool error" if result.is_error else "Tool result"
    parts = [_html_content(block) for block in _shown_content(result)]
    if result.structured_content is not None:
        parts.append(f"<p>Structured content:</p><pre>{_e(_cut(_json(result.structured_content)))}</pre>")
    if not parts:
        parts.append("<p><i>(no content)</i></p>")
    return _block(title, "".join(parts), error=result.is_error)


def _html_content(block: Any) -> str:
    if isinstance(block, TextContent):
        return f"<pre>{_e(_cut(block.text))}</pre>"
    if isinstance(block, ImageContent):
        mime = _short(block.mime_type).lower()
        return _html_image(block.data, mime, f"image: {mime or 'no type'}", alt=f"{mime} image", claimed=True)
    if isinstance(block, AudioContent):
        return _html_audio(block)
    if isinstance(block, ResourceLink):
        about = f" {_e(_cut(block.description))}" if block.description else ""
        return f"<p>Resource link <code>{_e(_short(block.uri))}</code> {_e(_short(block.name))}{about}</p>"
    if isinstance(block, EmbeddedResource):
        return _html_contents(block.resource) if block.resource is not None else ""
    return f"<pre>{_e(_cut(_json(getattr(block, 'raw', block))))}</pre>"


def _html_image(data: Any, mime: str, caption: str, *, alt: str, claimed: bool) -> str:
    """`caption` and the decoded size, in the words `to_text` uses, and below
    them the image when it may be embedded, or why it is not. `claimed`: the
    block says it is an image (image content), so any type gets a reason;
    a resource's blob gets one only for an ``image/*`` type."""
    size = _decoded_size(data)
    notes = [caption, _bytes(size) if size is not None else "not valid base64"]
    image = ""
    if size is not None and (claimed or mime.startswith("image/")):
        if mime not in IMAGE_TYPES:
            notes.append("not shown: only PNG, JPEG, GIF and WebP images are embedded")
        elif size > MAX_IMAGE_BYTES:
            notes.append(f"too large to show (over {_bytes(MAX_IMAGE_BYTES)})")
        else:
            # The type is one of IMAGE_TYPES and the data decodes as base64, so
            # nothing in the URI can end the attribute (and it is escaped anyway).
            source = f"data:{mime};base64,{''.join(data.split())}"
            image = f'<img src="{_e(source)}" alt="{_e(alt)}" style="max-width:100%"/>'
    return f"<p><i>[{_e(', '.join(notes))}]</i></p>{image}"


def _html_audio(block: AudioContent) -> str:
    mime = _short(block.mime_type).lower()
    size = _decoded_size(block.data)
    if size is None or not _MEDIA_TYPE.match(mime) or not mime.startswith("audio/"):
        return f"<p><i>[audio: {_e(mime or 'no type')}, not valid base64 audio data]</i></p>"
    if size > MAX_IMAGE_BYTES:
        return f"<p><i>[audio: {_e(mime)}, {_bytes(size)}, too large to show]</i></p>"
    # The data is checked base64 and the type a plain media type: nothing here can end the attribute.
    source = f"data:{mime};base64,{''.join(block.data.split())}"
    return f'<audio controls src="{_e(source)}"></audio>'


def _html_contents(contents: Any) -> str:
    head = f"<p><code>{_e(_short(contents.uri))}</code> {_e(_short(contents.mime_type))}</p>"
    if isinstance(contents, TextResourceContents):
        return head + f"<pre>{_e(_cut(contents.text))}</pre>"
    if isinstance(contents, BlobResourceContents):
        mime = _short(contents.mime_type).lower()
        return head + _html_image(contents.blob, mime, "binary", alt=_short(contents.uri), claimed=False)
    return head


def _html_prompt(prompt: Prompt) -> str:
    body = markdown_html(prompt.description) if prompt.description else ""
    rows = [[f"<code>{_e(_short(a.name))}</code>", "yes" if a.required else "", _e(_cut(a.description))]
            for a in prompt.arguments]
    body += _html_table(["argument", "required", "description"], rows) if rows else "<p>No arguments.</p>"
    return _block(f"Prompt <code>{_e(_short(prompt.name))}</code>", body)


def _html_message(message: PromptMessage) -> str:
    content = _html_content(message.content) if message.content is not None else ""
    return f"<div><b>{_e(_short(message.role))}</b>{content}</div>"


def _html_fields(obj: Any, kind: str, label: str) -> str:
    rows = [[_e(name), markdown_html(value) if name == "description" and isinstance(value, str)
             else f"<pre>{_e(_cut(value if isinstance(value, str) else _json(value)))}</pre>"]
            for name, value in _fields(obj)]
    return _block(f"{_e(kind)} <code>{_e(label)}</code>" if label else _e(kind), _html_table(["field", "value"], rows))


def _html_list(items: list[Any]) -> str:
    header, rows = _rows(items)
    shown = rows[:MAX_ROWS]
    # A description cell is the first line of Markdown: its inline marks are rendered.
    body = _html_table(header, [[_inline(cell) if header[i] == "description" else _e(cell)
                                 for i, cell in enumerate(row)] for row in shown])
    note = f"<p>{len(items)} items, the first {MAX_ROWS} shown</p>" if len(rows) > MAX_ROWS else \
        f"<p>{len(items)} item{'s' if len(items) != 1 else ''}</p>"
    legend = _legend(items)
    return body + (f'<p class="mcp-sync-legend">{_e(legend)}</p>' if legend else "") + note


def _html_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """`header` and the cells are HTML already (escaped by the caller)."""
    head = "".join(f"<th>{h}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


# -- Markdown (descriptions) ---------------------------------------------------------------
#
# A small subset, safe by construction: every piece of server text reaches
# the page through `_e` (html.escape), and the only tags are the ones written
# here, each opened and closed by the same step, so they always nest. The
# subset: paragraphs; a line break for each newline (descriptions are written
# as plain text as often as Markdown); `code` spans and fenced code; **bold**
# and *italic* (also with `_`, not inside a word, so snake_case stays as it
# is); bullet and numbered lists, nested by indentation; headings as bold
# lines; backslash escapes; links, only to http, https and mailto addresses
# (anything else, `javascript:` say, stays as the text it was). Everything
# else is shown as written.

_MD_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_MD_ITEM = re.compile(r"^( *)(?:([-*+])|(\d{1,9})[.)])[ \t]+(.*)$")
_MD_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.*?)[ \t#]*$")
#: Spans are bounded (and run within one paragraph) so that no input makes
#: the patterns backtrack for long.
_MD_CODE = re.compile(r"(`+)(?!`)(.{1,2000}?)(?<!`)\1(?!`)", re.S)
# A link's address: no space, quote, angle bracket, backtick, parenthesis
# or control character, so it cannot end the attribute even before escaping.
_MD_ADDRESS = r"[^\s\"'<>`()\x00-\x1f\x7f]{1,2000}"
_MD_LINK = re.compile(r"\[([^\[\]\n]{1,500})\]\((" + _MD_ADDRESS + r")\)")
_MD_BARE = re.compile(r"(?<![\w/])https?://" + _MD_ADDRESS)
_MD_SAFE_ADDRESS = re.compile(r"(?:https?://|mailto:)[^\s]", re.I)
_MD_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
_MD_STRONG = re.compile(r"(?<![*\w])\*\*(?=[^\s*])([^<]{1,2000}?)(?<=[^\s*])\*\*(?!\*)"
                        r"|(?<![_\w])__(?=[^\s_])([^<]{1,2000}?)(?<=[^\s_])__(?![_\w])")
_MD_EM = re.compile(r"(?<![*\w])\*(?=[^\s*])([^<*]{1,2000}?)(?<=[^\s*])\*(?![*\w])"
                    r"|(?<![_\w])_(?=[^\s_])([^<_]{1,2000}?)(?<=[^\s_])_(?![_\w])")
_MD_SLOT = re.compile(r"\x00(\d+)\x00")


def markdown_html(text: Any) -> str:
    """A description (tool, prompt, resource) as HTML: the Markdown subset
    above, with every character the server sent escaped. A description
    that is not a string (a server's mistake) is shown as its compact
    JSON, as written: it is no Markdown.

    Example::

        >>> print(markdown_html("**Two** and `code`.\\n\\n- <b>x</b>"))
        <div class="mcp-sync-md"><p><strong>Two</strong> and <code>code</code>.</p><ul><li>&lt;b&gt;x&lt;/b&gt;</li></ul></div>
    """
    if not isinstance(text, str):
        return f'<div class="mcp-sync-md"><p>{_e(_cut(text))}</p></div>'
    lines = _cut(text).replace("\r\n", "\n").replace("\r", "\n").split("\n")
    out: list[str] = []
    words: list[str] = []  # the lines of the paragraph or list item being read
    lists: list[tuple[str, int]] = []  # the open lists, outermost first: (tag, indent)

    def end_words() -> None:
        if words:
            inline = _inline("\n".join(words))
            out.append(inline if lists else f"<p>{inline}</p>")  # in a list: the open <li>'s text
            words.clear()

    def end_lists(indent: int = -1) -> None:
        while lists and lists[-1][1] > indent:
            out.append(f"</li></{lists.pop()[0]}>")

    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        fence = _MD_FENCE.match(line)
        if fence:
            end_words()
            end_lists()
            mark = fence.group(1)
            closing = re.compile(r" {0,3}" + re.escape(mark[0]) + "{" + str(len(mark)) + r",}[ \t]*")
            code = []
            while index < len(lines) and not closing.fullmatch(lines[index]):
                code.append(lines[index])
                index += 1
            index += 1  # the closing fence (or the end: an unclosed fence runs to it)
            out.append(f"<pre><code>{_e(chr(10).join(code))}</code></pre>")
            continue
        if not line.strip():
            end_words()
            end_lists()
            continue
        item = _MD_ITEM.match(line)
        if item:
            end_words()
            indent, tag = len(item.group(1)), "ul" if item.group(2) else "ol"
            end_lists(indent)
            if lists and lists[-1][1] == indent and lists[-1][0] != tag:
                end_lists(indent - 1)  # the other kind of list at the same depth: a new list
            if lists and lists[-1][1] == indent:
                out.append("</li><li>")
            else:  # a first list, or one nested in the open item
                number = int(item.group(3) or 1)
                out.append(f'<{tag} start="{number}"><li>' if tag == "ol" and number != 1 else f"<{tag}><li>")
                lists.append((tag, indent))
            words.append(item.group(4))
            continue
        heading = _MD_HEADING.match(line)
        if heading and not lists:
            end_words()
            out.append(f"<p><b>{_inline(heading.group(1))}</b></p>")
            continue
        words.append(line.strip())  # a paragraph's next line, or an item's (lazy continuation)
    end_words()
    end_lists()
    return f'<div class="mcp-sync-md">{"".join(out)}</div>'


def _inline(text: str) -> str:
    """A paragraph's text with its inline Markdown as HTML, escaped.

    Code spans, backslash escapes and links are rendered first and put aside
    as numbered slots (NUL-delimited: a NUL from the server is replaced
    first, so it cannot forge one); the rest is escaped, then bold and
    italic, whose content may hold no tag, are marked; the slots go back
    last."""
    slots: list[str] = []

    def restore(html_: str) -> str:
        return _MD_SLOT.sub(lambda m: slots[int(m.group(1))], html_)

    def keep(html_: str) -> str:
        slots.append(html_)
        return f"\x00{len(slots) - 1}\x00"

    def code(match: re.Match[str]) -> str:
        body = match.group(2).replace("\n", " ")
        if len(body) > 2 and body[0] == body[-1] == " " and body.strip():
            body = body[1:-1]
        return keep(f"<code>{_e(body)}</code>")

    def link(match: re.Match[str]) -> str:
        label, address = match.group(1), match.group(2)
        if not _MD_SAFE_ADDRESS.match(address):
            return keep(_e(match.group(0)))  # shown as written, never as a link
        # The label's code spans and escapes are slots already: no link nests in a link.
        return keep(f'<a href="{_e(address)}" rel="noopener noreferrer" target="_blank">'
                    f"{restore(_emphasis(_e(label)))}</a>")

    def bare(match: re.Match[str]) -> str:
        address = match.group(0)
        trail = len(address) - len(address.rstrip(".,:;!?*_"))
        address, rest = address[:len(address) - trail], address[len(address) - trail:]
        return keep(f'<a href="{_e(address)}" rel="noopener noreferrer" target="_blank">{_e(address)}</a>') + rest

    text = text.replace("\x00", "\ufffd")
    text = _MD_CODE.sub(code, text)
    text = _MD_ESCAPE.sub(lambda m: keep(_e(m.group(1))), text)
    text = _MD_LINK.sub(link, text)
    text = _MD_BARE.sub(bare, text)
    text = _emphasis(_e(text))  # escaping leaves NULs and digits alone: the slots survive it
    return restore(text.replace("\n", "<br>\n"))


def _emphasis(escaped: str) -> str:
    """Bold, then italic, in escaped text. Neither's content may hold a `<`,
    so each pair of tags sits inside or outside every other: always nested."""
    escaped = _MD_STRONG.sub(lambda m: f"<strong>{m.group(1) or m.group(2)}</strong>", escaped)
    return _MD_EM.sub(lambda m: f"<em>{m.group(1) or m.group(2)}</em>", escaped)


# -- text ------------------------------------------------------------------------------


def _text(obj: Any) -> list[str]:
    if isinstance(obj, Page):
        lines = _text_list(obj.items)
        return lines + ([f"next_cursor: {_short(obj.next_cursor)}"] if obj.next_cursor else [])
    if isinstance(obj, (list, tuple)):
        return _text_list(list(obj))
    if isinstance(obj, Tool):
        lines = [f"Tool {_short(obj.name)}" + (f": {_first_line(obj.description)}" if obj.description else "")]
        hints = _hints(obj.annotations)
        if hints:
            lines.append(f"  ({hints})")
        lines += _aligned([[n, t, "required" if r else "", d] for n, t, r, d in _parameters(obj.input_schema)])
        if obj.output_schema:
            lines.append("  returns:")
            lines += ["  " + line for line in _aligned(
                [[n, t, "required" if r else "", d] for n, t, r, d in _parameters(obj.output_schema)])]
        return lines
    if isinstance(obj, CallToolResult):
        lines = ["Tool error:" if obj.is_error else "Tool result:"]
        for block in _shown_content(obj):
            lines += ["  " + line for line in _text_content(block)]
        if obj.structured_content is not None:
            lines.append("  structured content:")
            lines += ["    " + line for line in _cut(_json(obj.structured_content)).splitlines()]
        return lines
    if isinstance(obj, Prompt):
        lines = [f"Prompt {_short(obj.name)}" + (f": {_first_line(obj.description)}" if obj.description else "")]
        lines += _aligned([[a.name, "required" if a.required else "", a.description or ""] for a in obj.arguments])
        return lines
    if isinstance(obj, GetPromptResult):
        lines = [f"Prompt messages{': ' + _cut(obj.description) if obj.description else ''}"]
        for message in obj.messages:
            content = _text_content(message.content) if message.content is not None else [""]
            lines.append(f"  {_short(message.role)}: {content[0]}")
            lines += ["    " + line for line in content[1:]]
        return lines
    if isinstance(obj, ReadResourceResult):
        lines = ["Resource contents:"]
        for contents in obj.contents:
            lines += ["  " + line for line in _text_contents(contents)]
        return lines
    if isinstance(obj, CompleteResult):
        values = _cut(", ".join(_short(v) for v in obj.values[:MAX_ROWS]))
        return [f"Completions: {values}" + (" (more available)" if obj.has_more else "")]
    if isinstance(obj, WireModel):
        if _is_content(obj):
            return _text_content(obj)
        label = _label(obj)
        lines = [f"{type(obj).__name__} {label}".rstrip()]
        lines += _aligned([[name, _first_line(value if isinstance(value, str) else _json(value))]
                           for name, value in _fields(obj)])
        return lines
    return [repr(obj)]


def _text_content(block: Any) -> list[str]:
    if isinstance(block, TextContent):
        return _cut(block.text).splitlines() or [""]
    if isinstance(block, (ImageContent, AudioContent)):
        size = _decoded_size(block.data)
        about = _bytes(size) if size is not None else "invalid data"
        return [f"[{block.type}: {_short(block.mime_type) or 'no type'}, {about}]"]
    if isinstance(block, ResourceLink):
        return [f"[resource link: {_short(block.uri)}" + (f" {_short(block.name)}" if block.name else "") + "]"]
    if isinstance(block, EmbeddedResource):
        return _text_contents(block.resource) if block.resource is not None else ["[resource]"]
    return _cut(_json(getattr(block, "raw", block))).splitlines()


def _text_contents(contents: Any) -> list[str]:
    head = _short(contents.uri) + (f" ({_short(contents.mime_type)})" if contents.mime_type else "")
    if isinstance(contents, TextResourceContents):
        return [head + ":"] + ["  " + line for line in _cut(contents.text).splitlines()]
    size = _decoded_size(getattr(contents, "blob", ""))
    return [f"{head}: [binary, {_bytes(size) if size is not None else 'not valid base64'}]"]


def _text_list(items: list[Any]) -> list[str]:
    header, rows = _rows(items)
    # A terminal is narrower than a notebook's table: shorter cells.
    rows = [[cell if len(cell) <= 80 else cell[:79] + "…" for cell in row] for row in rows]
    lines = _aligned([header, *rows[:MAX_ROWS]], indent="")
    if len(rows) > MAX_ROWS:
        lines.append(f"... {len(rows) - MAX_ROWS} more")
    legend = _legend(items)
    return lines + ([legend] if legend else [])


def _aligned(rows: Sequence[Sequence[str]], indent: str = "  ") -> list[str]:
    if not rows:
        return []
    cells = [[_one_line(_cut(cell)) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in cells if i < len(row)) for i in range(max(map(len, cells)))]
    return [indent + "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in cells]


# -- shared pieces -----------------------------------------------------------------------


def _rows(items: list[Any]) -> tuple[list[str], list[list[str]]]:
    """A table's header and rows for a list: columns chosen by the type of
    its items (mixed or unknown items get one column of text)."""
    if items and all(isinstance(i, Tool) for i in items):
        return ["name", "description", "parameters"], [
            [_short(t.name), _first_line(t.description), _short(", ".join(
                f"{n}{'*' if r else ''}" for n, _, r, _ in _parameters(t.input_schema)))] for t in items]
    if items and all(isinstance(i, Resource) for i in items):
        return ["uri", "name", "mime type", "description"], [
            [_short(r.uri), _short(r.name), _short(r.mime_type), _first_line(r.description)] for r in items]
    if items and all(isinstance(i, ResourceTemplate) for i in items):
        return ["uri template", "name", "description"], [
            [_short(r.uri_template), _short(r.name), _first_line(r.description)] for r in items]
    if items and all(isinstance(i, Prompt) for i in items):
        return ["name", "description", "arguments"], [
            [_short(p.name), _first_line(p.description),
             _short(", ".join(f"{_short(a.name)}{'*' if a.required else ''}" for a in p.arguments))] for p in items]
    return ["item"], [[_first_line(" ".join(_text(i)))] for i in items]


def _legend(items: list[Any]) -> str:
    """What the `*` after a name in a list's table means, when the table has one."""
    if items and all(isinstance(i, Tool) for i in items) and any(
            required for t in items for _, _, required, _ in _parameters(t.input_schema)):
        return "* required parameter"
    if items and all(isinstance(i, Prompt) for i in items) and any(a.required for p in items for a in p.arguments):
        return "* required argument"
    return ""


def _shown_content(result: CallToolResult) -> list[Any]:
    """The content blocks shown beside a result's structured content.

    The spec asks a tool that returns structured content to send it as JSON
    text too, for clients that read only `content`: that text block says
    nothing the structured view does not, so it is left out. A text that
    parses to anything else (or is not JSON) is shown, as is every block of
    a result without structured content."""
    if result.structured_content is None:
        return list(result.content)
    return [block for block in result.content
            if not (isinstance(block, TextContent) and _repeats(block.text, result.structured_content))]


def _repeats(text: Any, value: Any) -> bool:
    if not isinstance(text, str) or not text.lstrip().startswith(("{", "[")):
        return False  # cheap: structured content is an object
    try:
        return _same_json(json.loads(text), value)
    except (ValueError, RecursionError):
        return False


def _same_json(a: Any, b: Any) -> bool:
    """Equal as JSON values: `true` is not `1` (as it is to Python's `==`), `1` is `1.0`."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_same_json(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def _parameters(schema: Mapping[str, Any] | None) -> list[tuple[str, str, bool, str]]:
    """(name, type, required, description) of each property of an object schema,
    each capped (`_short`): a schema is the server's too."""
    if not isinstance(schema, Mapping):
        return []
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return []
    required = schema.get("required")
    required_names = set(required) if isinstance(required, list) and all(
        isinstance(r, str) for r in required) else set()
    rows = []
    for name, prop in properties.items():
        prop = prop if isinstance(prop, Mapping) else {}
        description = _first_line(prop.get("description"))  # a non-string as its JSON, like any field
        if "default" in prop:
            description = (description + " " if description else "") + f"(default {_short(_json(prop['default']))})"
        rows.append((_short(name), _short(_type_of(prop)), name in required_names, description))
    return rows


def _type_of(prop: Mapping[str, Any], depth: int = 0) -> str:
    """A short readable type for a JSON Schema: 'integer', 'array of string',
    'one of "a", "b"', 'string | null'."""
    if depth > 3:
        return "…"
    if isinstance(prop.get("enum"), list):
        return "one of " + ", ".join(_json(v) for v in prop["enum"][:10]) + (", …" if len(prop["enum"]) > 10 else "")
    if "const" in prop:
        return f"= {_json(prop['const'])}"
    kind = prop.get("type")
    if isinstance(kind, list):
        return " | ".join(str(k) for k in kind)
    if kind == "array" and isinstance(prop.get("items"), Mapping):
        return "array of " + _type_of(prop["items"], depth + 1)
    if isinstance(kind, str):
        return kind + (f" ({prop['format']})" if isinstance(prop.get("format"), str) else "")
    for key in ("anyOf", "oneOf"):
        options = prop.get(key)
        if isinstance(options, list):
            return " | ".join(_type_of(o, depth + 1) if isinstance(o, Mapping) else "?" for o in options[:6])
    ref = prop.get("$ref")
    if isinstance(ref, str):
        return ref.rsplit("/", 1)[-1]
    return "any"


def _hints(annotations: Mapping[str, Any] | None) -> str:
    if not isinstance(annotations, Mapping):
        return ""
    names = {"readOnlyHint": "read-only", "destructiveHint": "destructive", "idempotentHint": "idempotent",
             "openWorldHint": "open world"}
    return ", ".join(label for key, label in names.items() if annotations.get(key) is True)


def _fields(obj: Any) -> list[tuple[str, Any]]:
    """The set attrs fields of a result, without its raw dict."""
    out = []
    for field in attrs.fields(type(obj)):
        value = getattr(obj, field.name)
        if field.name in ("raw",) or value is None or value == {} or value == []:
            continue
        out.append((field.name, value.to_wire() if isinstance(value, WireModel) else value))
    return out


def _label(obj: Any) -> str:
    for name in ("name", "uri", "uri_template"):
        value = getattr(obj, name, None)
        if isinstance(value, str) and value:
            return _short(value)
    return ""


def _is_content(obj: Any) -> bool:
    return isinstance(obj, (TextContent, ImageContent, AudioContent, ResourceLink, EmbeddedResource, UnknownContent))


def _json(value: Any) -> str:
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, default=str)
    except (TypeError, ValueError):  # a cycle, say
        return repr(value)


def _as_text(value: Any) -> str:
    """Any value a server sent as text: a string as it is, None as "", and
    anything else (a wrong JSON type: a number, a list) as its compact JSON.
    Never raises."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    except (TypeError, ValueError, RecursionError):  # a cycle, say: not from JSON
        return "…"


def _cut(value: Any, limit: int | None = None, *, inline: bool = False) -> str:
    """`value` as text (`_as_text`), at most `limit` characters (default
    `MAX_TEXT_CHARS`, read now: tests lower it) and a note of how many
    more there were. Every piece of a server's text reaches the output
    through here or `_short`: that is what bounds a rendering's size."""
    text = _as_text(value)
    limit = MAX_TEXT_CHARS if limit is None else limit
    if len(text) <= limit:
        return text
    return text[:limit] + ("" if inline else "\n") + f"… ({len(text) - limit} more characters)"


def _short(value: Any) -> str:
    """A one-line piece (a name, URI, media type, cursor) as text, cut at `_LABEL_CHARS`."""
    return _cut(value, _LABEL_CHARS, inline=True)


def _first_line(text: Any) -> str:
    line = _as_text(text).strip().split("\n", 1)[0]
    return line if len(line) <= _CELL_CHARS else line[:_CELL_CHARS - 1] + "…"


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _decoded_size(data: str) -> int | None:
    """The decoded size of base64 `data`, or None when it is not base64."""
    compact = "".join(data.split()) if isinstance(data, str) else ""
    if len(compact) % 4 or not re.fullmatch(r"[A-Za-z0-9+/]*={0,2}", compact):
        return None
    if len(compact) <= 4 * MAX_IMAGE_BYTES:  # checked whole while small enough to be shown
        import base64  # loaded when media is shown, not by `import mcp_sync`
        import binascii

        try:
            return len(base64.b64decode(compact, validate=True))
        except (binascii.Error, ValueError):
            return None
    return len(compact) // 4 * 3 - compact[-2:].count("=")


def _bytes(size: int) -> str:
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / (1024 * 1024):.1f} MB"
