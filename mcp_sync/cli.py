"""The `mcp-sync` command: talk to an MCP server from a shell.

    mcp-sync tools                              # the bundled demo server
    mcp-sync call countdown steps=5             # with a progress bar on stderr
    mcp-sync call add a=2 b=3 --json -- python my_server.py
    mcp-sync tools --url https://host/mcp --header 'X-Tenant: acme'
    mcp-sync call search --args @query.json --server github   # from .mcp.json & co
    mcp-sync servers                            # what that config file holds
    source <(mcp-sync completion bash)          # Tab completion (zsh, fish too)

Options go before or after the subcommand. It holds no logic the library
lacks: it parses arguments, finds and reads config files with
`mcp_sync.config`, calls `Client`, and prints. Errors print one line to
stderr and exit 2 (the command line is wrong) or 1 (anything else). `-v`
puts the library's logs, a stdio server's stderr among them, on stderr.
`servers` never prints environment or header values (nor a URL's user
information and query values): they hold secrets.

Whatever a server sends is printed with its control characters shown as
escapes (`\\x1b`), not sent to the terminal: a server's text must not set
the window title, clear the screen or overwrite what was printed. Only
newlines and tabs pass through.

Colour (the error prefix, tool names, required marks, a tool's error result)
is used only on a terminal, never when `NO_COLOR` is set to anything but
the empty string (no-color.org), and also off a terminal when `FORCE_COLOR`
is set (but not to "" or "0"); `NO_COLOR` wins over `FORCE_COLOR`. The
colour codes are the command's own: a server's text is neutralised first.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import math
import os
import re
import shlex
import signal
import sys
import threading
from collections.abc import Iterator, Mapping
from typing import Any, Callable, Sequence, TextIO, cast
from urllib.parse import urlsplit, urlunsplit

from . import cli_completion, connect
from .cli_completion import COMPLETE_TOOLS, PROMPT_COMMANDS, TOOL_COMMANDS
from .cli_usage import CommandLineParser, is_url, looks_like_program
from ._version import __version__
from .client import Client
from .client_requests import UNLISTED_TOOL
from .config import ServerConfig, kind_of_entry, url_of, find_config, load_config, with_options
from .control_chars import JSON_ESCAPED, neutralise
from .errors import (ConfigError, McpError, MethodNotFound, MissingClientCapability, RequestTimeout, ServerError,
                     VersionNegotiationError)
from .handlers import console_form, defaults_form
from .options import DEFAULT_PROBE_TIMEOUT, Reconnect, close_names, unknown_names
from .progress import ProgressBar
from .transports import Stdio, Target
from .types import (
    AudioContent,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    WireModel,
)
from .waiting import LONGEST_WAIT, deadline_in, remaining

EXIT_ERROR = 1
EXIT_USAGE = 2
#: A closed pipe on stdout: as a process killed by SIGPIPE would end.
EXIT_BROKEN_PIPE = 141
#: Ctrl-C: as a shell reports a process killed by SIGINT.
EXIT_INTERRUPTED = 130

#: The few colours used (SGR parameters), by what they mark.
_STYLES = {"error": "1;31", "name": "36", "required": "33", "failed": "31"}


def _wants_colour(stream: TextIO) -> bool:
    """Colour on `stream`: on a terminal (not TERM=dumb) unless NO_COLOR is
    non-empty; off one only when FORCE_COLOR is set (not "" or "0")."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR", "") not in ("", "0"):
        return True
    if os.environ.get("TERM") == "dumb":
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


#: A lone surrogate to its escape. Valid JSON (`"\ud83d"`, as a
#: JavaScript server cutting a string inside an emoji's pair sends it)
#: gives Python such a str, which a UTF-8 stream refuses to write: shown as
#: `\ud83d`, also the JSON escape of the same value in JSON output.
_SURROGATES = {c: f"\\u{c:04x}" for c in range(0xD800, 0xE000)}


def _visible(text: str) -> str:
    """`text` as the command prints it: control characters and lone
    surrogates as their escapes (newlines and tabs kept)."""
    return neutralise(text).translate(_SURROGATES)


class _Neutralised:
    """A text stream that neutralises control characters (and lone
    surrogates) in what is written, and knows whether it takes colour."""

    def __init__(self, stream: TextIO) -> None:
        self.raw = stream
        self.colour = _wants_colour(stream)

    def write(self, text: str) -> int:
        return self.raw.write(_visible(text))

    def flush(self) -> None:
        self.raw.flush()

    def isatty(self) -> bool:
        return self.raw.isatty()


def _put(stream: TextIO, text: str, style: str | None = None) -> None:
    """Write `text` (neutralised), in `style` when the stream takes colour;
    the colour codes bypass the neutralising, the text does not."""
    if style is not None and isinstance(stream, _Neutralised) and stream.colour and text:
        stream.raw.write(f"\x1b[{_STYLES[style]}m{_visible(text)}\x1b[0m")
    else:
        stream.write(text)


class _NotFinite(Exception):
    """A JSON number literal that is not a finite number (`NaN`,
    `Infinity`, `1e400`): Python's parser takes them, JSON has none, and
    the request could not be sent."""


def _finite(token: str) -> float:
    value = float(token)
    if not math.isfinite(value):
        raise _NotFinite(f"{token} is not a number JSON can send (finite numbers only)")
    return value


def _refuse_constant(token: str) -> Any:
    raise _NotFinite(f"{token} is not a number JSON can send (finite numbers only)")


def _json_loads(text: str) -> Any:
    """`json.loads` for what the user typed: `_NotFinite` for a number
    JSON cannot carry (`ValueError` for text that is not JSON)."""
    return json.loads(text, parse_float=_finite, parse_constant=_refuse_constant)


