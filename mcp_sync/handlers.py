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
import re
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


# -- console_form: one field at a time, checked as it is typed ----------------------

_BOOLEAN_WORDS = {"y": True, "yes": True, "true": True, "1": True, "n": False, "no": False, "false": False, "0": False}
#: What each format of the restricted form schema admits; said when a value is not one.
_FORMATS: dict[str, tuple[str, Callable[[str], bool]]] = {}
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+")
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:\S+")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_DATE_TIME = re.compile(r"(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2}(?:\.\d+)?)([Zz]|[+-]\d{2}:\d{2})")


def _is_date(text: str) -> bool:
    # fromisoformat alone would also take 20240101 (Python 3.11): the regex insists on RFC 3339's full-date.
    if not _DATE.fullmatch(text):
        return False
    import datetime  # here: only a form asking for a date needs it (and it costs `import mcp_sync` time)

    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        return False
    return True


def _is_date_time(text: str) -> bool:
    match = _DATE_TIME.fullmatch(text)
    if not match:
        return False
    zone = "+00:00" if match[3] in ("Z", "z") else match[3]
    # RFC 3339 allows any number of fraction digits; Python 3.10's
    # fromisoformat takes only 3 or 6, so the check is made on 6.
    clock, _, fraction = match[2].partition(".")
    clock += "." + (fraction + "000000")[:6] if fraction else ""
    import datetime  # here: see _is_date

    try:
        datetime.datetime.fromisoformat(f"{match[1]}T{clock}{zone}")
    except ValueError:
        return False
    return True


_FORMATS.update({
    "email": ("an email address (name@example.com)", lambda text: bool(_EMAIL.fullmatch(text))),
    "uri": ("a URI with its scheme (https://example.com/page)", lambda text: bool(_URI.fullmatch(text))),
    "date": ("a date as YYYY-MM-DD", _is_date),
    "date-time": ("a date and time with its zone, as YYYY-MM-DDTHH:MM:SSZ or ...+02:00", _is_date_time),
})


def _options(spec: Mapping[str, Any]) -> list[tuple[Any, str]]:
    """The choices of an enum field as (value, title) pairs: `enum` (with the
    legacy `enumNames` as titles), `oneOf`/`anyOf` of `{const, title}`, or
    the same under `items` for a multi-select array. Untitled choices are
    their own title."""
    if spec.get("type") == "array" and isinstance(spec.get("items"), Mapping):
        return _options(spec["items"])
    if isinstance(spec.get("enum"), list):
        names = spec.get("enumNames")
        titles = names if isinstance(names, list) and len(names) == len(spec["enum"]) else None
        return [(value, str(titles[i]) if titles else _show(value)) for i, value in enumerate(spec["enum"])]
    for key in ("oneOf", "anyOf"):
        found = spec.get(key)
        if isinstance(found, list):
            return [(o["const"], str(o.get("title") or _show(o["const"])))
                    for o in found if isinstance(o, Mapping) and "const" in o]
    return []


