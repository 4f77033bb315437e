"""Terminal control characters in a server's text, made visible.

A server's strings reach a terminal through the `mcp-sync` command, the
terminal view of `mcp_sync.display` and the progress bar. None of them may
drive the terminal (clear it, recolour it, set its title, move the cursor),
so every C0 control but tab and newline, DEL, and the C1 controls (0x9b is
a CSI on many terminals) are shown as their escapes (`\\x1b`): one set,
used by all three.
"""

from __future__ import annotations

#: Each control character (tab and newline kept) to its visible escape.
VISIBLE = {c: f"\\x{c:02x}" for c in (*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0))}
#: The same characters inside JSON text, as JSON escapes: the value stays
#: the same (`json.dumps` escapes C0 controls itself, but not DEL and C1).
JSON_ESCAPED = {c: f"\\u{c:04x}" for c in VISIBLE}


def neutralise(text: str) -> str:
    r"""`text` with control characters made visible; newlines and tabs are
    kept, and CRLF line ends become plain newlines.

    Example::

        >>> neutralise("\x1b[2Jhello\r\n")
        '\\x1b[2Jhello\n'
    """
    return text.replace("\r\n", "\n").translate(VISIBLE)