def _parse_pairs(pairs: Sequence[str], schema: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """`key=value` and `key:=json` pairs. `key:=json` is always JSON. For
    `key=value`, the property's type in `schema` (a tool's `inputSchema`)
    decides: a string property keeps the text as it is (`text=42` is
    "42"), any other declared type is read as JSON; a property the schema
    does not type is JSON when it parses as JSON, else text."""
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        raw = key.endswith(":")
        key = key[:-1] if raw else key
        if not sep or not key:
            raise ValueError(f"expected key=value or key:=json, got {pair!r}")
        declared = properties.get(key) if isinstance(properties, Mapping) else None
        types = declared.get("type") if isinstance(declared, Mapping) else None
        types = [types] if isinstance(types, str) else types if isinstance(types, list) else []
        if not raw and "string" in types:
            out[key] = value
            continue
        try:
            out[key] = _json_loads(value)
        except _NotFinite:
            if raw or types:
                raise ValueError(f"{key}: {value!r} is not a number JSON can send (finite numbers only)") from None
            out[key] = value  # not JSON: text, as for any parameter the schema does not type
            continue
        except ValueError:
            if raw:
                raise ValueError(f"{key}:= takes JSON, and {value!r} is not JSON") from None
            number = _number(value, types)
            if number is not None:
                out[key] = number
                continue
            if types:
                what = " or ".join(str(t) for t in types)
                raise ValueError(f"{key} takes {what} (the tool's inputSchema says), and {value!r} is not one") from None
            out[key] = value
    return out


def _number(text: str, types: Sequence[Any]) -> int | float | None:
    """A number JSON does not spell but a person does (`.5`, `+1`, `01`,
    `5.`), for a parameter typed `number` or `integer`; None otherwise
    (a non-finite one too: JSON cannot carry it)."""
    if "number" not in types and "integer" not in types:
        return None
    for read in (int, float):
        try:
            value = read(text)
        except ValueError:
            continue
        if math.isfinite(value):
            return value
    return None


#: The options accepted before and after the subcommand. After it, they are
#: parsed by the subcommand's parser, with no defaults (`SUPPRESS`), so that
#: one not given there leaves what came before (or the default) in place;
#: repeatable ones collect into a `*_after` list that `_parse` appends.
_REPEATABLE = ("protocol", "header")


def _add_common_options(parser: argparse.ArgumentParser, *, after: bool) -> None:
    group = parser.add_argument_group("options (before or after COMMAND)")

    def add(*flags: str, default: Any = None, **kwargs: Any) -> None:
        if after:
            default = argparse.SUPPRESS
            if kwargs.get("action") == "append":
                kwargs["dest"] = kwargs["dest"] + "_after"
        group.add_argument(*flags, default=default, **kwargs)

    add("--url", help="a Streamable HTTP server URL (a bearer token may come from $MCP_SYNC_TOKEN)")
    add("--config", metavar="FILE", help="a server config file (mcpServers or VS Code servers JSON)")
    add("--server", metavar="NAME",
        help="the server NAME of --config FILE, or of the first usual config file that defines it")
    add("--header", action="append", dest="header", metavar="'NAME: VALUE'",
        help="an HTTP header for every request (repeatable)")
    add("--oauth", action="store_true", default=False,
        help="with --url: authorize with OAuth in your browser when the server asks")
    add("--no-browser", action="store_true", default=False,
        help="with --oauth: print the authorization URL and ask for the address you end on")
    add("--token-file", metavar="PATH",
        help="with --oauth: where tokens are kept (default: "
             "$XDG_CONFIG_HOME/mcp-sync/tokens.json or ~/.config/mcp-sync/tokens.json)")
    add("--json", action="store_true", default=False, help="print raw JSON results")
    add("--timeout", type=_timeout_option, default=30.0, metavar="SECONDS", help="seconds per request (default 30)")
    add("--protocol", action="append", dest="protocol", metavar="VERSION",
        help="allow only this protocol version (repeatable)")
    add("--answer", choices=("ask", "defaults", "none"),
        help="how to answer a server's forms: ask on the terminal (the default when "
             "stdin is one), accept the defaults, or not at all")
    add("-v", "--verbose", action="store_true", default=False,
        help="show the server's stderr and debug logs on stderr")


def _timeout_option(text: str) -> float | None:
    """`--timeout SECONDS`: a positive number of seconds. One longer than
    a thread can wait (`inf`, `1e10`) is no limit (None): the library
    refuses those numbers, and waiting "for ever" is what they ask for.
    Anything else is a usage error, said in the option's own terms."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if seconds > LONGEST_WAIT:
        return None
    if not seconds > 0:  # NaN too
        raise argparse.ArgumentTypeError(f"give a positive number of seconds, such as 30 or 0.5, not {text!r}")
    return seconds


def _build_parser() -> CommandLineParser:
    # No abbreviated options: `--ur` taken as `--url` would send a
    # configured server's credentials wherever a typo points.
    parser = CommandLineParser(
        allow_abbrev=False,
        prog="mcp-sync",
        description="Talk to an MCP server. Without a target, uses the bundled demo server.",
        epilog="Target a server program with: mcp-sync COMMAND ... [options] -- program args...; "
               "a configured server with --server NAME [--config FILE].",
    )
    _add_common_options(parser, after=False)
    parser.add_argument("--version", action="version", version=f"mcp-sync {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help, allow_abbrev=False)
        _add_common_options(p, after=True)
        return p

    command("discover", "show the server's identity, versions and capabilities")
    tools = command("tools", "list the tools; tools NAME: one tool's parameters")
    tools.add_argument("name", nargs="?", help="show this tool's parameters: type, required, description")
    call = command("call", "call a tool: call TOOL [key=value ...] [--args JSON|@FILE]")
    call.add_argument("tool")
    call.add_argument("arguments", nargs="*", metavar="key=value")
    call.add_argument("--args", metavar="JSON|@FILE",
                      help="the arguments as a JSON object, or @FILE to read it from a file (@- : stdin); "
                           "key=value pairs given too override its keys")
    command("resources", "list the resources and resource templates")
    read = command("read", "read a resource: read URI")
    read.add_argument("uri")
    prompts = command("prompts", "list the prompts; prompts NAME: one prompt's arguments")
    prompts.add_argument("name", nargs="?", help="show this prompt's arguments: required, description")
    prompt = command("prompt", "render a prompt: prompt NAME [key=value ...] [--args JSON|@FILE]")
    prompt.add_argument("name")
    prompt.add_argument("arguments", nargs="*", metavar="key=value")
    prompt.add_argument("--args", metavar="JSON|@FILE",
                        help="the arguments as a JSON object, or @FILE to read it from a file (@- : stdin)")
    command("servers", "list the servers of a config file (--config FILE, or the first usual one found)")
    completion = sub.add_parser("completion", help="print a shell's Tab completion script: completion bash|zsh|fish",
                                description="Print the Tab completion script for SHELL. Load it with: "
                                            "source <(mcp-sync completion bash) (zsh: the same, after compinit); "
                                            "mcp-sync completion fish | source")
    completion.add_argument("shell", choices=("bash", "zsh", "fish"))
    # Hidden (no help): what the completion scripts run to complete a tool name.
    complete_tools = sub.add_parser(COMPLETE_TOOLS)
    complete_tools.add_argument("line")
    complete_tools.add_argument("point")
    parser.commands = [name for name in sub.choices if name != COMPLETE_TOOLS]
    return parser


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace:
    """Parse `argv` (raises SystemExit on a usage error, as argparse does)."""
    args, extra = parser.parse_known_args(argv)
    # argparse gives `nargs="*"` its (empty) share before an option, so the
    # pairs after one (`call echo --json text=hi`) come back unrecognised.
    if extra and hasattr(args, "arguments") and not any(e.startswith("-") for e in extra):
        args.arguments = [*args.arguments, *extra]
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    for name in _REPEATABLE:
        after = vars(args).pop(name + "_after", None)
        if after:
            setattr(args, name, [*(getattr(args, name) or []), *after])
    return args


class _UsageError(Exception):
    """A command line that cannot work, whatever the server or the files say."""


def _parse_headers(values: Sequence[str] | None) -> dict[str, str]:
    """`--header 'Name: value'` options as a mapping (the transport checks names and values)."""
    headers: dict[str, str] = {}
    for value in values or ():
        # The messages leave the value out: it is often a token.
        name, sep, text = value.partition(":")
        name = name.strip()
        if not sep:
            raise _UsageError("--header wants 'Name: value', and this one has no colon")
        if not name or any(c.isspace() for c in name):
            raise _UsageError(f"--header wants 'Name: value', and {name!r} is not a header name")
        if name.lower() in (n.lower() for n in headers):
            raise _UsageError(f"--header {name!r} given twice")
        headers[name] = text.strip()
    return headers


def _load_args(spec: str, stdin: TextIO) -> dict[str, Any]:
    """`--args`: a JSON object given inline, or `@FILE` (`@-`: standard input)."""
    where = "--args"
    text = spec
    if spec.startswith("@"):
        path = spec[1:]
        where = "--args from standard input" if path == "-" else f"--args file {path}"
        try:
            if path == "-":
                text = stdin.read()
            else:
                with open(path, encoding="utf-8-sig") as f:
                    text = f.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise _UsageError(f"cannot read {where}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        value = _json_loads(text)
    except (ValueError, _NotFinite) as exc:
        raise _UsageError(f"{where} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise _UsageError(f"{where} must be a JSON object, not {type(value).__name__}")
    return value


def _parse_pairs_shape(pairs: Sequence[str], command: str, name: str) -> None:
    """A usage error for a pair without `=` (before anything is started);
    a bare value (`mcp-sync call add 2 3`) is told to take its name, the
    tool's or prompt's (`command`'s `name`'s) list of names being one
    command away."""
    for pair in pairs:
        if "=" not in pair:
            word, kind = ("argument", "prompts") if command == "prompt" else ("parameter", "tools")
            sign = ":=" if pair.lstrip().startswith(("{", "[")) else "="  # (JSON as JSON, not as a string)
            raise _UsageError(f"expected key=value or key:=json, got {pair!r}: each value goes with its {word}'s "
                              f"name, as in {shlex.quote('NAME' + sign + pair)} "
                              f"(mcp-sync {kind} {shlex.quote(name)} shows the names)")
        if pair.startswith(("=", ":=")):
            raise _UsageError(f"expected key=value or key:=json, got {pair!r}")


def _arguments(args: argparse.Namespace, stdin: TextIO, schema: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The call's or prompt's arguments: `--args`, then the pairs over it
    (read by the tool's input `schema` when there is one)."""
    base = _load_args(args.args, stdin) if args.args is not None else {}
    try:
        pairs = _parse_pairs(args.arguments, schema)
    except ValueError as exc:
        raise _UsageError(str(exc)) from None
    return {**base, **pairs}


def _dump(value: Any, out: TextIO) -> None:
    if isinstance(value, WireModel):
        value = value.to_wire()
    elif isinstance(value, list):
        value = [v.to_wire() if isinstance(v, WireModel) else v for v in value]
    out.write(_json_text(value) + "\n")


def _json_text(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False).translate(JSON_ESCAPED)


def _table(rows: Sequence[tuple[str, str]], out: TextIO, empty: str) -> None:
    if not rows:
        out.write(empty + "\n")
        return
    width = max(len(name) for name, _ in rows)
    for name, text in rows:
        first = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
        out.write(f"{name.ljust(width)}  {first}".rstrip() + "\n")


def _parameters(tool: Any) -> list[tuple[str, Mapping[str, Any], bool]]:
    """A tool's parameters from its inputSchema: (name, schema, required)."""
    schema = tool.input_schema if isinstance(tool.input_schema, Mapping) else {}
    found = schema.get("properties")
    properties: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    listed = schema.get("required")
    required = {key for key in listed if isinstance(key, str)} if isinstance(listed, list) else set()
    return [(str(key), spec if isinstance(spec, Mapping) else {}, key in required) for key, spec in properties.items()]


#: A signature longer than this ends in "..." (the table's first column stays readable).
_SIGNATURE_WIDTH = 40


def _signature(tool: Any) -> str:
    """`add(a, b)`, `countdown(steps, [delay])`: the parameters, the
    optional ones in brackets (as `tools NAME` marks the others required)."""
    parts = [key if required else f"[{key}]" for key, _, required in _parameters(tool)]
    while parts and len(tool.name) + len(", ".join(parts)) + 2 > _SIGNATURE_WIDTH:
        parts = parts[:-2] + ["..."] if parts[-1] == "..." else parts[:-1] + ["..."]
        if parts == ["..."]:
            break
    return f"{tool.name}({', '.join(parts)})"


def _tool_table(tools: Sequence[Any], out: TextIO) -> None:
    """`tools`: one line a tool, its signature and the first line of its description."""
    if not tools:
        out.write("(no tools)\n")
        return
    rows = [(tool.name, _signature(tool), (tool.description or "").strip()) for tool in tools]
    width = max(len(signature) for _, signature, _ in rows)
    for name, signature, text in rows:
        first = text.splitlines()[0] if text else ""
        _put(out, name, "name")
        out.write(f"{signature[len(name):].ljust(width - len(name))}  {first}".rstrip() + "\n")


def _joined(words: Sequence[str], last: str) -> str:
    """`a`, `a or b`, `a, b or c` (with `last` "or")."""
    return f"{', '.join(words[:-1])} {last} {words[-1]}" if len(words) > 1 else "".join(words)


def _nearest(name: str, listed: Sequence[Any]) -> str:
    """`; did you mean 'add'?` (or 'a' or 'b') for the listed names close
    to `name`; empty when none is."""
    close = [repr(each) for each in close_names(name, [each.name for each in listed], count=3, cutoff=0.6)]
    return f"; did you mean {_joined(close, 'or')}?" if close else ""


def _find(listed: Sequence[Any], name: str, kind: str) -> Any:
    """The tool or prompt (`kind`) `name` of the server's list;
    `_NotFound`, naming the nearest listed names, when the list holds none
    of that name."""
    found = next((each for each in listed if each.name == name), None)
    if found is None:
        raise _NotFound(f"no {kind} named {name!r}{_nearest(name, listed)} (mcp-sync {kind}s lists them)")
    return found


def _server_given_as_name(args: argparse.Namespace) -> None:
    """With no server given (the demo server is used), a tool or prompt
    name that reads as a server program or URL (`mcp-sync tools
    ./server.py`) was meant as the server: a usage error saying where it
    goes, before anything is started."""
    name = args.tool if args.command == "call" else getattr(args, "name", None)
    if name is None or not (looks_like_program(name) or is_url(name)):
        return
    kind = "tool" if args.command in ("call", "tools") else "prompt"
    where = ["--url", name] if is_url(name) else ["--", name]
    if args.command in ("tools", "prompts"):
        line = shlex.join(["mcp-sync", args.command, *where])
    else:  # (what follows the name may be the program's arguments or the call's: not guessed)
        line = f"mcp-sync {args.command} {kind.upper()} key=value {shlex.join(where)}"
    what = "URL" if is_url(name) else "program"
    raise _UsageError(f"{name!r} reads as a server {what}, not a {kind} name (no server was given, so the demo "
                      f"server is used): a server {what} goes {'with --url' if is_url(name) else 'last, after --'}, "
                      f"as in {line}")


def _closed(schema: Any) -> Callable[[str], bool] | None:
    """For a tool's inputSchema that allows no parameters but those it
    names (`additionalProperties: false`): whether a name is allowed by
    its `patternProperties` (searched, as JSON Schema does, and bounded in
    time as the library's checks of a tool's output are: the patterns are
    the server's; one that cannot be used or does not finish in time
    allows every name: the server judges). None when any name is allowed."""
    if not isinstance(schema, Mapping) or schema.get("additionalProperties") is not False:
        return None
    patterns = schema.get("patternProperties")
    patterns = list(patterns) if isinstance(patterns, Mapping) else []

    # One budget for every name and pattern matched (a schema may hold
    # many patterns, a command line many names), from the first match on.
    deadline: list[float] = []

    def allowed(name: str) -> bool:
        from .protocol.schemas import PATTERN_SECONDS, search_within  # (here: only a closed schema needs them)

        if not deadline:
            deadline.append(deadline_in(PATTERN_SECONDS))
        for pattern in patterns:
            left = remaining(deadline[0])
            if left <= 0 or search_within(str(pattern), name, left) is not False:
                return True
        return False

    return allowed


def _check_arguments(name: str, parameters: Sequence[tuple[str, bool]], arguments: Mapping[str, Any], *,
                     closed: Callable[[str], bool] | None = None, kind: str = "tool") -> None:
    """A required parameter (`parameters`: name and whether required) left
    out is a usage error, and so is one the tool or prompt (`kind`) does
    not have when its definition allows no others (`closed`, from
    `_closed`: whether another name is allowed all the same); each unknown
    one is named with the nearest known name. Pydantic-based servers
    ignore a misspelt argument and then refuse the missing one with a page
    of validation errors."""
    names = [key for key, _ in parameters]
    missing = [key for key, required in parameters if required and key not in arguments]
    unknown = [key for key in arguments if key not in names] if names else []
    refused = [key for key in unknown if not closed(key)] if closed is not None else []
    if not missing and not refused:
        return
    word = "parameter" if kind == "tool" else "argument"
    said = []
    if missing:
        said.append(f"{name} needs {_joined(missing, 'and')}")
    shown = refused if closed is not None else unknown  # (names a pattern allows are not wrong)
    if shown:
        said.append(f"{'it' if missing else name} has no {word} {unknown_names(shown, names)}")
    raise _UsageError(f"{'; '.join(said)} (mcp-sync {kind}s {name} shows its {word}s)")


def _listing_lacks(name: str, listed: Sequence[Any], kind: str) -> str:
    """`no tool 'ad' in the list mcp-sync tools shows; did you mean 'add'?`
    (the list the command shows: a definition the client could not use
    is not in it either)."""
    return f"no {kind} {name!r} in the list mcp-sync {kind}s shows{_nearest(name, listed)}"


def _not_listed(exc: McpError, name: str, listed: Sequence[Any], kind: str) -> None:
    """Amend the failure of a tool or prompt the list does not hold (the
    error is this command's own: in place) to say so, unless the library
    said it already (`call_tool` does after a -32602)."""
    first = str(exc.args[0]) if exc.args else str(exc)
    if UNLISTED_TOOL not in first:
        exc.args = (f"{first}; {_listing_lacks(name, listed, kind)}",)


def _unknown_resource(client: Client, exc: McpError, uri: str, timeout: float | None) -> None:
    """Amend a refused read of a resource (the error is this command's
    own: in place) with the listed URIs `uri` may have meant: a misspelt
    one, one without its scheme (`readme` for `demo://readme`, compared
    with what follows the listed ones'), or one whose path ends with it
    (`features.md`). Any error answer counts: servers word "no such
    resource" in many ways (the reference `everything` server answers
    -32603, "Invalid URL"). Nothing when the list cannot be had, holds
    `uri` (the server may not serve it all the same), or holds none of
    these."""
    try:
        listed = [resource.uri for resource in client.list_resources(timeout=timeout)]
    except McpError:
        return
    if uri in listed:
        return
    keys = {(each if "://" in uri else each.partition("://")[2] or each): each for each in listed}
    meant = [keys[key] for key in close_names(uri, keys, count=3, cutoff=0.75)]
    if "://" not in uri and "/" not in uri:
        meant += [each for each in listed if each.endswith("/" + uri) and each not in meant]
    if meant:
        exc.args = (f"{exc}; no resource {uri!r} in the list mcp-sync resources shows; "
                    f"did you mean {_joined([repr(each) for each in meant[:3]], 'or')}?",)


def _offered(listing: Callable[[], Any], empty: Any) -> tuple[Any, bool]:
    """`listing()`, and True; `empty` and False when the server answers
    that it has no such method because it does not declare the capability
    (a tools-only server asked for its prompts: it has none)."""
    try:
        return listing(), True
    except MethodNotFound as exc:
        if exc.capability is None:
            raise
        return empty, False


def _show_tool(tools: Sequence[Any], name: str, as_json: bool, out: TextIO) -> int:
    """`tools NAME`: the tool's description and one line per parameter."""
    tool = _find(tools, name, "tool")
    rows = []
    for key, spec, required in _parameters(tool):
        kind = spec.get("type")
        kind = "|".join(map(str, kind)) if isinstance(kind, list) else str(kind or "any")
        if isinstance(spec.get("enum"), list):
            kind += " (" + ", ".join(json.dumps(v) for v in spec["enum"][:8]) + ")"
        rows.append((key, kind, "required" if required else "", _first_line_of(spec.get("description"))))
    return _show_definition(tool, rows, "(no parameters)", as_json, out)


def _show_prompt(prompts: Sequence[Any], name: str, as_json: bool, out: TextIO) -> int:
    """`prompts NAME`: the prompt's description and one line per argument."""
    prompt = _find(prompts, name, "prompt")
    rows = [(argument.name, "required" if argument.required else "", _first_line_of(argument.description))
            for argument in prompt.arguments]
    return _show_definition(prompt, rows, "(no arguments)", as_json, out)


def _first_line_of(text: Any) -> str:
    lines = str(text or "").strip().splitlines()
    return lines[0] if lines else ""


def _show_definition(found: Any, rows: Sequence[tuple[str, ...]], empty: str, as_json: bool, out: TextIO) -> int:
    """A tool's or prompt's name and description, then one line a
    parameter: its columns aligned (the next to last, the "required" mark,
    coloured), then the first line of its description; with `as_json`,
    the definition as the server sent it."""
    if as_json:
        _dump(found, out)
        return 0
    _put(out, found.name, "name")
    out.write(f"  {(found.description or '').strip()}".rstrip() + "\n")
    if not rows:
        out.write(f"  {empty}\n")
    width = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)] if rows else []
    for *columns, description in rows:
        line = "  " + "  ".join(column.ljust(size) for column, size in zip(columns, width)) + "  " + description
        line = line.rstrip()
        mark = columns[-1]
        at = 2 + sum(width[:-1]) + 2 * (len(width) - 1)  # where the mark starts
        out.write(line[:at])
        _put(out, line[at:at + len(mark)], "required")
        out.write(line[at + len(mark):] + "\n")
    return 0


