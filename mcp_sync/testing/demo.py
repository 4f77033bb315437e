"""The demo server: a fixed set of tools, resources, prompts and completions.

`demo_server()` builds a fresh `Server` with everything below registered. It
backs the stdio program (`python -m mcp_sync.testing.server`), the CLI demo
and the client's own tests, so its behaviour is part of the contract:

Tools: echo, add, countdown, sleep, weather, bad_weather (structured output
that breaks its own outputSchema, for client-side validation tests), fail,
log, crash. Resources: demo://readme, demo://logo.png, template
demo://items/{id}. Prompt: greet. Completions: greet's `style`, and
demo://items/{id}'s `id`.
"""

from __future__ import annotations

import base64
import os
import sys
from typing import Any, Iterable

from .core import LOG_LEVELS, Server, ToolContext

INSTRUCTIONS = (
    "Demo MCP server for mcp_sync tests. Tools: echo, add, countdown (progress), sleep "
    "(cancellable), weather, bad_weather (breaks its outputSchema on purpose), fail, log, crash."
)

README = """# mcp_sync demo server

A small MCP server for testing clients. Try the `echo` and `add` tools,
read `demo://items/42`, or get the `greet` prompt.
"""

#: A 1x1 transparent PNG.
LOGO_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)

WEATHER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "temperature": {"type": "number", "description": "degrees Celsius"},
        "conditions": {"type": "string"},
    },
    "required": ["city", "temperature", "conditions"],
}

STYLES = ("formal", "friendly", "pirate")
ITEM_IDS = ("1", "2", "3", "42")
_CONDITIONS = ("sunny", "cloudy", "rainy", "windy", "snowy")


def _object(properties: dict[str, Any], required: Iterable[str] = ()) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    required = list(required)
    if required:
        schema["required"] = required
    return schema


def _forecast(city: str) -> tuple[float, str]:
    """A deterministic made-up forecast (stable across processes)."""
    code = sum(city.encode("utf-8"))
    return float(code % 35) - 5.0, _CONDITIONS[code % len(_CONDITIONS)]


def demo_server(
    page_size: int | None = None,
    versions: Iterable[str] | None = None,
    *,
    name: str = "mcp-sync-demo",
    exit_on_crash: bool = False,
) -> Server:
    """A new demo server. `exit_on_crash` makes the `crash` tool end the
    process with code 3 (the stdio program sets it); in-process it returns
    an error result instead."""
    server = Server(name=name, version="1.0.0", instructions=INSTRUCTIONS, page_size=page_size, versions=versions)

    @server.tool(
        description="Echo the given text back.",
        input_schema=_object({"text": {"type": "string"}}, ["text"]),
        annotations={"readOnlyHint": True},
    )
    def echo(args: dict[str, Any], ctx: ToolContext) -> str:
        text: str = args["text"]
        return text

    @server.tool(
        description="Add two numbers.",
        input_schema=_object({"a": {"type": "number"}, "b": {"type": "number"}}, ["a", "b"]),
        output_schema=_object({"sum": {"type": "number"}}, ["sum"]),
        annotations={"readOnlyHint": True},
    )
    def add(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        total = args["a"] + args["b"]
        return {"content": [{"type": "text", "text": str(total)}], "structuredContent": {"sum": total}}

    @server.tool(
        description="Count down, reporting progress 1..steps (step i/steps) with `delay` seconds between steps.",
        input_schema=_object({
            "steps": {"type": "integer", "default": 5, "minimum": 0},
            "delay": {"type": "number", "default": 0.1, "minimum": 0},
        }),
    )
    def countdown(args: dict[str, Any], ctx: ToolContext) -> str:
        steps = max(0, int(args["steps"]))
        delay = max(0.0, float(args["delay"]))
        for step in range(1, steps + 1):
            ctx.progress(step, steps, f"step {step}/{steps}")
            if step < steps and ctx.cancelled.wait(delay):
                return "cancelled"
        return "liftoff"

    @server.tool(
        description="Wait for `seconds` (stops early when cancelled).",
        input_schema=_object({"seconds": {"type": "number", "minimum": 0}}, ["seconds"]),
    )
    def sleep(args: dict[str, Any], ctx: ToolContext) -> str:
        if ctx.cancelled.wait(max(0.0, float(args["seconds"]))):
            return "cancelled"
        return "slept"

    @server.tool(
        description="Current weather for a city (made up, deterministic).",
        input_schema=_object({"city": {"type": "string"}}, ["city"]),
        output_schema=WEATHER_SCHEMA,
        annotations={"readOnlyHint": True},
    )
    def weather(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        temperature, conditions = _forecast(args["city"])
        return {"city": args["city"], "temperature": temperature, "conditions": conditions}

    @server.tool(
        description="Like weather, but its structured result violates the declared outputSchema "
        "(temperature is a string), for testing client-side validation.",
        input_schema=_object({"city": {"type": "string"}}, ["city"]),
        output_schema=WEATHER_SCHEMA,
    )
    def bad_weather(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        temperature, conditions = _forecast(args["city"])
        return {"city": args["city"], "temperature": f"{temperature:g} degrees", "conditions": conditions}

    @server.tool(
        description="Fail with the given message (a tool execution error, isError: true).",
        input_schema=_object({"message": {"type": "string"}}, ["message"]),
    )
    def fail(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": args["message"]}], "isError": True}

    @server.tool(
        description="Emit a log message (notifications/message) at the given level, then return 'logged'.",
        input_schema=_object(
            {"level": {"type": "string", "enum": list(LOG_LEVELS)}, "message": {"type": "string"}},
            ["level", "message"],
        ),
    )
    def log(args: dict[str, Any], ctx: ToolContext) -> str:
        ctx.log(args["level"], args["message"], logger="demo")
        return "logged"

    @server.tool(
        description="Crash the server process (exit code 3); in-process servers return an error result.",
        input_schema={"type": "object", "additionalProperties": False},
    )
    def crash(args: dict[str, Any], ctx: ToolContext) -> str:
        if exit_on_crash:
            sys.stderr.write("crashing on purpose\n")
            sys.stderr.flush()
            os._exit(3)
        raise RuntimeError("crash requested: an in-process server cannot exit, so this is an error result")

    @server.resource("demo://readme", "readme", mime_type="text/markdown", description="About this server.",
                     title="README")
    def readme() -> str:
        return README

    @server.resource("demo://logo.png", "logo", mime_type="image/png", description="A tiny PNG image.")
    def logo() -> bytes:
        return LOGO_PNG

    @server.resource_template("demo://items/{id}", "item", mime_type="text/plain", description="Item by id.")
    def item(params: dict[str, str]) -> str:
        return f"item {params['id']}"

    @server.prompt(
        "greet",
        description="Greet someone.",
        arguments=[
            {"name": "name", "description": "Who to greet", "required": True},
            {"name": "style", "description": "formal, friendly or pirate", "required": False},
        ],
    )
    def greet(args: dict[str, str]) -> str:
        style = args.get("style", "friendly")
        return f"Please greet {args['name']} in a {style} style."

    @server.completion("ref/prompt", "greet", "style")
    def complete_style(value: str, context: dict[str, str]) -> list[str]:
        return [style for style in STYLES if style.startswith(value)]

    @server.completion("ref/resource", "demo://items/{id}", "id")
    def complete_item(value: str, context: dict[str, str]) -> list[str]:
        return [item_id for item_id in ITEM_IDS if item_id.startswith(value)]

    return server