def _show(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _pick(text: str, options: list[tuple[Any, str]], numbered: bool) -> Any:
    """The value `text` names: the raw value itself, a title (any case), or
    (when the choices were listed with numbers) its number."""
    text = text.strip()
    for value, _ in options:
        if _show(value) == text:
            return value
    for value, title in options:
        if title.casefold() == text.casefold() or _show(value).casefold() == text.casefold():
            return value
    if numbered and text.isdigit() and 1 <= int(text) <= len(options):
        return options[int(text) - 1][0]
    listed = ", ".join(f"{i}) {title}" if numbered else title for i, (_, title) in enumerate(options, 1))
    raise ValueError(f"one of {listed}")


def _bounds(spec: Mapping[str, Any], low: str, high: str, unit: str = "") -> str:
    """`at least 1`, `at most 9 characters`, `from 1 to 9`: what the bounds allow."""
    lo, hi = spec.get(low), spec.get(high)
    lo_text = None if lo is None else f"{_number(lo)}"
    hi_text = None if hi is None else f"{_number(hi)}"
    if lo_text is not None and hi_text is not None:
        return f"from {lo_text} to {hi_text}{unit}"
    return f"at least {lo_text}{unit}" if lo_text is not None else f"at most {hi_text}{unit}"


def _number(value: Any) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _read_number(text: str, spec: Mapping[str, Any]) -> int | float:
    kind = spec.get("type")
    text = text.strip()
    try:
        value: int | float = int(text)
    except ValueError:
        if kind == "integer":
            raise ValueError("a whole number (integer)") from None
        try:
            value = float(text)
        except ValueError:
            raise ValueError("a number") from None
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError("a finite number") from None
    if ("minimum" in spec and value < spec["minimum"]) or ("maximum" in spec and value > spec["maximum"]):
        raise ValueError(f"{'a whole number' if kind == 'integer' else 'a number'} "
                         f"{_bounds(spec, 'minimum', 'maximum')}")
    return value


def _read_string(text: str, spec: Mapping[str, Any]) -> str:
    length = len(text)
    if ("minLength" in spec and length < spec["minLength"]) or ("maxLength" in spec and length > spec["maxLength"]):
        raise ValueError(f"text {_bounds(spec, 'minLength', 'maxLength', ' characters')}")
    form = _FORMATS.get(str(spec.get("format")))
    if form is not None and not form[1](text):
        raise ValueError(form[0])
    return text


def _read(text: str, spec: Mapping[str, Any], options: list[tuple[Any, str]], numbered: bool) -> Any:
    """`text` as the field's value; ValueError saying what is allowed when it is not one."""
    kind = spec.get("type")
    if kind == "array":
        parts = [part.strip() for part in text.split(",") if part.strip()]
        values: list[Any] = []
        for part in parts:
            value = _pick(part, options, numbered) if options else part
            if value not in values:
                values.append(value)
        if ("minItems" in spec and len(values) < spec["minItems"]) or (
                "maxItems" in spec and len(values) > spec["maxItems"]):
            raise ValueError(f"{_bounds(spec, 'minItems', 'maxItems')} choices, separated by commas")
        return values
    if options:
        return _pick(text, options, numbered)
    if kind in ("integer", "number"):
        return _read_number(text, spec)
    if kind == "boolean":
        word = text.strip().lower()
        if word not in _BOOLEAN_WORDS:
            raise ValueError("yes or no (y/n, true/false)")
        return _BOOLEAN_WORDS[word]
    return _read_string(text, spec)


def _hint(spec: Mapping[str, Any], options: list[tuple[Any, str]], numbered: bool) -> str:
    """What the prompt says the field takes, in brackets."""
    kind = spec.get("type")
    if options:
        what = f"1-{len(options)}, or a title" if numbered else "/".join(title for _, title in options)
        return f"{what}; several, separated by commas" if kind == "array" else what
    if kind == "boolean":
        return "yes/no"
    if kind in ("integer", "number"):
        bounds = f", {_bounds(spec, 'minimum', 'maximum')}" if "minimum" in spec or "maximum" in spec else ""
        return f"{kind}{bounds}"
    if kind == "array":
        return "several, separated by commas"
    form = spec.get("format")
    return str(form) if form in _FORMATS else "text"


def _default_text(default: Any, options: list[tuple[Any, str]]) -> str:
    """The default as the person would type it: by title for a choice."""
    titles = {json.dumps(value): title for value, title in options}
    if isinstance(default, list) and options:
        return ", ".join(titles.get(json.dumps(v), _show(v)) for v in default)
    if options:
        return titles.get(json.dumps(default), _show(default))
    return json.dumps(default)


def console_form(
    ask: Callable[[str], str] = builtins.input,
    tell: Callable[[str], Any] = builtins.print,
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A form handler that asks a person for each field.

    Each field shows its title (or name), description and default. What
    is typed is checked against the field's schema as it is typed, and a
    wrong answer is asked again with what is allowed: integer or number
    and their `minimum`/`maximum`, `minLength`/`maxLength`, the `email`,
    `uri`, `date` and `date-time` formats, yes/no for a boolean, and the
    choices of an enum. Choices with titles (`oneOf`/`anyOf` of
    `{const, title}`, the legacy `enumNames`, and multi-select arrays
    whose `items` hold such choices) are listed by title with numbers;
    the person may type a title (in any case), its number, or the raw
    value, and the raw value is what is sent. A multi-select takes
    several, separated by commas.

    An empty answer takes the default (or leaves an optional field out);
    end of input (Ctrl-D) cancels, and Ctrl-C interrupts the call as
    anywhere else.

    Example::

        >>> answers = iter(["12", "3"])
        >>> form = console_form(ask=lambda prompt: next(answers), tell=print)
        >>> form({"message": "How many?", "requestedSchema": {"type": "object", "properties": {
        ...     "n": {"type": "integer", "maximum": 9}}, "required": ["n"]}})
        How many?
        n takes a whole number at most 9
        {'action': 'accept', 'content': {'n': 3}}
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
                label = str(spec.get("title") or name)
                options = _options(spec)
                # Numbered when a title differs from its value: then the
                # number is the short way to name the value.
                numbered = any(title != _show(value) for value, title in options)
                if spec.get("description"):
                    tell(f"{label}: {' '.join(str(spec['description']).split())}")
                if numbered:
                    for i, (_, title) in enumerate(options, 1):
                        tell(f"  {i}) {title}")
                default = f" [{_default_text(spec['default'], options)}]" if "default" in spec else ""
                prompt = f"{label} ({_hint(spec, options, numbered)}){default}" \
                         f"{'' if name in required else ' (optional)'}: "
                while True:
                    text = ask(prompt)
                    if not text.strip():
                        if "default" in spec:
                            content[name] = spec["default"]
                        elif name in required:
                            tell(f"{label} is required")
                            continue
                        break
                    try:
                        content[name] = _read(text, spec, options, numbered)
                    except ValueError as exc:
                        tell(f"{label} takes {exc}")
                        continue
                    break
        except EOFError:
            return {"action": "cancel"}
        return {"action": "accept", "content": content}

    return handler
