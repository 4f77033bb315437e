"""A server built with the official `mcp` Python SDK 1.x (FastMCP), for the
old-server interop matrix; run by the interpreter of an `old_peers` venv.

    python py_sdk1_server.py stdio
    python py_sdk1_server.py sse PORT     # HTTP+SSE: GET /sse, POST /messages/
    python py_sdk1_server.py http PORT    # Streamable HTTP at /mcp (SDK >= 1.8)

The same tools, resources and prompts as the TypeScript peer
(ts_sdk1_server.mjs), so one test module drives both. Written against the
oldest API the pinned versions share: what a later 1.x added (audio content,
tool annotations) is used only where the installed SDK has it.
"""

import sys

from mcp import types
from mcp.server.fastmcp import Context, FastMCP
from peer_content import add_resources_and_prompt

port = int(sys.argv[2]) if len(sys.argv) > 2 else 8000
# The SDK logs every request at INFO on stderr; the tests only want its errors.
app = FastMCP("py-sdk1-peer", instructions="A Python SDK 1.x server for interop tests.",
              host="127.0.0.1", port=port, log_level="WARNING")

HAS_ANNOTATIONS = hasattr(types, "ToolAnnotations")


def tool(**extra):
    """`app.tool()`, with annotations only where this SDK knows them."""
    if not HAS_ANNOTATIONS:
        extra.pop("annotations", None)
    return app.tool(**extra)


@tool(annotations=types.ToolAnnotations(readOnlyHint=True, idempotentHint=True) if HAS_ANNOTATIONS else None)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool()
def shout(text: str) -> str:
    """Upper-case the text."""
    return text.upper()


@tool()
async def steps(n: int, ctx: Context) -> str:
    """Report n progress steps, then finish."""
    for i in range(n):
        await ctx.report_progress(i + 1, n)
    return f"did {n} steps"


@tool()
def broken() -> str:
    """Always fails."""
    raise ValueError("this tool always fails")


if hasattr(types, "AudioContent"):
    @tool()
    def beep() -> types.AudioContent:
        """A short sound (audio content is new in 2025-03-26)."""
        return types.AudioContent(type="audio", data="UklGRg==", mimeType="audio/wav")


add_resources_and_prompt(app, "hello from the Python SDK 1.x")


if __name__ == "__main__":
    transport = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    app.run({"stdio": "stdio", "sse": "sse", "http": "streamable-http"}[transport])
