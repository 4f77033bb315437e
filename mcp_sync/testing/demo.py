"""The demo server: a fixed set of tools, resources, prompts and completions.

`demo_server()` builds a fresh `Server` with everything below registered. It
backs the stdio program (`python -m mcp_sync.testing.server`), the CLI demo
and the client's own tests, so its behaviour is part of the contract:

Tools: echo, add, countdown, sleep, weather, bad_weather (structured output
that breaks its own outputSchema, for client-side validation tests), fail,
log, crash. Resources: demo://readme, demo://logo.png, template
demo://items/{id}. Prompt: greet. Completions: greet's `style`, and
demo://items/{id}'s `id`.

Servers that ask back (the same code in both eras: server-to-client requests
in the initialize era, InputRequiredResult rounds in the stateless era; see
`ToolContext`):

* `book_table(date)`: elicits a form `{guests: integer (default 2), name:
  string}`; "Booked for N under NAME", or "Cancelled by user" on decline/cancel.
* `ask_twice()`: two form elicitations in sequence (two rounds when
  stateless); "FIRST and SECOND", or "Cancelled by user".
* `login()`: URL-mode elicitation of https://example.com/login; "login: ACTION".
* `summarize(text)`: a sampling request; returns the sampled text.
* `show_roots()`: roots/list; the root URIs joined by newlines.
* `defaults_form()`: a form whose every field (string, integer, number, enum,
  boolean) has a default; returns the accepted content as JSON text (sorted
  keys), or "Cancelled by user".
* `nag(cancel_after)`: initialize era: sends a form elicitation and, when the
  client has not answered within `cancel_after` seconds, sends
  `notifications/cancelled` for it and returns "gave up"; an answer in time
  gives "answered: ACTION". Stateless era: there is no request to withdraw,
  so `cancel_after` is ignored: the question is asked with an
  InputRequiredResult and the retry completes with "answered: ACTION".
* Prompt `personal_greeting`: elicits the name to greet.
* Template `demo://secret/{id}`: its read elicits consent (a boolean form;
  not a password, which the spec forbids asking for in form mode) and
  returns the secret, or a "not revealed" text.
"""

from __future__ import annotations

import base64
import json
import os
import sys
from typing import Any, Iterable

from ._context import RequestContext, ToolContext
from ._features import object_schema as _object
from ._protocol import LOG_LEVELS
from ._registry import Server
from ._tasks import add_task_tools

INSTRUCTIONS = (
    "Demo MCP server for mcp_sync tests. Tools: echo, add, countdown (progress), sleep "
    "(cancellable), weather, bad_weather (breaks its outputSchema on purpose), fail, log, crash; "
    "tools that ask the client: book_table, ask_twice, login, summarize, show_roots, defaults_form, nag."
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

BOOKING_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "guests": {"type": "integer", "title": "Guests", "minimum": 1, "default": 2},
        "name": {"type": "string", "title": "Name"},
    },
    "required": ["name"],
}

#: Every field has a default (SEP-1034): string, integer, number, enum, boolean.
DEFAULTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "nickname": {"type": "string", "title": "Nickname", "default": "Ada"},
        "age": {"type": "integer", "title": "Age", "minimum": 0, "default": 36},
        # Integral on purpose: the published ElicitResult schema only admits
        # integer numbers in content.
        "score": {"type": "number", "title": "Score", "default": 7},
        "color": {"type": "string", "title": "Color", "enum": ["red", "green", "blue"], "default": "green"},
        "subscribe": {"type": "boolean", "title": "Subscribe", "default": True},
    },
    "required": ["nickname", "age", "score", "color", "subscribe"],
}

LOGIN_URL = "https://example.com/login"
CANCELLED_BY_USER = "Cancelled by user"

STYLES = ("formal", "friendly", "pirate")
ITEM_IDS = ("1", "2", "3", "42")
_CONDITIONS = ("sunny", "cloudy", "rainy", "windy", "snowy")


