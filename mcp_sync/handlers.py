"""Ready-made input handlers, for `input_handlers={"form": ...}`.

A handler receives the request's params (a dict) and returns the answer the
spec expects; these build form (elicitation) answers:

- `defaults_form`: accept with every default the requested schema gives
  (SEP-1034); useful for scripts, tests and "use the defaults" buttons.
- `console_form`: ask a person for each field with `input()`, showing the
  default; for scripts and notebooks. It runs on the thread that made the
  call, so the prompt appears where the user is.

Example::

    client = mcp_sync.connect(url, input_handlers={"form": mcp_sync.handlers.console_form()})
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Mapping
from typing import Any, Callable

__all__ = ["InputHandler", "schema_defaults", "defaults_form", "console_form"]

InputHandler = Callable[[dict[str, Any]], Mapping[str, Any]]
"""An input handler: the request's params in, the answer out.

It is called with the params of the server's request (a dict) and returns
the answer the spec expects for its kind (``"form"``, ``"url"``,
``"sampling"`` or ``"roots"``), which is checked before it is sent. An
exception it raises, or an answer the protocol does not allow, fails the
call with `InputHandlerError`."""
# A type alias has no docstring of its own: the API reference reads the
# literal above, run-time tools read `__doc__`, so it gets the same text.
# (typing caches the alias: an identical `Callable[...]` elsewhere is this
# same object.)
InputHandler.__doc__ = """An input handler: the request's params in, the answer out.

It is called with the params of the server's request (a dict) and returns
the answer the spec expects for its kind (``"form"``, ``"url"``,
``"sampling"`` or ``"roots"``), which is checked before it is sent. An
exception it raises, or an answer the protocol does not allow, fails the
call with `InputHandlerError`."""


def schema_defaults(requested_schema: Mapping[str, Any]) -> dict[str, Any]:
    """The `default` of every property of a form schema that has one.

    >>> schema_defaults({"type": "object", "properties": {"n": {"type": "integer", "default": 2}, "s": {"type": "string"}}})
    {'n': 2}
    """
    properties = requested_schema.get("properties")
    if not isinstance(properties, Mapping):
        return {}
    return {
        name: spec["default"]
        for name, spec in properties.items()
        if isinstance(spec, Mapping) and "default" in spec
    }


def defaults_form(params: dict[str, Any]) -> dict[str, Any]:
    """A form handler that accepts with the schema's defaults (SEP-1034).

    A required field without a default cannot be filled this way, so the
    form is declined rather than answered with something invalid.
    """
    schema = params.get("requestedSchema") or {}
    content = schema_defaults(schema)
    required = schema.get("required") if isinstance(schema, Mapping) else None
    if isinstance(required, list) and any(name not in content for name in required):
        return {"action": "decline"}
    return {"action": "accept", "content": content}


def _convert(text: str, spec: Mapping[str, Any]) -> Any:
    kind = spec.get("type")
    if kind == "integer":
        return int(text)
    if kind == "number":
        return float(text)
    if kind == "boolean":
        lowered = text.strip().lower()
        if lowered in ("y", "yes", "true", "1"):
            return True
        if lowered in ("n", "no", "false", "0"):
            return False
        raise ValueError("answer yes or no")
    if kind == "array":
        return [part.strip() for part in text.split(",") if part.strip()]
    return text


def _choices(spec: Mapping[str, Any]) -> list[Any]:
    if isinstance(spec.get("enum"), list):
        return list(spec["enum"])
    for key in ("oneOf", "anyOf"):
        options = spec.get(key)
        if isinstance(options, list):
            return [o["const"] for o in options if isinstance(o, Mapping) and "const" in o]
    items = spec.get("items")
    if isinstance(items, Mapping):
        return _choices(items)
    return []


def console_form(
    ask: Callable[[str], str] = builtins.input,
    tell: Callable[[str], Any] = builtins.print,
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A form handler that asks a person for each field.

    An empty answer takes the default (or leaves an optional field out);
    a wrong answer is asked again. End of input (Ctrl-D) cancels, and
    Ctrl-C interrupts the call as anywhere else.
    """

    def handler(params: dict[str, Any]) -> dict[str, Any]:
        schema = params.get("requestedSchema") or {}
        properties = schema.get("properties") if isinstance(schema, Mapping) else None
        required = set(schema.get("required") or []) if isinstance(schema, Mapping) else set()
        tell(str(params.get("message", "The server asks for input:")))
        content: dict[str, Any] = {}
        try:
            for name, spec in (properties or {}).items():
                spec = spec if isinstance(spec, Mapping) else {}
                label = spec.get("title") or name
                choices = _choices(spec)
                hint = f" ({'/'.join(map(str, choices))})" if choices else f" ({spec.get('type', 'text')})"
                default = f" [{json.dumps(spec['default'])}]" if "default" in spec else ""
                while True:
                    text = ask(f"{label}{hint}{default}{'' if name in required else ' (optional)'}: ")
                    if not text.strip():
                        if "default" in spec:
                            content[name] = spec["default"]
                        elif name in required:
                            tell(f"{label} is required")
                            continue
                        break
                    try:
                        value = _convert(text, spec)
                    except ValueError as exc:
                        tell(f"not a valid {spec.get('type', 'value')}: {exc}")
                        continue
                    if choices and spec.get("type") != "array" and value not in choices:
                        tell(f"choose one of {', '.join(map(str, choices))}")
                        continue
                    content[name] = value
                    break
        except EOFError:
            return {"action": "cancel"}
        return {"action": "accept", "content": content}

    return handler
