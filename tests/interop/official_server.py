"""A server built with the official `mcp` Python SDK (2.x), run over stdio.

It is the test peer nobody on this project wrote: the interop tests drive it
through mcp_sync in every protocol era.
"""

from typing import Annotated

from pydantic import BaseModel

from mcp.server.mcpserver import Context, Elicit, MCPServer, Resolve
from peer_content import add_resources_and_prompt

app = MCPServer("official-peer", instructions="An official-SDK server for interop tests.")


class Guest(BaseModel):
    name: str
    guests: int = 2


def ask_guest() -> Elicit[Guest]:
    return Elicit("Who is coming?", Guest)


@app.tool()
async def book(day: str, guest: Annotated[Guest, Resolve(ask_guest)]) -> str:
    """Book a table; asks who is coming (elicitation, in either era)."""
    return f"{day}: {guest.guests} for {guest.name}"


@app.tool()
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@app.tool()
async def shout(text: str) -> str:
    """Upper-case the text."""
    return text.upper()


@app.tool()
async def steps(n: int, ctx: Context) -> str:
    """Report n progress steps, then finish."""
    for i in range(n):
        await ctx.report_progress(i + 1, n, f"step {i + 1}")
    return f"did {n} steps"


@app.tool()
async def announce(ctx: Context) -> str:
    """Tell subscribers that the tools and a resource changed."""
    await ctx.notify_tools_changed()
    await ctx.notify_resource_updated("note://hello")
    return "announced"


@app.tool()
async def broken() -> str:
    """Always fails."""
    raise ValueError("this tool always fails")


add_resources_and_prompt(app, "hello from the official SDK")


if __name__ == "__main__":
    import sys

    if len(sys.argv) > 1 and sys.argv[1] == "--http":
        # --http PORT [stateless|stateful] [json|sse]
        port = int(sys.argv[2])
        mode = sys.argv[3] if len(sys.argv) > 3 else "stateful"
        app.run("streamable-http", host="127.0.0.1", port=port, stateless_http=mode == "stateless",
                json_response=len(sys.argv) > 4 and sys.argv[4] == "json")
    else:
        app.run()
