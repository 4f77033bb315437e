"""A FastMCP server for test_fastmcp.py, run by the interpreter of the pinned
FastMCP venv (`old_peers.fastmcp_server()`), never imported by the tests.

    python fastmcp_server.py stdio
    python fastmcp_server.py http PORT     # Streamable HTTP on 127.0.0.1:PORT/mcp

It offers what a typical FastMCP server does: a tool with structured output,
tools that ask the client back (`ctx.elicit`, the session's
`create_message` and `list_roots`, which FastMCP can only send on an
initialize-era connection), a guard tool that asks with an
`InputRequiredResult` (FastMCP's way on 2026-07-28), a tool that reports
progress and logs, a resource, a resource template and a prompt.
"""

from __future__ import annotations

import os
import sys
import warnings
from dataclasses import dataclass

# The tests talk to loopback only: FastMCP's PyPI update check (run with
# its banner, which is off anyway) must never go out.
os.environ["FASTMCP_CHECK_FOR_UPDATES"] = "off"

import mcp_types  # noqa: E402 (after the setting above)
from fastmcp import Context, FastMCP  # noqa: E402
from typing_extensions import TypedDict  # noqa: E402

# The session's create_message/list_roots are marked deprecated (as of
# 2026-07-28); they are still what a handshake-era server calls.
warnings.simplefilter("ignore")

mcp = FastMCP("fastmcp-interop", instructions="Test server for the mcp_sync interop tests.")


class Sum(TypedDict):
    a: int
    b: int
    sum: int


@mcp.tool
def add(a: int, b: int) -> Sum:
    """Adds two integers; the result is structured (an outputSchema)."""
    return {"a": a, "b": b, "sum": a + b}


@mcp.tool
def echo(text: str) -> str:
    """Returns its text unchanged."""
    return text


@dataclass
class Booking:
    name: str
    guests: int


@mcp.tool
async def book(day: str, ctx: Context) -> str:
    """Asks the client for a name and a number of guests (`ctx.elicit`)."""
    answer = await ctx.elicit(f"Booking for {day}: under which name, how many guests?", response_type=Booking)
    if answer.action != "accept":
        return f"not booked ({answer.action})"
    return f"Booked {answer.data.guests} on {day} for {answer.data.name}"


@mcp.tool
async def book_guarded(day: str, ctx: Context) -> str | mcp_types.InputRequiredResult:
    """The same question asked the 2026-07-28 way: return an
    InputRequiredResult, read the answer when the client retries."""
    answers = ctx.input_responses
    if not answers:
        ask = mcp_types.ElicitRequest(params=mcp_types.ElicitRequestFormParams(
            message=f"Booking for {day}: under which name?",
            requested_schema={"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}))
        return mcp_types.InputRequiredResult(input_requests={"who": ask}, request_state=day)
    return f"Booked on {ctx.request_state} for {answers['who'].content['name']}"


@mcp.tool
async def summarize(text: str, ctx: Context) -> str:
    """Asks the client's model for a summary (sampling/createMessage)."""
    result = await ctx.session.create_message(
        [mcp_types.SamplingMessage(role="user", content=mcp_types.TextContent(type="text", text=f"Summarize: {text}"))],
        max_tokens=50, related_request_id=ctx.request_id)
    return f"{result.model}: {result.content.text}"


@mcp.tool
async def roots(ctx: Context) -> list[str]:
    """The client's roots (roots/list), as URIs."""
    listed = await ctx.session.list_roots()
    return [str(root.uri) for root in listed.roots]


@mcp.tool
async def count(to: int, ctx: Context) -> str:
    """Reports progress 1..to (of to) and logs one info message per step."""
    for step in range(1, to + 1):
        await ctx.report_progress(step, to, f"step {step}")
        await ctx.info(f"counted {step}", logger_name="counter")
    return f"counted to {to}"


@mcp.tool
def era(ctx: Context) -> str:
    """The protocol version of the request being served."""
    return ctx.request_context.protocol_version


@mcp.resource("config://app", mime_type="application/json")
def app_config() -> str:
    return '{"theme": "dark", "retries": 3}'


@mcp.resource("greeting://{name}")
def greeting(name: str) -> str:
    return f"Hello, {name}!"


@mcp.prompt
def review(code: str, language: str = "python") -> str:
    """Asks for a code review."""
    return f"Please review this {language} code:\n{code}"


if __name__ == "__main__":
    if sys.argv[1:] == ["stdio"]:
        mcp.run("stdio", show_banner=False)
    elif len(sys.argv) == 3 and sys.argv[1] == "http":
        mcp.run("http", show_banner=False, host="127.0.0.1", port=int(sys.argv[2]), path="/mcp", log_level="warning")
    else:
        sys.exit(f"usage: {sys.argv[0]} stdio | http PORT")
