"""The one set of control characters the command, the terminal view and
the progress bar show as escapes."""

from mcp_sync import cli, display, progress
from mcp_sync.control_chars import JSON_ESCAPED, neutralise
from mcp_sync.types import CallToolResult


def test_every_control_but_tab_and_newline_is_shown_as_its_escape_and_nothing_else():
    for code in range(0x200):
        char = chr(code)
        control = (code < 0x20 and char not in "\t\n") or 0x7F <= code < 0xA0
        assert neutralise(char) == (f"\\x{code:02x}" if control else char), hex(code)
    assert neutralise("a\r\nb\r") == "a\nb\\x0d"  # CRLF ends a line; a lone CR is shown


def test_the_command_the_terminal_view_and_the_progress_bar_use_the_one_set():
    every = "".join(map(chr, range(0x200)))
    assert cli.neutralise(every) == neutralise(every)  # (cli.neutralise stays importable)
    shown = display.to_text(CallToolResult.from_wire({"content": [{"type": "text", "text": "a\x1b\x07\x7f\x9bb"}]}))
    assert shown.endswith("a\\x1b\\x07\\x7f\\x9bb")
    # The bar's message is one line: whitespace runs become one space first.
    assert progress._message("a\x1b[2J\x9b1m b") == "a\\x1b[2J\\x9b1m b"


def test_json_output_escapes_the_same_characters_keeping_the_value():
    import json

    text = "".join(map(chr, range(0x7F, 0xA0)))
    out = json.dumps(text, ensure_ascii=False).translate(JSON_ESCAPED)
    assert json.loads(out) == text and not any(0x7F <= ord(c) < 0xA0 for c in out)