class _NotFound(Exception):
    """Something named on the command line that the server does not have."""


def _describe_block(block: Any) -> str:
    """A content block that is not text, by what it is: `<resource_link
    demo://x (text/plain, 12 bytes)>`, `<image/png, 4033 bytes>`."""
    if isinstance(block, (ImageContent, AudioContent)):
        size = len(block.data) * 3 // 4 - block.data[-2:].count("=")  # decoded size, without decoding
        return f"<{block.mime_type or block.type}, {size} bytes>"
    if isinstance(block, ResourceLink):
        facts = ", ".join(part for part in (block.mime_type, f"{block.size} bytes" if block.size is not None else None)
                          if part)
        return f"<resource_link {block.uri}{f' ({facts})' if facts else ''}>"
    if isinstance(block, EmbeddedResource) and block.resource is not None:
        contents = block.resource
        text = getattr(contents, "text", None)
        if isinstance(text, str):
            return f"<resource {contents.uri}>\n{text}"
        blob = getattr(contents, "blob", "") or ""
        size = len(blob) * 3 // 4 - blob[-2:].count("=")
        return f"<resource {contents.uri} ({contents.mime_type or 'binary'}, {size} bytes)>"
    return f"<{getattr(block, 'type', '?')} content>"


def _print_call_result(result: CallToolResult, out: TextIO, err: TextIO) -> int:
    target = err if result.is_error else out
    printed = False
    style = "failed" if result.is_error else None
    for block in result.content:
        _put(target, block.text if isinstance(block, TextContent) else _describe_block(block), style)
        target.write("\n")
        printed = True
    if not printed and result.structured_content is not None:
        _put(target, _json_text(result.structured_content), style)
        target.write("\n")
    return EXIT_ERROR if result.is_error else 0


