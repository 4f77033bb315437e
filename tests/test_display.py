"""How results look in Jupyter (`_repr_html_`) and IPython (`_repr_pretty_`)."""

import base64
import html
import html.parser

import pytest
from IPython.lib.pretty import pretty

import mcp_sync
from mcp_sync import display
from mcp_sync.testing import demo_server
from mcp_sync.types import (
    CallToolResult,
    CompleteResult,
    GetPromptResult,
    ItemList,
    Page,
    Prompt,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    Tool,
)

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 32).decode()

ADD = Tool.from_wire({
    "name": "add",
    "description": "Add two numbers.\nSecond line.",
    "inputSchema": {
        "type": "object",
        "properties": {
            "a": {"type": "integer", "description": "The first."},
            "b": {"type": "number", "default": 1},
            "unit": {"enum": ["m", "km"]},
            "tags": {"type": "array", "items": {"type": "string"}},
            "note": {"type": ["string", "null"]},
        },
        "required": ["a"],
    },
    "outputSchema": {"type": "object", "properties": {"sum": {"type": "number"}}, "required": ["sum"]},
    "annotations": {"readOnlyHint": True},
})


class Tags(html.parser.HTMLParser):
    """The tags and text of an HTML fragment, to check its structure."""

    def __init__(self, source: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.cells: list[str] = []
        self._in_cell = False
        self.feed(source)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag in ("td", "th"):
            self._in_cell = True
            self.cells.append("")

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self._in_cell = False

    def handle_data(self, data):
        if self._in_cell:
            self.cells[-1] += data

    def names(self) -> list[str]:
        return [tag for tag, _ in self.tags]


def test_a_tool_shows_a_table_of_its_parameters():
    source = ADD._repr_html_()
    cells = Tags(source).cells
    assert cells[:4] == ["parameter", "type", "required", "description"]
    assert cells[4:8] == ["a", "integer", "yes", "The first."]
    assert cells[8:12] == ["b", "number", "", "(default 1)"]
    assert cells[13] == 'one of "m", "km"'
    assert cells[17] == "array of string"
    assert cells[21] == "string | null"
    assert ["field", "type", "required", "description", "sum", "number", "yes", ""] == cells[24:32]
    assert "Add two numbers.\nSecond line." in source and "read-only" in source


def test_a_tool_in_plain_text():
    text = pretty(ADD)
    lines = text.splitlines()
    assert lines[0] == "Tool add: Add two numbers."
    assert lines[1] == "  (read-only)"
    assert lines[2].split() == ["a", "integer", "required", "The", "first."]
    assert "  returns:" in lines
    assert "inputSchema" not in text and "{" not in text


def test_server_text_is_escaped():
    evil = Tool.from_wire({
        "name": "x<img src=x onerror=alert(1)>",
        "description": "<script>alert('hi')</script>",
        "inputSchema": {"type": "object", "properties": {
            "<b>p</b>": {"type": "string", "description": "\"><script>bad()</script>"}}},
    })
    for source in (evil._repr_html_(), display.to_html([evil]), Page([evil], "<i>c</i>")._repr_html_()):
        assert "<script>" not in source and "<b>p</b>" not in source and "<img" not in source and "<i>c" not in source
        assert "&lt;script&gt;" in source
    result = CallToolResult.from_wire({"content": [{"type": "text", "text": "</pre><script>x()</script>"}],
                                       "structuredContent": {"k": "<script>"}})
    assert "<script>" not in result._repr_html_()


def test_a_result_shows_text_image_and_structured_content():
    result = CallToolResult.from_wire({
        "content": [
            {"type": "text", "text": "Sunny, 21 °C"},
            {"type": "image", "data": PNG, "mimeType": "image/png"},
            {"type": "resource_link", "uri": "javascript:alert(1)", "name": "link"},
        ],
        "structuredContent": {"temperature": 21, "sky": "sunny"},
    })
    source = result._repr_html_()
    tags = Tags(source)
    (image,) = [attrs for tag, attrs in tags.tags if tag == "img"]
    assert image["src"] == f"data:image/png;base64,{PNG}"
    assert "Sunny, 21 °C" in source
    assert '{\n  "temperature": 21,\n  "sky": "sunny"\n}' in html.unescape(source)
    assert 'class="mcp-sync-error"' not in source and "Tool result" in source
    assert "href" not in source  # a link from a server is never made clickable
    text = pretty(result)
    assert text.splitlines()[:3] == ["Tool result:", "  Sunny, 21 °C", "  [image: image/png, 40 bytes]"]
    assert '      "temperature": 21,' in text


def test_images_that_are_too_large_bad_or_not_images_are_described_not_embedded(monkeypatch):
    monkeypatch.setattr(display, "MAX_IMAGE_BYTES", 16)
    cases = {
        "too large to show": {"data": PNG, "mimeType": "image/png"},
        "not valid base64": {"data": 'AAAA" onerror="x', "mimeType": "image/png"},
        "no type": {"data": PNG},
    }
    for expected, fields in cases.items():
        source = CallToolResult.from_wire({"content": [{"type": "image", **fields}]})._repr_html_()
        assert "<img" not in source and expected in source, expected
    svg_as_text = {"type": "image", "data": PNG, "mimeType": 'text/html"><script>'}
    source = CallToolResult.from_wire({"content": [svg_as_text]})._repr_html_()
    assert "<img" not in source and "<script>" not in source


def test_an_error_result_is_visibly_an_error():
    result = CallToolResult.from_wire({"content": [{"type": "text", "text": "no such city"}], "isError": True})
    source = result._repr_html_()
    assert 'class="mcp-sync-error"' in source and "Tool error" in source and "no such city" in source
    assert pretty(result).splitlines() == ["Tool error:", "  no such city"]


def test_lists_and_pages_are_tables():
    tools = [ADD, Tool.from_wire({"name": "echo", "description": "Echo.", "inputSchema": {"type": "object"}})]
    for shown in (display.to_html(tools), Page(tools, "next")._repr_html_(), ItemList(tools)._repr_html_(),
                  display.table(tools)._repr_html_()):
        cells = Tags(shown).cells
        assert cells[:3] == ["name", "description", "parameters"]
        assert cells[3:6] == ["add", "Add two numbers.", "a*, b, unit, tags, note"]
        assert cells[6:9] == ["echo", "Echo.", ""]
    assert "next_cursor" in Page(tools, "next")._repr_html_()
    assert pretty(ItemList(tools)).splitlines()[0].split() == ["name", "description", "parameters"]
    resources = [Resource.from_wire({"uri": "demo://readme", "name": "readme", "mimeType": "text/plain"})]
    assert Tags(display.to_html(resources)).cells[4:7] == ["demo://readme", "readme", "text/plain"]
    templates = [ResourceTemplate.from_wire({"uriTemplate": "demo://{x}", "name": "x"})]
    assert Tags(display.to_html(templates)).cells[3:5] == ["demo://{x}", "x"]
    prompts = [Prompt.from_wire({"name": "greet", "arguments": [{"name": "who", "required": True}, {"name": "tone"}]})]
    assert Tags(display.to_html(prompts)).cells[3:6] == ["greet", "", "who*, tone"]
    assert "1 item" in display.to_html(prompts) and "Table([" in repr(display.table(prompts))


def test_a_long_list_is_cut(monkeypatch):
    monkeypatch.setattr(display, "MAX_ROWS", 3)
    tools = [Tool.from_wire({"name": f"t{i}"}) for i in range(10)]
    assert Tags(display.to_html(tools)).names().count("tr") == 4
    assert "10 items, the first 3 shown" in display.to_html(tools)
    assert pretty(display.table(tools)).splitlines()[-1] == "... 7 more"


def test_prompts_resources_and_completions():
    prompt = Prompt.from_wire({"name": "greet", "description": "Say hi.",
                               "arguments": [{"name": "who", "description": "<b>whom</b>", "required": True}]})
    assert Tags(prompt._repr_html_()).cells == ["argument", "required", "description", "who", "yes", "<b>whom</b>"]
    rendered = GetPromptResult.from_wire({"messages": [{"role": "user", "content": {"type": "text", "text": "Hi Ada"}}]})
    assert pretty(rendered).splitlines() == ["Prompt messages", "  user: Hi Ada"]
    read = ReadResourceResult.from_wire({"contents": [{"uri": "demo://readme", "text": "# Readme"},
                                                      {"uri": "demo://logo", "blob": PNG}]})
    assert "# Readme" in read._repr_html_() and "binary, 40 bytes" in read._repr_html_()
    assert pretty(read).splitlines() == ["Resource contents:", "  demo://readme:", "    # Readme",
                                         "  demo://logo: [binary, 40 bytes]"]
    done = CompleteResult.from_wire({"completion": {"values": ["Paris", "Prague"], "hasMore": True}})
    assert pretty(done) == "Completions: Paris, Prague (more available)"


def test_long_text_is_cut(monkeypatch):
    monkeypatch.setattr(display, "MAX_TEXT_CHARS", 10)
    result = CallToolResult.from_wire({"content": [{"type": "text", "text": "x" * 50}]})
    assert "x" * 11 not in result._repr_html_() and "(40 more characters)" in result._repr_html_()


def test_other_results_show_their_fields():
    info = mcp_sync.Implementation.from_wire({"name": "demo", "version": "1.0"})
    assert Tags(info._repr_html_()).cells == ["field", "value", "name", "demo", "version", "1.0"]
    assert pretty(info).splitlines() == ["Implementation demo", "  name     demo", "  version  1.0"]


@pytest.mark.parametrize("method", ["list_tools", "list_resources", "list_prompts"])
def test_what_a_real_server_lists_displays(method):
    with mcp_sync.connect(demo_server()) as client:
        items = getattr(client, method)()
        result = client.call_tool("weather", {"city": "Paris"})
    assert "<table>" in display.to_html(items)
    assert pretty(items)  # IPython shows a plain list through each item's _repr_pretty_
    assert "Tool result" in result._repr_html_()


def test_embedded_resources_and_unknown_blocks():
    result = CallToolResult.from_wire({"content": [
        {"type": "resource", "resource": {"uri": "demo://readme", "text": "<h1>Readme</h1>"}},
        {"type": "hologram", "data": "<x>"},
    ]})
    source = result._repr_html_()
    assert "&lt;h1&gt;Readme&lt;/h1&gt;" in source and "<h1>" not in source
    assert "hologram" in source and "<x>" not in source
    assert pretty(result).splitlines()[:3] == ["Tool result:", "  demo://readme:", "    <h1>Readme</h1>"]
