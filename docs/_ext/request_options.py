"""A Griffe extension: request methods shown with their options spelt out,
and `connect()`'s flat keywords with the grouped settings they stand for.

Every request method takes its options as `**options: Unpack[RequestOptions]`
(one `TypedDict`, so type checkers and editors know each keyword and its
type). Rendered as it is written, that signature hides `timeout=` and
`progress=` behind a type name. This replaces the `**options` parameter of
each such method with the options as keyword-only parameters, typed as
`RequestOptions` declares them, with the default each takes, and adds an
"Other Parameters" section describing them from `RequestOptions`' docstring,
so the reference shows one readable signature. The source stays as it is;
mkdocs.yml loads this for the python handler.

The build fails (`ValueError`) when `RequestOptions` has an option this file
gives no default for, or one its docstring does not describe: the page must
not silently lose an option.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

#: What each option is when not given: a value, or where the client's own
#: setting is read from (the option overrides it for one request).
DEFAULTS = {
    "timeout": "client.options.timeouts.request",
    "meta": "None",
    "trace_context": "None",
    "progress": "None",
    "reset_timeout_on_progress": "False",
    "max_total_timeout": "client.options.timeouts.max_total",
    "input_handlers": "client.options.input_handlers",
    "answer_input": "True",
    "max_input_rounds": "client.options.limits.max_input_rounds",
    "input_responses": "None",
    "request_state": "None",
    "bypass_cache": "False",
}

#: The flat keywords of `connect()`/`ClientOptions` (typed `X | _Unset`,
#: default `UNSET`: "not given, take the group's"), shown with the grouped
#: setting they stand for as their default.
FLAT_DEFAULTS = {
    "timeout": "timeouts.request", "probe_timeout": "timeouts.probe",
    "max_total_timeout": "timeouts.max_total", "handler_timeout": "timeouts.handler",
    "max_pages": "limits.max_pages", "max_input_rounds": "limits.max_input_rounds",
    "max_server_requests": "limits.max_server_requests", "max_in_flight": "limits.max_in_flight",
    "max_queued": "limits.max_queued", "keepalive_failures": "keepalive.failures",
}

# "- `name`: text" or "- `a`, `b`: text" list items, continued on indented lines.
_ITEM = re.compile(r"^- (?P<names>`\w+`(?:, `\w+`)*): (?P<text>.*)$")


def option_descriptions(docstring: str) -> dict[str, str]:
    """The description of each option in `RequestOptions`' docstring list."""
    found: dict[str, str] = {}
    current: list[str] = []
    for line in docstring.splitlines():
        item = _ITEM.match(line.strip()) if line.startswith("-") else None
        if item is not None:
            current = re.findall(r"`(\w+)`", item["names"])
            for name in current:
                found[name] = item["text"]
        elif current and line.startswith("  ") and line.strip():
            for name in current:
                found[name] += " " + line.strip()
        else:
            current = []
    return found


def _unpacks_request_options(parameter: griffe.Parameter) -> bool:
    return parameter.kind is griffe.ParameterKind.var_keyword and "Unpack[RequestOptions]" in str(
        parameter.annotation)


class RequestOptionsExpanded(griffe.Extension):
    """Spell out `**options: Unpack[RequestOptions]` in every signature."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        if pkg.name != "mcp_sync":
            return
        declared: griffe.Class = pkg["options"]["RequestOptions"]
        names = [name for name, member in declared.members.items() if member.is_attribute]
        missing = [name for name in names if name not in DEFAULTS]
        described = option_descriptions(declared.docstring.value if declared.docstring else "")
        # An option described only inside another's text (max_total_timeout
        # under reset_timeout_on_progress) still needs a line of its own.
        described.setdefault("max_total_timeout", "the most seconds a call may take in all when "
                             "`reset_timeout_on_progress` restarts its timeout")
        undescribed = [name for name in names if name not in described]
        if missing or undescribed:
            raise ValueError(f"RequestOptions options without a default here {missing} "
                             f"or a description in its docstring {undescribed}")
        options = [(name, declared.members[name].annotation) for name in names]
        self._expand(pkg, options, described, set())

    def _expand(self, obj: griffe.Object, options: list[tuple[str, Any]], described: dict[str, str],
                seen: set[str]) -> None:
        for member in list(obj.members.values()):
            if member.is_alias or member.path in seen:
                continue
            seen.add(member.path)
            if member.is_function:
                self._rewrite(member, options, described)
            elif member.is_class or member.is_module:
                self._expand(member, options, described, seen)

    @staticmethod
    def _rewrite(function: griffe.Function, options: list[tuple[str, Any]], described: dict[str, str]) -> None:
        parameters = list(function.parameters)
        for parameter in parameters:
            if "_Unset" in str(parameter.annotation) and str(parameter.default) == "UNSET":
                if parameter.name not in FLAT_DEFAULTS:
                    raise ValueError(f"{function.path}({parameter.name}=UNSET): no grouped setting known for it")
                parameter.annotation = str(parameter.annotation).replace(" | _Unset", "")
                parameter.default = FLAT_DEFAULTS[parameter.name]
        if not parameters or not _unpacks_request_options(parameters[-1]):
            return
        for overload in function.overloads or ():
            RequestOptionsExpanded._rewrite(overload, options, described)
        kept = parameters[:-1]
        given = {parameter.name for parameter in kept}
        added = [griffe.Parameter(name, annotation=annotation, kind=griffe.ParameterKind.keyword_only,
                                  default=DEFAULTS[name])
                 for name, annotation in options if name not in given]
        function.parameters = griffe.Parameters(*kept, *added)
        lines = [f"    {name}: {_sentence(described[name])}" for name, _ in options if name not in given]
        section = "Other Parameters:\n" + "\n".join(lines) + "\n"
        if function.docstring is None:
            function.docstring = griffe.Docstring(section, parent=function)
        else:
            function.docstring.value = _with_section(function.docstring.value, section)


def _sentence(text: str) -> str:
    """`text` starting with a capital, as the other parameters' do."""
    return text[:1].upper() + text[1:]


def _with_section(text: str, section: str) -> str:
    """`text` with `section` after its arguments: before the first of its
    Returns, Raises or example sections, or at the end."""
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if line.rstrip() in ("Returns:", "Raises:", "Example:", "Example::", "Examples:"):
            return "\n".join(lines[:index] + section.splitlines() + [""] + lines[index:])
    return text.rstrip() + "\n\n" + section