def _run(client: Client, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    as_json = args.json
    if args.command == "discover":
        if client.stateless:
            info: Any = client.discover()
            if as_json:
                _dump(info, out)
                return 0
            versions = ", ".join(info.supported_versions)
        else:
            info = client.session
            if as_json:
                _dump(info, out)
                return 0
            versions = info.protocol_version
        server = client.server_info
        out.write(f"server:       {server.name if server else '?'} {server.version or '' if server else ''}\n")
        out.write(f"protocol:     {client.protocol_version} (server speaks {versions})\n")
        out.write(f"capabilities: {', '.join(sorted(client.server_capabilities or {})) or '-'}\n")
        if client.instructions:
            out.write(f"instructions: {client.instructions}\n")
        return 0
    if args.command == "tools":
        tools, offered = _offered(lambda: client.list_tools(timeout=args.timeout), [])
        if args.name is not None:
            if not offered:
                raise _NotFound(f"no tool named {args.name!r}: the server does not offer tools")
            return _show_tool(tools, args.name, as_json, out)
        if as_json:
            _dump(tools, out)
        elif offered:
            _tool_table(tools, out)
        else:
            out.write("(no tools: the server does not offer tools)\n")
        return 0
    if args.command == "call":
        # Listed first: the pairs are read by the tool's inputSchema, and the
        # result is checked against its outputSchema.
        tools = client.list_tools(timeout=args.timeout)
        # A tool the list does not hold is called all the same (a server
        # may keep one out of it): its refusal names the listed one meant.
        definition = next((tool for tool in tools if tool.name == args.tool), None)
        arguments = _arguments(args, sys.stdin, definition.input_schema if definition is not None else None)
        if definition is not None:
            _check_arguments(definition.name, [(key, required) for key, _, required in _parameters(definition)],
                             arguments, closed=_closed(definition.input_schema))
        # The library's plain bar (not tqdm, even when installed: the same
        # look everywhere): it neutralises the server's message itself, and
        # draws on the raw stream, as its carriage return must reach a terminal.
        bar = ProgressBar(plain=True, file=err.raw if isinstance(err, _Neutralised) else err)
        try:
            result = client.call_tool(args.tool, arguments, timeout=args.timeout, progress=bar)
        except McpError as exc:
            if definition is None:
                _not_listed(exc, args.tool, tools, "tool")
            raise
        finally:
            bar.close()
        if as_json:
            _dump(result, out)
            return EXIT_ERROR if result.is_error else 0
        status = _print_call_result(result, out, err)
        if result.is_error and definition is None:
            # How official-SDK servers refuse an unknown tool: an error result.
            _put(err, "mcp-sync:", "error")
            err.write(f" {_listing_lacks(args.tool, tools, 'tool')}\n")
        return status
    if args.command == "resources":
        resources, offered = _offered(lambda: client.list_resources(timeout=args.timeout), [])
        templates = []
        if offered:
            try:
                templates = client.list_resource_templates(timeout=args.timeout)
            except MethodNotFound:
                pass  # the part of resources many servers leave out: none
        if as_json:
            _dump({"resources": [r.to_wire() for r in resources],
                   "resourceTemplates": [t.to_wire() for t in templates]}, out)
            return 0
        _table([(r.uri, r.description or r.name or "") for r in resources], out,
               "(no resources)" if offered else "(no resources: the server does not offer resources)")
        if templates:
            out.write("\ntemplates:\n")
            _table([(t.uri_template, t.description or t.name or "") for t in templates], out, "")
        return 0
    if args.command == "read":
        try:
            read = client.read_resource(args.uri, timeout=args.timeout)
        except ServerError as exc:
            _unknown_resource(client, exc, args.uri, args.timeout)
            raise
        if as_json:
            _dump(read, out)
            return 0
        for contents in read.contents:
            text = getattr(contents, "text", None)
            if text is not None:
                out.write(text if text.endswith("\n") else text + "\n")
            else:
                out.write(f"<{contents.mime_type or 'binary'} blob, {len(contents.bytes)} bytes>\n")  # type: ignore[union-attr]
        return 0
    if args.command == "prompts":
        prompts, offered = _offered(lambda: client.list_prompts(timeout=args.timeout), [])
        if args.name is not None:
            if not offered:
                raise _NotFound(f"no prompt named {args.name!r}: the server does not offer prompts")
            return _show_prompt(prompts, args.name, as_json, out)
        if as_json:
            _dump(prompts, out)
        else:
            _table([(p.name, p.description or "") for p in prompts], out,
                   "(no prompts)" if offered else "(no prompts: the server does not offer prompts)")
        return 0
    if args.command == "prompt":
        prompts, offered = _offered(lambda: client.list_prompts(timeout=args.timeout), [])
        if not offered:
            raise _NotFound(f"no prompt named {args.name!r}: the server does not offer prompts")
        # As for `call`: a prompt the list does not hold is asked for all the same.
        definition = next((prompt for prompt in prompts if prompt.name == args.name), None)
        if definition is not None:
            _check_arguments(definition.name, [(argument.name, argument.required)
                                               for argument in definition.arguments],
                             args.parsed_arguments, kind="prompt")
        arguments = {k: v if isinstance(v, str) else json.dumps(v) for k, v in args.parsed_arguments.items()}
        try:
            rendered = client.get_prompt(args.name, arguments, timeout=args.timeout)
        except McpError as exc:
            if definition is None:
                _not_listed(exc, args.name, prompts, "prompt")
            raise
        if as_json:
            _dump(rendered, out)
            return 0
        for message in rendered.messages:
            content = message.content
            # Not text: said as `call` says it (an embedded resource's text included).
            text = content.text if isinstance(content, TextContent) else _describe_block(content)
            out.write(f"{message.role}: {text}\n")
        return 0
    raise AssertionError(args.command)  # argparse only allows the commands above


def _no_forms(answer: str | None) -> str:
    """Said when a server wants a form this run does not answer."""
    why = ("--answer none answers none" if answer == "none" else
           "mcp-sync answers forms only on a terminal (stdin is not one here)")
    return (f"the server asks for a form, and {why}: --answer ask to be asked, or --answer defaults to accept "
            "its defaults")


def _input_handlers(answer: str | None, err: TextIO) -> dict[str, Any]:
    if answer is None:
        answer = "ask" if sys.stdin.isatty() else "none"
    if answer == "defaults":
        return {"form": defaults_form}
    if answer == "ask":
        # Prompts go to stderr, so that stdout carries only the result.
        def ask(prompt: str) -> str:
            err.write(prompt)
            err.flush()
            return input()

        return {"form": console_form(ask=ask, tell=lambda text: print(text, file=err))}
    return {}


def _token_file(path: str | None) -> str:
    if path:
        return path
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(config, "mcp-sync", "tokens.json")


def _auth(args: argparse.Namespace, err: TextIO) -> Any:
    """The token provider for --url: OAuth with --oauth, else $MCP_SYNC_TOKEN, else none."""
    if args.oauth:
        from .auth import FileStorage, LoopbackRedirect, OAuth, PasteRedirect

        def show(url: str) -> None:
            err.write(f"Authorize mcp-sync by opening:\n  {url}\n")
            err.flush()

        def ask(prompt: str) -> str:
            err.write(prompt)
            err.flush()
            return input()

        redirect = PasteRedirect(show=show, ask=ask) if args.no_browser else LoopbackRedirect(show=show)
        return OAuth(redirect=redirect, storage=FileStorage(_token_file(args.token_file)), client_name="mcp-sync")
    return _environment_token()


def _environment_token() -> str | None:
    """$MCP_SYNC_TOKEN (None when unset or empty), without the whitespace
    around it: a bearer token holds none (RFC 6750's b64token), and the
    ways it reaches the environment add some (a Docker or Kubernetes
    secret made from a file keeps the file's last newline; `$(cat FILE)`
    keeps a Windows file's CR). What is left must be one word of printable
    ASCII: anything else is a usage error naming the variable, never its
    value (a secret), rather than a header the transport refuses or a
    control character sent to the server."""
    value = os.environ.get("MCP_SYNC_TOKEN")
    if not value:
        return None
    token = value.strip()
    if not token:
        raise _UsageError("$MCP_SYNC_TOKEN holds only whitespace: set it to the token, or unset it")
    if token[:7].lower() == "bearer " and len(token.split()) == 2:
        raise _UsageError("$MCP_SYNC_TOKEN starts with 'Bearer ': set it to the token alone, without the scheme")
    for char in token:
        if not "!" <= char <= "~":
            what = ("a line break" if char in "\r\n\v\f\x85\u2028\u2029" else "a space" if char.isspace()
                    else "a non-ASCII character" if char.isprintable() else "a control character")
            raise _UsageError(f"$MCP_SYNC_TOKEN has {what} in the token (a bearer token is one word of "
                              f"printable ASCII): set it to the token alone")
    return token


def _configured(args: argparse.Namespace, err: TextIO, given: ServerConfig | None) -> Target:
    """The target of `--server NAME` (in `--config FILE`, in the config
    `main()` was given, or found) or of a config holding one server; says on
    stderr which file was found."""
    if args.config is not None or given is not None:
        config = load_config(args.config) if args.config is not None else given
        assert config is not None
        name = args.server
        if name is None:
            if len(config) != 1:
                where = f"--config {args.config}" if args.config is not None else "the configuration"
                raise _UsageError(f"{where} holds {len(config)} servers: choose one with --server NAME "
                                  f"(servers: {', '.join(config) or 'none'})")
            name = next(iter(config))
        return config[name]
    path = find_config(args.server)
    err.write(f"mcp-sync: using server {args.server!r} from {path}\n")
    return load_config(path)[args.server]


def _target(args: argparse.Namespace, command: list[str], err: TextIO,
            config: ServerConfig | None) -> tuple[Any, dict[str, Any]]:
    """What to connect to, and the `connect()` options that go with it."""
    given = [what for what, present in (("--url", args.url), ("--server/--config", args.server or args.config),
                                          ("-- command", command)) if present]
    if len(given) > 1:
        raise _UsageError(f"give one of --url, --server (or --config) and -- command, not {' and '.join(given)}")
    if (args.oauth or args.no_browser or args.token_file) and not args.url:
        raise _UsageError("--oauth, --no-browser and --token-file go with --url")
    if (args.no_browser or args.token_file) and not args.oauth:
        raise _UsageError("--no-browser and --token-file go with --oauth")
    headers = _parse_headers(args.header)
    options: dict[str, Any] = {}
    target: Any
    if args.url:
        target = _with_scheme(args.url)
        if headers:
            options["headers"] = headers
        # An Authorization header given by hand wins over $MCP_SYNC_TOKEN.
        if args.oauth or "authorization" not in (name.lower() for name in headers):
            auth = _auth(args, err)
            if auth is not None:
                options["auth"] = auth
    elif args.server or args.config or (config is not None and not command):
        target = _configured(args, err, config)
        if headers:
            from .transports import HTTP  # here: `--help` and stdio servers need no HTTP stack

            if not isinstance(target, HTTP):
                raise _UsageError("--header goes with an HTTP server, and this one is a program (stdio)")
            target, _ = with_options(target, {"headers": headers})  # over the file's own
    elif headers:
        raise _UsageError("--header goes with --url or a configured HTTP server")
    elif command:
        target = command
    else:
        assert _uses_demo(args, command, config)
        target = [sys.executable, "-m", "mcp_sync.testing.server"]
    return target, options


def _with_scheme(url: str) -> str:
    """`--url`'s URL, its scheme in lower case (`HTTP://` is `http://`:
    schemes are case-insensitive, RFC 3986, and the usage hints take any
    case); a usage error without a scheme, whose fix is itself a URL
    (`//host/mcp` and `:8000/mcp` need a host after `http://`)."""
    scheme, sep, rest = url.partition("://")
    if sep:
        return scheme.lower() + sep + rest if is_url(url) else url
    fixed = url.lstrip("/")
    fixed = f"localhost{fixed}" if fixed.startswith(":") else fixed
    raise _UsageError(f"--url needs its scheme: --url http://{fixed} (or https://)")


def _uses_demo(args: argparse.Namespace, command: list[str], config: ServerConfig | None) -> bool:
    """Whether the command line gives no server, so `_target` starts the bundled demo server."""
    return not (args.url or args.server or args.config or command) and config is None


def _redact_url(url: str) -> str:
    """`url` with its user information and query values hidden: they often
    hold keys (a token may stand as the user name, too)."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            netloc = f"***@{netloc.rpartition('@')[2]}"
        query = "&".join(f"{k.partition('=')[0]}=***" if "=" in k else k for k in parts.query.split("&")) \
            if parts.query else ""
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    except ValueError:
        return "<a URL that cannot be parsed>"


def _describe(config: ServerConfig, name: str) -> dict[str, Any]:
    """One server of a config file as `servers` shows it: as written (so
    `${VAR}` placeholders, not their values), with the names only of its
    environment variables and headers, whose values are often secrets."""
    entry = config.entries[name]
    kind = kind_of_entry(name, entry, str(config.path or "the config"))
    info: dict[str, Any] = {"name": name, "type": kind}
    if kind == "stdio":
        info["command"] = str(entry["command"])
        info["args"] = [str(a) for a in entry.get("args", [])]
        if entry.get("cwd"):
            info["cwd"] = entry["cwd"]
        if entry.get("env"):
            info["env"] = sorted(entry["env"])
        if entry.get("envFile"):
            info["envFile"] = entry["envFile"]
    else:
        info["url"] = _redact_url(str(url_of(entry)))
        if entry.get("headers"):
            info["headers"] = sorted(entry["headers"])
    return info


def _servers(args: argparse.Namespace, command: list[str], out: TextIO, err: TextIO,
             given: ServerConfig | None) -> int:
    if args.url or args.server or command:
        raise _UsageError("servers lists a config file: give --config FILE or nothing (not --url, --server or --)")
    if args.config is not None:
        config = load_config(args.config)
    elif given is not None:
        config = given
    else:
        path = find_config()
        err.write(f"mcp-sync: using {path}\n")
        config = load_config(path)
    described = [_describe(config, name) for name in config]
    # An entry of the wrong shape is listed with what is wrong with it
    # (its message without the file and server it begins with).
    unusable = {name: why.split(f"server {name!r}", 1)[-1].lstrip(": ") for name, why in config.unusable.items()}
    if args.json:
        _dump(described + [{"name": name, "unusable": why} for name, why in sorted(unusable.items())]
              + [{"name": name, "disabled": True} for name in sorted(config.disabled)], out)
        return 0
    rows = []
    for info in described:
        where = shlex.join([info["command"], *info["args"]]) if info["type"] == "stdio" else info["url"]
        secrets = [f"{key}: {', '.join(info[key])}" for key in ("env", "headers") if key in info]
        rows.append((info["name"], info["type"], where + (f"  ({'; '.join(secrets)})" if secrets else "")))
    rows += [(name, "-", f"(unusable: {why})") for name, why in sorted(unusable.items())]
    rows += [(name, "-", "(disabled)") for name in sorted(config.disabled)]
    if not rows:
        out.write("(no servers)\n")
        return 0
    widths = [max(len(row[i]) for row in rows) for i in (0, 1)]
    for name, kind, where in rows:
        out.write(f"{name.ljust(widths[0])}  {kind.ljust(widths[1])}  {where}".rstrip() + "\n")
    return 0


@contextlib.contextmanager
def _verbose(on: bool, err: TextIO) -> Iterator[None]:
    """With -v, the library's logs on stderr: its debug logs and each line a
    stdio server writes to its stderr (the `mcp_sync.server.stderr` logger)."""
    if not on:
        yield
        return
    logger = logging.getLogger("mcp_sync")
    handler = logging.StreamHandler(err)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def main(argv: Sequence[str] | None = None, *, stdout: TextIO | None = None, stderr: TextIO | None = None,
         connect_fn: Callable[..., Client] = connect, config: ServerConfig | None = None) -> int:
    """Run the CLI; returns the exit status.

    `config` (from `load_config()`, which also takes an `mcpServers`
    mapping) stands for a config file: `--server NAME` names one of its
    servers, `servers` lists it, and with one server and no other target
    that server is used. `--config FILE`, `--url` and `-- command` on the
    command line still win.

    Example::

        status = main(["call", "add", "a=2", "b=3"])  # prints 5, returns 0
        main(["tools", "--server", "calc"], config=load_config({"mcpServers": servers}))
    """
    try:
        return _main(argv, stdout, stderr, connect_fn, config)
    except BrokenPipeError:
        # Stdout closed where the command's own handling does not reach
        # (--help, a completion script, the completion helper's names).
        if stdout is None:
            _quiet_stdout()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        # A Ctrl-C where the command's own handling does not reach (parsing
        # the line, printing the help): the same quiet 130, never a
        # traceback. (Before `main()` runs, in `import mcp_sync`, it is the
        # interpreter's to report.)
        _say_interrupted(stderr)
        return EXIT_INTERRUPTED
    finally:
        # Run as the `mcp-sync` command (nothing given, the program's name
        # the command's), it has done its work and said everything: a
        # Ctrl-C from now on, while the interpreter shuts its threads down,
        # ends the process quietly by the signal, as a shell expects
        # (Python 3.10 would report it as "Exception ignored ...
        # KeyboardInterrupt", with a traceback). Never for a program that
        # calls `main()` itself, whose own handling of Ctrl-C must stay.
        # Only on the main thread, only over Python's own handler; written
        # out here, with no call of ours, so no interrupt lands between.
        if (argv is None and stdout is None and stderr is None
                and os.path.basename(sys.argv[0] if sys.argv else "") == "mcp-sync"
                and threading.current_thread() is threading.main_thread()
                and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
            signal.signal(signal.SIGINT, signal.SIG_DFL)


class _Closed:
    """A standard stream closed before the command began (`>&-`: Python
    makes it None). Stdout's writes fail as a closed pipe's do (status
    141, nothing printed); stderr's are dropped, with nowhere to go, so
    that the status is still the one the error has."""

    def __init__(self, *, stdout: bool) -> None:
        self.stdout = stdout

    def write(self, text: str) -> int:
        if self.stdout:
            raise BrokenPipeError(32, "standard output is closed")
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def _main(argv: Sequence[str] | None, stdout: TextIO | None, stderr: TextIO | None,
          connect_fn: Callable[..., Client], config: ServerConfig | None) -> int:
    # Everything printed may hold a server's text (results, descriptions,
    # error messages, form prompts, an authorization URL, its stderr).
    out = cast(TextIO, _Neutralised(stdout or sys.stdout or cast(TextIO, _Closed(stdout=True))))
    err = cast(TextIO, _Neutralised(stderr or sys.stderr or cast(TextIO, _Closed(stdout=False))))
    argv = list(sys.argv[1:] if argv is None else argv)
    command: list[str] = []
    if "--" in argv:
        split = argv.index("--")
        argv, command = argv[:split], argv[split + 1:]
    # With --json a usage error is JSON too: argparse's words are caught and
    # said as the other errors are.
    caught = io.StringIO() if "--json" in argv else None
    try:
        # argparse prints usage, errors and help on sys.stdout and sys.stderr:
        # the streams given here instead.
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(caught or err):
            parser = _build_parser()
            parser.expect(argv, command)
            args = _parse(parser, argv)
    except SystemExit as exc:
        said = caught.getvalue() if caught is not None else ""
        if said and exc.code == EXIT_USAGE:
            return _failed(_UsageError(said.rstrip("\n").rpartition("\n")[2].partition(": error: ")[2]),
                           EXIT_USAGE, True, err)
        err.write(said)
        return int(exc.code or 0)
    if args.command == "completion":
        out.write(cli_completion.SCRIPTS[args.shell](_build_parser()))
        return 0
    if args.command == COMPLETE_TOOLS:
        return _complete_tools(args.line, args.point, connect_fn, out)
    try:
        with _verbose(args.verbose, err):
            if args.command == "servers":
                return _servers(args, command, out, err, config)
            if connect_fn is connect and _uses_demo(args, command, config):
                _server_given_as_name(args)
            if args.command == "prompt":
                _parse_pairs_shape(args.arguments, "prompt", args.name)
                args.parsed_arguments = _arguments(args, sys.stdin)
            elif args.command == "call" and args.args is not None:
                # Read before connecting: bad JSON or a file that cannot be read is a usage error.
                args.args = json.dumps(_load_args(args.args, sys.stdin))
            if args.command == "call":
                _parse_pairs_shape(args.arguments, "call", args.tool)
            if args.command in ("tools", "prompts") and args.name is not None and "=" in args.name:
                raise _UsageError(f"unrecognized arguments: {args.name} "
                                  f"({args.command} takes a {args.command[:-1]}'s name at most)")
            target, options = _target(args, command, err, config)
            handlers = _input_handlers(args.answer, err)
            # Reconnecting waits for a request that needs it: every command
            # is over once its requests are, so a server that dies under the
            # last one is not started again (nor its attempt logged) while
            # the command exits.
            if args.timeout is not None and args.timeout < DEFAULT_PROBE_TIMEOUT:
                # The server/discover probe is a request too: with the
                # library's 10 s, `--timeout 1` waited 11 s for a server
                # that answers nothing.
                options["probe_timeout"] = args.timeout
            with connect_fn(target, timeout=args.timeout, protocol=args.protocol, input_handlers=handlers,
                            reconnect=Reconnect(eager=False), **options) as client:
                # Each request waits as long as the client was made to: a
                # `connect_fn` may have its own timeout (an integration's settings).
                args.timeout = client.options.timeouts.request
                try:
                    return _run(client, args, out, err)
                except MissingClientCapability as exc:
                    # (this command's own error: amended in place)
                    if _wants_url_elicitation(exc):
                        exc.args = (f"{exc}; the server asks you to open a page (URL-mode elicitation): "
                                    "mcp-sync does not open URL-mode elicitations, whatever --answer says; "
                                    "use an MCP host that does",)
                    elif not handlers and "elicitation" in f"{exc} {exc.required_capabilities}":
                        exc.args = (f"{exc}; {_no_forms(args.answer)}",)
                    raise
    except BrokenPipeError:
        # The reader went away (`mcp-sync tools | head -1`): nothing to say
        # to anyone, and nothing more to write at exit either.
        if stdout is None:  # the process's own stdout, not a stream handed in
            _quiet_stdout()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        _say_interrupted(err)
        return EXIT_INTERRUPTED
    except ConfigError as exc:
        # The command line was fine; the file (or the environment it names) is not.
        return _failed(exc, EXIT_ERROR, args.json, err)
    except (_UsageError, ValueError, TypeError) as exc:
        # What was given cannot work, whatever the server says (a URL
        # without a scheme, a pair without "=").
        return _failed(exc, EXIT_USAGE, args.json, err)
    except (_NotFound, McpError, OSError) as exc:
        if isinstance(exc, RequestTimeout):
            _timeout_for_the_command(exc)
        elif isinstance(exc, VersionNegotiationError):
            _protocol_for_the_command(exc)
        if isinstance(exc, McpError):
            _stderr_cut_short(exc, shown=args.verbose)
        return _failed(exc, EXIT_ERROR, args.json, err)


#: The library's advice on a timeout, for Python code (`timeout=`,
#: `connect(timeout=...)`): the command's is `--timeout`.
_PYTHON_TIMEOUT_ADVICE = re.compile(r": pass a larger timeout=.*$", re.DOTALL)
#: The start-up timeout names connect()'s `probe_timeout`, which the command
#: sets from `--timeout` (`within probe_timeout (1 s)` -> `within 1 s`).
_PROBE_TIMEOUT_NAMED = re.compile(r"within probe_timeout \(([^)]*)\)")


def _timeout_for_the_command(exc: RequestTimeout) -> None:
    """Amend a timeout (the error is this command's own: in place) to
    name the option that sets it, `--timeout`, instead of the library's
    Python arguments."""
    text = str(exc.args[0]) if exc.args else str(exc)
    text = _PYTHON_TIMEOUT_ADVICE.sub("", text)
    text = _PROBE_TIMEOUT_NAMED.sub(r"within \1", text).removesuffix(" (timeout)")
    exc.args = (f"{text}: give a larger --timeout SECONDS (seconds per request)",)


#: The library's advice on protocol versions, in `connect()`'s words, and
#: the command's: `protocol=None` is leaving `--protocol` out.
_PYTHON_PROTOCOL_ADVICE = (
    (re.compile(r"protocol=None negotiates"), "without --protocol it negotiates"),
    (re.compile(r"protocol=None to negotiate any"), "leave out --protocol to negotiate any"),
    (re.compile(r"\bpin '([^']+)' or older"), r"--protocol \1 or older"),
    (re.compile(r"\bprotocol='([^']+)'"), r"--protocol \1"),
)


def _protocol_for_the_command(exc: VersionNegotiationError) -> None:
    """Amend a version negotiation failure (the error is this command's
    own: in place) to name `--protocol` where the library names
    `connect(protocol=...)`."""
    text = str(exc.args[0]) if exc.args else str(exc)
    for pattern, said in _PYTHON_PROTOCOL_ADVICE:
        text = pattern.sub(said, text)
    exc.args = (text,)


#: How the library heads the server's last stderr lines, after its first
#: line (which holds the last of them).
_STDERR_LINES = "; last stderr lines:\n"


def _stderr_cut_short(exc: McpError, *, shown: bool) -> None:
    """Amend an error that ends with the server's last stderr lines (the
    error is this command's own: in place) to its first line, which holds
    the last of them, saying that `-v` shows the others when there were
    more and they were not `shown` already: the last line is often no
    cause (npx ends with "A complete log of this run can be found in:
    ..."). Whether the request had been sent is kept: the library says it
    after the lines."""
    text = str(exc.args[0]) if exc.args else str(exc)
    first, found, lines = text.partition(_STDERR_LINES)
    if not found:
        return
    if len(lines.splitlines()) > 1 and not shown:
        first += "; mcp-sync -v shows the server's stderr, of which this is the last line"
    # The note the library puts after the last stderr line, lost with them.
    if getattr(exc, "may_have_executed", None) is True:
        first += " (the request had been sent: it may have run on the server; it is not sent again)"
    exc.args = (first,)


def _wants_url_elicitation(exc: MissingClientCapability) -> bool:
    """Whether the server refused for want of URL-mode elicitation only
    (`elicitation.url`: a page to open), which no `--answer` provides."""
    required = exc.required_capabilities
    if isinstance(required, Mapping):
        wanted = required.get("elicitation")
        return isinstance(wanted, Mapping) and bool(wanted) and set(wanted) <= {"url"} and len(required) == 1
    text = str(exc)
    return "elicitation.url" in text and "elicitation.form" not in text


def _failed(exc: BaseException, status: int, as_json: bool, err: TextIO) -> int:
    """One line on stderr for an error; with --json, one JSON object
    (`error`, `type`, `status`) a program can read."""
    text = _first_line(exc)
    if as_json:
        # JSON's own escapes for DEL and the C1 controls: the stream's
        # visible `\x7f` is no JSON escape, and the line must parse.
        err.write(json.dumps({"error": text, "type": type(exc).__name__.lstrip("_"), "status": status},
                             ensure_ascii=False).translate(JSON_ESCAPED) + "\n")
    else:
        _put(err, "mcp-sync: error:", "error")
        err.write(f" {text}\n")
    return status


def _say_interrupted(stream: TextIO | None) -> None:
    """Say that the command was interrupted, on `stream` (None: the
    process's stderr), if it can be said: a closed or broken stderr is no
    reason for a traceback."""
    try:
        (stream or sys.stderr or cast(TextIO, _Closed(stdout=False))).write("mcp-sync: interrupted\n")
    except (OSError, ValueError):
        pass


def _quiet_stdout() -> None:
    """Point the process's stdout at /dev/null, so that the interpreter's
    flush at exit does not fail on the closed pipe again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # not a real file (a test's StringIO), or None (closed at start)
        pass


def _first_line(exc: BaseException) -> str:
    """The error on one line: its first, without the heading of the stderr
    lines that follow it (the last of them is in the line already)."""
    text = str(exc)
    if not text:
        return type(exc).__name__
    # At a newline only: str.splitlines() also cuts at NEL (\x85), U+2028
    # and other separators a server's text may hold mid-line.
    first = text.split("\n", 1)[0].removesuffix("\r")
    return first.removesuffix("; last stderr lines:")


# -- shell completion ------------------------------------------------------------------------
#
# The scripts are made in `cli_completion`; only a tool name is completed by
# running the command: `__complete_tools` connects with the line's own
# server options and a short timeout, and prints the tool names, or nothing
# on any failure.

#: How long completing tool names may take, at most: a Tab must not hang.
_COMPLETION_TIMEOUT = 3.0


def _complete_tools(line: str, point: str, connect_fn: Callable[..., Client], out: TextIO) -> int:
    """`__complete_tools LINE POINT`: the tool names (the prompt names, for
    `prompt` and `prompts`) of the server the line names (its options and
    `-- program`), one a line; nothing on any failure
    (a Tab must never print an error), within `_COMPLETION_TIMEOUT`, and
    without asking anyone anything (no forms, no OAuth in a browser)."""
    try:
        words = cli_completion.line_words(line, int(point))
        if words is None:
            return 0
        before, tail = words
        argv = [*before, "_", *tail]  # "_" stands for the tool name being typed
        command: list[str] = []
        if "--" in argv:
            split = argv.index("--")
            argv, command = argv[:split], argv[split + 1:]
        quiet = io.StringIO()
        with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
            args = _parse(_build_parser(), argv)
        if args.command not in TOOL_COMMANDS + PROMPT_COMMANDS or args.oauth:
            return 0
        target, options = _target(args, command, cast(TextIO, quiet), None)
        # The Tab's time in thirds, for a server that answers nothing: the
        # probe, `initialize` after it, and a program's time to exit once
        # told (the listing gets what is left of the whole).
        budget = _COMPLETION_TIMEOUT if args.timeout is None else min(args.timeout, _COMPLETION_TIMEOUT)
        deadline = deadline_in(budget)
        if isinstance(target, list):
            target = Stdio(target[0], target[1:], shutdown_timeout=budget / 3)
        with connect_fn(target, timeout=budget / 3, probe_timeout=budget / 3, protocol=args.protocol,
                        **options) as client:
            listing = client.list_prompts if args.command in PROMPT_COMMANDS else client.list_tools
            names = [each.name for each in listing(timeout=remaining(deadline, at_least=0.01))]
    except (Exception, SystemExit):
        return 0  # whatever went wrong: complete nothing
    for name in names:
        out.write(name + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