def _sampled_text(result: dict[str, Any]) -> str:
    content = result.get("content")
    blocks = content if isinstance(content, list) else [content]
    texts = [b["text"] for b in blocks if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)]
    if not texts:
        raise ValueError("the sampled message has no text")
    return "".join(texts)


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
    tasks: bool = False,
) -> Server:
    """A new demo server. `exit_on_crash` makes the `crash` tool end the
    process with code 3 (the stdio program sets it); in-process it returns
    an error result instead. `tasks=True` adds the task tools of the Tasks
    extension (`slow_compute`, `confirm_delete`, `multi_input`,
    `failing_job`, `protocol_error_job`; see `mcp_sync.testing._tasks`)."""
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

    # -- tools that ask the client ---------------------------------------

    @server.tool(
        description="Book a table: asks the user (form elicitation) for the number of guests and a name.",
        input_schema=_object({"date": {"type": "string"}}, ["date"]),
    )
    def book_table(args: dict[str, Any], ctx: ToolContext) -> str:
        answer = ctx.elicit(f"Booking a table for {args['date']}: how many guests, and under which name?",
                            BOOKING_SCHEMA)
        if answer.get("action") != "accept":
            return CANCELLED_BY_USER
        content = answer.get("content") or {}
        return f"Booked for {content.get('guests', 2)} under {content.get('name', '')}"

    @server.tool(description="Ask the user two questions, one after the other (two rounds when stateless).",
                 input_schema={"type": "object"})
    def ask_twice(args: dict[str, Any], ctx: ToolContext) -> str:
        words: list[str] = []
        for key, question in (("first", "First question: a colour?"), ("second", "Second question: an animal?")):
            answer = ctx.elicit(question, _object({key: {"type": "string", "title": key.title()}}, [key]))
            if answer.get("action") != "accept":
                return CANCELLED_BY_USER
            words.append(str((answer.get("content") or {}).get(key, "")))
        return " and ".join(words)

    @server.tool(description=f"Ask the user to sign in at {LOGIN_URL} (URL-mode elicitation).",
                 input_schema={"type": "object"})
    def login(args: dict[str, Any], ctx: ToolContext) -> str:
        answer = ctx.elicit_url("Please sign in to continue.", LOGIN_URL)
        return f"login: {answer.get('action')}"

    @server.tool(description="Summarize text with the client's LLM (sampling).",
                 input_schema=_object({"text": {"type": "string"}}, ["text"]))
    def summarize(args: dict[str, Any], ctx: ToolContext) -> str:
        result = ctx.sample(
            [{"role": "user", "content": {"type": "text", "text": f"Please summarize:\n\n{args['text']}"}}],
            100,
            system_prompt="You summarize text in one sentence.",
        )
        return _sampled_text(result)

    @server.tool(description="List the client's roots (roots/list), one URI per line.",
                 input_schema={"type": "object"}, annotations={"readOnlyHint": True})
    def show_roots(args: dict[str, Any], ctx: ToolContext) -> str:
        roots = ctx.list_roots().get("roots") or []
        return "\n".join(str(root.get("uri")) for root in roots)

    @server.tool(description="Elicit a form whose every field has a default; returns the content as JSON text.",
                 input_schema={"type": "object"})
    def defaults_form(args: dict[str, Any], ctx: ToolContext) -> str:
        answer = ctx.elicit("Check these settings (every field has a default).", DEFAULTS_SCHEMA)
        if answer.get("action") != "accept":
            return CANCELLED_BY_USER
        return json.dumps(answer.get("content") or {}, sort_keys=True)

    @server.tool(
        description="Ask the user something, then withdraw the question (notifications/cancelled) after "
        "`cancel_after` seconds without an answer and return 'gave up' (initialize era; stateless: a normal round).",
        input_schema=_object({"cancel_after": {"type": "number", "minimum": 0}}, ["cancel_after"]),
    )
    def nag(args: dict[str, Any], ctx: ToolContext) -> str:
        schema = _object({"answer": {"type": "string", "title": "Answer"}})
        try:
            answer = ctx.elicit("Are you still there?", schema, timeout=max(0.0, float(args["cancel_after"])))
        except TimeoutError:
            return "gave up"
        return f"answered: {answer.get('action')}"

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

    @server.resource_template("demo://secret/{id}", "secret", mime_type="text/plain",
                              description="A secret, revealed after the user consents (elicitation).")
    def secret(params: dict[str, str], ctx: RequestContext) -> str:
        answer = ctx.elicit(f"Reveal secret {params['id']}?",
                            _object({"confirm": {"type": "boolean", "title": "Reveal it", "default": False}},
                                    ["confirm"]))
        if answer.get("action") == "accept" and (answer.get("content") or {}).get("confirm") is True:
            return f"secret {params['id']}: the answer is 42"
        return f"secret {params['id']}: not revealed"

    @server.prompt("personal_greeting", description="A greeting for the user, who is asked for their name.")
    def personal_greeting(args: dict[str, str], ctx: RequestContext) -> str:
        answer = ctx.elicit("What is your name?", _object({"name": {"type": "string", "title": "Name"}}, ["name"]))
        if answer.get("action") == "accept":
            name = str((answer.get("content") or {}).get("name", "")).strip()
            if name:
                return f"Please greet {name} warmly, by name."
        return "Please greet the user warmly."

    @server.completion("ref/prompt", "greet", "style")
    def complete_style(value: str, context: dict[str, str]) -> list[str]:
        return [style for style in STYLES if style.startswith(value)]

    @server.completion("ref/resource", "demo://items/{id}", "id")
    def complete_item(value: str, context: dict[str, str]) -> list[str]:
        return [item_id for item_id in ITEM_IDS if item_id.startswith(value)]

    if tasks:
        add_task_tools(server)
    return server
