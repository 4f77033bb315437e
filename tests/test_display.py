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
    # The description is Markdown, each newline a line break.
    assert "<p>Add two numbers.<br>\nSecond line.</p>" in source and "read-only" in source


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
    rendered = GetPromptResult.from_wire(
        {"messages": [{"role": "user", "content": {"type": "text", "text": "Hi Ada"}}]})
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
    info = mcp_sync.types.Implementation.from_wire({"name": "demo", "version": "1.0"})
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


# -- images in resources, structured content once, the legend, Markdown descriptions -------------


def image_of(source: str) -> dict[str, str | None]:
    (image,) = [attrs for tag, attrs in Tags(source).tags if tag == "img"]
    return image


def test_an_image_resource_is_shown_below_its_type_and_size():
    read = ReadResourceResult.from_wire({"contents": [
        {"uri": 'demo://logo".png<b>', "mimeType": "image/png", "blob": PNG}]})
    source = read._repr_html_()
    image = image_of(source)
    assert image["src"] == f"data:image/png;base64,{PNG}"
    assert image["alt"] == 'demo://logo".png<b>'  # the URI, escaped: the parser reads it back whole
    assert "<b>" not in source
    # The caption (type and size, as the text shows them) comes before the image.
    names = Tags(source).names()
    assert names.index("i") < names.index("img") and "image/png</p><p><i>[binary, 40 bytes]</i></p><img" in source
    assert pretty(read).splitlines() == ["Resource contents:", '  demo://logo".png<b> (image/png): [binary, 40 bytes]']


@pytest.mark.parametrize("mime", ["image/png", "image/jpeg", "image/gif", "image/webp", "IMAGE/PNG"])
def test_raster_images_embedded_in_a_result_are_shown(mime):
    result = CallToolResult.from_wire({"content": [
        {"type": "resource", "resource": {"uri": "demo://chart", "mimeType": mime, "blob": PNG}}]})
    image = image_of(result._repr_html_())
    assert image["src"] == f"data:{mime.lower()};base64,{PNG}" and image["alt"] == "demo://chart"


def test_images_that_are_not_shown_say_why(monkeypatch):
    svg = base64.b64encode(b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>').decode()
    cases = [
        # (the block, what the caption says)
        ({"type": "image", "data": svg, "mimeType": "image/svg+xml"},
         "[image: image/svg+xml, 71 bytes, not shown: only PNG, JPEG, GIF and WebP images are embedded]"),
        ({"type": "resource", "resource": {"uri": "demo://s.svg", "mimeType": "image/svg+xml", "blob": svg}},
         "[binary, 71 bytes, not shown: only PNG, JPEG, GIF and WebP images are embedded]"),
        ({"type": "resource", "resource": {"uri": "demo://r.pdf", "mimeType": "application/pdf", "blob": PNG}},
         "[binary, 40 bytes]"),
        ({"type": "resource", "resource": {"uri": "demo://bad", "mimeType": "image/png", "blob": "AAA*"}},
         "[binary, not valid base64]"),
        ({"type": "resource", "resource": {"uri": "demo://big", "mimeType": "image/png",
                                           "blob": base64.b64encode(b"\0" * 17).decode()}},
         "[binary, 17 bytes, too large to show (over 16 bytes)]"),
        ({"type": "image", "data": PNG, "mimeType": "text/html"},
         "[image: text/html, 40 bytes, not shown: only PNG, JPEG, GIF and WebP images are embedded]"),
    ]
    monkeypatch.setattr(display, "MAX_IMAGE_BYTES", 16)
    for block, caption in cases:
        source = CallToolResult.from_wire({"content": [block]})._repr_html_()
        assert "<img" not in source and "<svg" not in source and "<script" not in source, caption
        assert f"<p><i>{html.escape(caption)}</i></p>" in source, (caption, source)


def test_the_demo_servers_logo_is_shown():
    with mcp_sync.connect(demo_server()) as client:
        read = client.read_resource("demo://logo.png")
    source = read._repr_html_()
    image = image_of(source)
    assert image["alt"] == "demo://logo.png" and image["src"].startswith("data:image/png;base64,iVBOR")
    assert "[binary, 70 bytes]" in source and "[binary" not in source.split("<img")[1]


WEATHER = {"city": "Oslo", "temperature": 23.0, "conditions": "windy"}


def test_structured_content_is_shown_once():
    # The text the spec asks for beside structured content (the same JSON, any layout) is left out.
    for text in ('{"city": "Oslo", "temperature": 23.0, "conditions": "windy"}',
                 '{\n "conditions": "windy", "city": "Oslo", "temperature": 23}'):
        result = CallToolResult.from_wire({"content": [{"type": "text", "text": text}], "structuredContent": WEATHER})
        source = result._repr_html_()
        assert source.count("windy") == 1 and source.count("<pre>") == 1 and "Structured content" in source
        assert pretty(result).count("windy") == 1
        assert pretty(result).splitlines()[:3] == ["Tool result:", "  structured content:", "    {"]
    with mcp_sync.connect(demo_server()) as client:
        real = client.call_tool("weather", {"city": "Oslo"})
    assert real.text and real._repr_html_().count("windy") == 1 and pretty(real).count("windy") == 1


@pytest.mark.parametrize("text", [
    "It is windy in Oslo.",  # not JSON
    '{"city": "Oslo", "temperature": 22.0, "conditions": "windy"}',  # other values
    '{"city": "Oslo", "temperature": 23.0}',  # less
    '[{"city": "Oslo", "temperature": 23.0, "conditions": "windy"}]',  # in a list
])
def test_a_text_that_says_something_else_is_shown_too(text):
    result = CallToolResult.from_wire({"content": [{"type": "text", "text": text}], "structuredContent": WEATHER})
    assert html.escape(text) in result._repr_html_() and "Structured content" in result._repr_html_()
    assert pretty(result).splitlines()[1] == "  " + text


def test_json_true_is_not_one():
    result = CallToolResult.from_wire({"content": [{"type": "text", "text": '{"ok": 1, "n": 2.0}'}],
                                       "structuredContent": {"ok": True, "n": 2}})
    assert "{&quot;ok&quot;: 1" in result._repr_html_()
    same = CallToolResult.from_wire({"content": [{"type": "text", "text": '{"ok": true, "n": 2.0}'}],
                                     "structuredContent": {"ok": True, "n": 2}})
    assert "&quot;ok&quot;: true," in same._repr_html_() and '{"ok": true' not in pretty(same)


def legend(source: str) -> list[str]:
    """The texts of a rendering's legend paragraphs."""
    found: list[str] = []

    class Legend(html.parser.HTMLParser):
        inside = False

        def handle_starttag(self, tag, attrs):
            self.inside = ("class", "mcp-sync-legend") in attrs

        def handle_data(self, data):
            if self.inside:
                found.append(data)
                self.inside = False

    Legend().feed(source)
    return found


def test_the_tables_star_is_explained():
    echo = Tool.from_wire({"name": "echo", "inputSchema": {"type": "object", "properties": {"t": {}}}})
    assert legend(display.to_html([ADD, echo])) == ["* required parameter"]
    assert pretty(display.table([ADD, echo])).splitlines()[-1] == "* required parameter"
    assert legend(display.to_html([echo])) == [] and "*" not in pretty(display.table([echo]))
    prompts = [Prompt.from_wire({"name": "greet", "arguments": [{"name": "who", "required": True}]})]
    assert legend(Page(prompts, None)._repr_html_()) == ["* required argument"]
    assert pretty(display.table(prompts)).splitlines()[-1] == "* required argument"


class Strict(html.parser.HTMLParser):
    """Checks a rendering of untrusted Markdown: only the subset's tags, no
    event-handler or style attribute, links only to safe schemes, every tag
    closed in order. Keeps the text, to compare with what was written."""

    ALLOWED = {"div", "p", "br", "code", "pre", "strong", "em", "b", "ul", "ol", "li", "a"}

    def __init__(self, source: str) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[str] = []
        self.links: list[dict[str, str | None]] = []
        self.text = ""
        self.feed(source)
        self.close()
        assert not self.open, f"left open: {self.open}"

    def handle_starttag(self, tag, attrs):
        assert tag in self.ALLOWED, tag
        attributes = dict(attrs)
        assert set(attributes) <= {"class", "href", "rel", "target", "start"}, attributes
        if tag == "a":
            assert (attributes["href"] or "").lower().startswith(("http://", "https://", "mailto:")), attributes
            assert attributes["rel"] == "noopener noreferrer"
            self.links.append(attributes)
        if tag != "br":
            self.open.append(tag)

    def handle_endtag(self, tag):
        assert self.open and self.open.pop() == tag, (tag, self.open)

    def handle_data(self, data):
        self.text += data


HOSTILE = [
    "<script>alert(1)</script>",
    '<img src=x onerror="alert(1)">',
    "[click](javascript:alert(1))",
    "[click](JAVASCRIPT:alert(1)) [x](data:text/html;base64,PHNjcmlwdD4=) [v](vbscript:x)",
    '[x](https://e.com/"onmouseover="alert(1))',
    "[x](https://e.com/'onmouseover='alert(1))",
    '[x](https://e.com/ "title") and https://e.com/"><script>x()</script>',
    "[**x](https://e.com) **[y**](https://e.com)",
    "**a *b** c* _d __e_ f__ ***g*** `h **i` j**",
    "*" * 50 + "_" * 50 + "`" * 7 + "[" * 9 + "](" * 5,
    "- a\n    - b\n  - c\n- d\n1. e\n   * f <b>g</b>",
    "```\n<script>alert(1)</script>\n",
    "&lt;script&gt; &amp; &#60;b&#62; \x00 \x000\x00",
    "`</code><script>x()</script>` [a `b](https://e.com)` c](https://e.com)",
    "# <h1>title</h1>\n## **t**",
    "\\<script> \\*x\\* [a](https://e.com\\)",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_markdown_from_a_server_cannot_inject(text):
    source = display.markdown_html(text)
    checked = Strict(source)
    assert "<script" not in source and "<img" not in source and "<h1" not in source and "<svg" not in source
    assert "javascript:" not in " ".join(str(link["href"]).lower() for link in checked.links)
    # Whatever was not markup is still there to read.
    for word in ("alert(1)", "onerror", "onmouseover"):
        if word in text:
            assert word in checked.text, word


def test_javascript_links_stay_as_written():
    checked = Strict(display.markdown_html("[click](javascript:alert(1)) and [ok](https://example.com/a?b=1&c=2)"))
    assert checked.links == [{"href": "https://example.com/a?b=1&c=2", "rel": "noopener noreferrer",
                              "target": "_blank"}]
    assert checked.text == "[click](javascript:alert(1)) and ok"


@pytest.mark.parametrize("text, expected", [
    ("One.\nTwo.\n\nThree.", "<p>One.<br>\nTwo.</p><p>Three.</p>"),
    ("Use `a < b` or ``x`y``.", "<p>Use <code>a &lt; b</code> or <code>x`y</code>.</p>"),
    ("**bold**, *italic*, __bold__, _italic_, book_table and 2*3", "<p><strong>bold</strong>, <em>italic</em>, "
     "<strong>bold</strong>, <em>italic</em>, book_table and 2*3</p>"),
    ("**bold *and italic* bold**", "<p><strong>bold <em>and italic</em> bold</strong></p>"),
    ("Steps:\n- one\n- two *2*\n  - nested\n- three", "<p>Steps:</p><ul><li>one</li><li>two <em>2</em>"
     "<ul><li>nested</li></ul></li><li>three</li></ul>"),
    ("3. c\n4) d\n\n1. a", '<ol start="3"><li>c</li><li>d</li></ol><ol><li>a</li></ol>'),
    ("```python\nif a < b:\n    **x**\n```\nafter", "<pre><code>if a &lt; b:\n    **x**</code></pre><p>after</p>"),
    ("See [the docs](https://example.com/docs) or mail [us](mailto:a@example.com).",
     '<p>See <a href="https://example.com/docs" rel="noopener noreferrer" target="_blank">the docs</a> or mail '
     '<a href="mailto:a@example.com" rel="noopener noreferrer" target="_blank">us</a>.</p>'),
    ("At https://example.com/x_y.", '<p>At <a href="https://example.com/x_y" rel="noopener noreferrer" '
     'target="_blank">https://example.com/x_y</a>.</p>'),
    ("## Usage\n\\*literal\\*", "<p><b>Usage</b></p><p>*literal*</p>"),
    ("unclosed **bold and `code", "<p>unclosed **bold and `code</p>"),
])
def test_markdown_subset(text, expected):
    assert display.markdown_html(text) == f'<div class="mcp-sync-md">{expected}</div>'


def test_descriptions_are_markdown_wherever_they_are_shown():
    tool = Tool.from_wire({"name": "t", "description": "Does **this**.\n\n- <b>one</b>"})
    assert "<p>Does <strong>this</strong>.</p><ul><li>&lt;b&gt;one&lt;/b&gt;</li></ul>" in tool._repr_html_()
    prompt = Prompt.from_wire({"name": "p", "description": "A *prompt*."})
    assert "<em>prompt</em>" in prompt._repr_html_()
    resource = Resource.from_wire({"uri": "demo://r", "name": "r", "description": "A `resource`."})
    assert "<code>resource</code>" in resource._repr_html_()
    rendered = GetPromptResult.from_wire({"description": "**Hi**", "messages": []})
    assert "<strong>Hi</strong>" in rendered._repr_html_()
    # A table cell is the first line, with its inline marks.
    cells = display.to_html([tool, Tool.from_wire({"name": "u", "description": "[x](javascript:y) `z`"})])
    assert "<td>Does <strong>this</strong>.</td>" in cells and "<td>[x](javascript:y) <code>z</code></td>" in cells
    # The terminal shows the Markdown as written.
    assert pretty(tool).splitlines()[0] == "Tool t: Does **this**."


# -- what a server sent with the wrong JSON type, or far too much of it ----------------------
#
# `from_wire` keeps most fields as sent (a description may be a list), so the
# renderings take any JSON value where a string belongs: shown as text
# (compact JSON), escaped, never an exception out of `_repr_html_`.

WRONG_TYPES = {
    "tool description list": lambda: Tool.from_wire(
        {"name": "t", "description": ["<b>x</b>"], "inputSchema": {"type": "object"}}),
    "image mimeType int": lambda: CallToolResult.from_wire(
        {"content": [{"type": "image", "data": "aGk=", "mimeType": 5}]}),
    "audio mimeType int": lambda: CallToolResult.from_wire(
        {"content": [{"type": "audio", "data": "aGk=", "mimeType": 5}]}),
    "blob mimeType list": lambda: ReadResourceResult.from_wire(
        {"contents": [{"uri": "a://b", "blob": "aGk=", "mimeType": ["image/png"]}]}),
    "resource name int (list)": lambda: display.table(
        [Resource.from_wire({"uri": "a://b", "name": 7}), Resource.from_wire({"uri": "a://c", "name": "x"})]),
    "complete values ints": lambda: CompleteResult.from_wire({"completion": {"values": [1, "<b>2</b>"]}}),
    "prompt description dict": lambda: Prompt.from_wire({"name": "p", "description": {"a": "<b>1</b>"}}),
    "prompt result description list": lambda: GetPromptResult.from_wire({"description": [1], "messages": []}),
    "resource description dict": lambda: Resource.from_wire({"uri": "a://b", "name": "r", "description": {"a": 1}}),
    "tool list, description dict": lambda: [Tool.from_wire({"name": "t", "description": {"a": 1}})],
    "resource link fields": lambda: CallToolResult.from_wire(
        {"content": [{"type": "resource_link", "uri": "a://b", "name": 5, "description": [1]}]}),
}


@pytest.mark.parametrize("make", WRONG_TYPES.values(), ids=list(WRONG_TYPES))
def test_a_field_of_the_wrong_json_type_is_shown_as_text(make):
    obj = make()
    source = display.to_html(obj)
    Tags(source)  # parses
    assert "<b>" not in source.replace('<b class="mcp-sync-title">', "")
    assert display.to_text(obj)


def test_wrong_types_are_shown_as_compact_json():
    assert "<p>[&quot;&lt;b&gt;x&lt;/b&gt;&quot;]</p>" in WRONG_TYPES["tool description list"]()._repr_html_()
    assert pretty(WRONG_TYPES["complete values ints"]()) == "Completions: 1, <b>2</b>"
    assert pretty(WRONG_TYPES["resource name int (list)"]()).splitlines()[1].split() == ["a://b", "7"]
    assert "image: 5" in WRONG_TYPES["image mimeType int"]()._repr_html_()


def test_wrong_types_from_a_real_server_display():
    server = mcp_sync.testing.Server()
    server.tool(name="t", description={"text": "not a string"})(lambda args, ctx: "x")
    server.resource("a://img", "img", mime_type=5)(lambda: b"\x89PNG")
    with mcp_sync.connect(server) as client:
        tool = client.list_tools()[0]
        assert "{&quot;text&quot;:&quot;not a string&quot;}" in tool._repr_html_()
        assert pretty(tool).startswith('Tool t: {"text":"not a string"}')
        contents = client.read_resource("a://img")
        assert "a://img" in contents._repr_html_() and "a://img (5)" in pretty(contents)


HUGE = 3 * display.MAX_TEXT_CHARS


@pytest.mark.parametrize("make", [
    lambda: CallToolResult.from_wire({"content": [{"type": "text", "text": "see structured"}],
                                      "structuredContent": {"rows": ["x" * HUGE]}}),
    lambda: CallToolResult.from_wire({"content": [{"type": "weird", "payload": "y" * HUGE}]}),
    lambda: Tool.from_wire({"name": "t", "inputSchema": {"type": "object", "properties": {
        "a": {"type": "string", "default": "z" * HUGE}}}}),
    lambda: Tool.from_wire({"name": "t", "inputSchema": {"type": "object"},
                            "outputSchema": {"type": "object", "x": "w" * HUGE}}),
    lambda: Tool.from_wire({"name": "t" * HUGE, "title": "u" * HUGE, "inputSchema": {"type": "object"}}),
    lambda: Tool.from_wire({"name": "t", "inputSchema": {"type": "object", "properties": {
        "a" * HUGE: {"type": "b" * HUGE, "enum": ["c" * HUGE]}}}}),
    lambda: CallToolResult.from_wire({"content": [{"type": "resource_link", "uri": "a:" + "v" * HUGE,
                                                   "name": "n" * HUGE, "description": "d" * HUGE}]}),
    lambda: ReadResourceResult.from_wire({"contents": [{"uri": "a:" + "v" * HUGE, "mimeType": "m" * HUGE,
                                                        "text": "x"}]}),
    lambda: Page(items=[Tool.from_wire({"name": "t"})], next_cursor="c" * HUGE),
    lambda: CompleteResult.from_wire({"completion": {"values": ["v" * HUGE]}}),
    lambda: mcp_sync.types.Implementation.from_wire({"name": "n", "version": "v", "x": ["e" * HUGE]}),
], ids=["structured content", "unknown content", "schema default", "output schema", "tool name",
        "parameter", "resource link", "resource head", "cursor", "completion", "fields"])
def test_every_piece_a_server_sent_is_capped_in_html_and_text(make):
    obj = make()
    source, text = display.to_html(obj), display.to_text(obj)
    assert "more characters)" in source  # cut, and visibly so
    assert len(source) < 2 * HUGE and len(text) < 2 * HUGE, (len(source), len(text))


def test_the_terminal_gets_a_servers_control_characters_as_visible_escapes():
    tool = Tool.from_wire({"name": "t\x1b]0;owned\x07", "description": "ok\x1b[2J\x1b[H\x9b1m",
                           "inputSchema": {"type": "object"}})
    result = CallToolResult.from_wire({"content": [{"type": "text", "text": "a\tb\nhello\x1b]52;c;ZXZpbA==\x07\r\n"}]})
    assert pretty(tool) == "Tool t\\x1b]0;owned\\x07: ok\\x1b[2J\\x1b[H\\x9b1m"
    assert pretty(result) == "Tool result:\n  a\tb\n  hello\\x1b]52;c;ZXZpbA==\\x07"
