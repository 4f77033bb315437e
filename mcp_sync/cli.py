"""The `mcp-sync` command: talk to an MCP server from a shell.

    mcp-sync tools                              # the bundled demo server
    mcp-sync call countdown steps=5             # with a progress bar on stderr
    mcp-sync --json call add a=2 b=3 -- python my_server.py

It holds no logic the library lacks: it parses arguments, calls `Client`,
and prints. Errors print one line to stderr and exit non-zero.

Whatever a server sends is printed with its control characters shown as
escapes (`\\x1b`), not sent to the terminal: a server's text must not set
the window title, clear the screen or overwrite what was printed. Only
newlines and tabs pass through.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Callable, Sequence, TextIO, cast

from . import connect
from .client import Client
from .errors import McpError
from .handlers import console_form, defaults_form
from .types import CallToolResult, Progress, TextContent, WireModel

EXIT_ERROR = 1
EXIT_USAGE = 2

#: C0 controls but tab and newline, DEL, and the C1 controls (0x9b is a CSI
#: on many terminals), each to its visible escape.
_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0))}
#: The same characters in JSON output, as JSON escapes (the value is unchanged).
_JSON_CONTROLS = {c: f"\\u{c:04x}" for c in _CONTROLS}


def neutralise(text: str) -> str:
    r"""`text` with terminal control characters made visible; newlines and
    tabs are kept, and CRLF line ends become plain newlines.

    Example::

        >>> neutralise("\x1b[2Jhello\r\n")
        '\\x1b[2Jhello\n'
    """
    return text.replace("\r\n", "\n").translate(_CONTROLS)


class _Neutralised:
    """A text stream that neutralises control characters in what is written."""

    def __init__(self, stream: TextIO) -> None:
        self.raw = stream

    def write(self, text: str) -> int:
        return self.raw.write(neutralise(text))

    def flush(self) -> None:
        self.raw.flush()

    def isatty(self) -> bool:
        return self.raw.isatty()


def _parse_pairs(pairs: Sequence[str]) -> dict[str, Any]:
    """`key=value` pairs; a value that parses as JSON is taken as JSON."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"expected key=value, got {pair!r}")
        try:
            out[key] = json.loads(value)
        except ValueError:
            out[key] = value
    return out


class ProgressBar:
    """A one-line progress bar on a stream; redrawn in place on a terminal."""

    def __init__(self, stream: TextIO, width: int = 30) -> None:
        # The bar draws with escapes of its own: it writes to the terminal
        # itself, and neutralises the server's message.
        self.stream = stream.raw if isinstance(stream, _Neutralised) else stream
        self.width = width
        self.tty = stream.isatty()
        self.drawn = False

    def __call__(self, progress: Progress) -> None:
        fraction = progress.fraction
        if fraction is not None:
            filled = int(round(fraction * self.width))
            bar = "[" + "#" * filled + "." * (self.width - filled) + "]"
            count = f"{progress.progress:g}/{progress.total:g}"
        else:
            bar, count = "[" + "?" * self.width + "]", f"{progress.progress:g}"
        line = neutralise(f"{bar} {count}" + (f" {progress.message}" if progress.message else ""))
        if self.tty:
            self.stream.write("\r\x1b[2K" + line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()
        self.drawn = True

    def finish(self) -> None:
        if self.drawn and self.tty:
            self.stream.write("\n")
            self.stream.flush()


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mcp-sync",
        description="Talk to an MCP server. Without a target, uses the bundled demo server.",
        epilog="Target a server program with: mcp-sync [options] COMMAND ... -- program args...",
    )
    parser.add_argument("--url", help="a Streamable HTTP server URL (a bearer token may come from $MCP_SYNC_TOKEN)")
    parser.add_argument("--oauth", action="store_true",
                        help="with --url: authorize with OAuth in your browser when the server asks")
    parser.add_argument("--no-browser", action="store_true",
                        help="with --oauth: print the authorization URL and ask for the address you end on")
    parser.add_argument("--token-file", metavar="PATH",
                        help="with --oauth: where tokens are kept (default: "
                             "$XDG_CONFIG_HOME/mcp-sync/tokens.json or ~/.config/mcp-sync/tokens.json)")
    parser.add_argument("--json", action="store_true", help="print raw JSON results")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per request (default 30)")
    parser.add_argument("--protocol", action="append", help="allow only this protocol version (repeatable)")
    parser.add_argument("--answer", choices=("ask", "defaults", "none"), default=None,
                        help="how to answer a server's forms: ask on the terminal (the default when "
                             "stdin is one), accept the defaults, or not at all")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("discover", help="show the server's identity, versions and capabilities")
    sub.add_parser("tools", help="list the tools")
    call = sub.add_parser("call", help="call a tool: call TOOL key=value ...")
    call.add_argument("tool")
    call.add_argument("arguments", nargs="*", metavar="key=value")
    sub.add_parser("resources", help="list the resources and resource templates")
    read = sub.add_parser("read", help="read a resource: read URI")
    read.add_argument("uri")
    sub.add_parser("prompts", help="list the prompts")
    prompt = sub.add_parser("prompt", help="render a prompt: prompt NAME key=value ...")
    prompt.add_argument("name")
    prompt.add_argument("arguments", nargs="*", metavar="key=value")
    return parser


def _dump(value: Any, out: TextIO) -> None:
    if isinstance(value, WireModel):
        value = value.to_wire()
    elif isinstance(value, list):
        value = [v.to_wire() if isinstance(v, WireModel) else v for v in value]
    out.write(_json_text(value) + "\n")


def _json_text(value: Any) -> str:
    # json.dumps escapes C0 controls itself, but not DEL and C1 ones.
    return json.dumps(value, indent=2, ensure_ascii=False).translate(_JSON_CONTROLS)


def _table(rows: Sequence[tuple[str, str]], out: TextIO, empty: str) -> None:
    if not rows:
        out.write(empty + "\n")
        return
    width = max(len(name) for name, _ in rows)
    for name, text in rows:
        first = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
        out.write(f"{name.ljust(width)}  {first}".rstrip() + "\n")


def _print_call_result(result: CallToolResult, out: TextIO, err: TextIO) -> int:
    target = err if result.is_error else out
    printed = False
    for block in result.content:
        if isinstance(block, TextContent):
            target.write(block.text + "\n")
        else:
            target.write(f"<{block.type} content>\n")
        printed = True
    if not printed and result.structured_content is not None:
        target.write(_json_text(result.structured_content) + "\n")
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
        tools = client.list_tools(timeout=args.timeout)
        if as_json:
            _dump(tools, out)
        else:
            _table([(t.name, t.description or "") for t in tools], out, "(no tools)")
        return 0
    if args.command == "call":
        client.list_tools(timeout=args.timeout)  # so the result is checked against the tool's outputSchema
        bar = ProgressBar(err)
        try:
            result = client.call_tool(args.tool, _parse_pairs(args.arguments), timeout=args.timeout, progress=bar)
        finally:
            bar.finish()
        if as_json:
            _dump(result, out)
            return EXIT_ERROR if result.is_error else 0
        return _print_call_result(result, out, err)
    if args.command == "resources":
        resources = client.list_resources(timeout=args.timeout)
        templates = client.list_resource_templates(timeout=args.timeout)
        if as_json:
            _dump({"resources": [r.to_wire() for r in resources],
                   "resourceTemplates": [t.to_wire() for t in templates]}, out)
            return 0
        _table([(r.uri, r.description or r.name or "") for r in resources], out, "(no resources)")
        if templates:
            out.write("\ntemplates:\n")
            _table([(t.uri_template, t.description or t.name or "") for t in templates], out, "")
        return 0
    if args.command == "read":
        read = client.read_resource(args.uri, timeout=args.timeout)
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
        prompts = client.list_prompts(timeout=args.timeout)
        if as_json:
            _dump(prompts, out)
        else:
            _table([(p.name, p.description or "") for p in prompts], out, "(no prompts)")
        return 0
    if args.command == "prompt":
        arguments = {k: v if isinstance(v, str) else json.dumps(v) for k, v in _parse_pairs(args.arguments).items()}
        rendered = client.get_prompt(args.name, arguments, timeout=args.timeout)
        if as_json:
            _dump(rendered, out)
            return 0
        for message in rendered.messages:
            content = message.content
            text = content.text if isinstance(content, TextContent) else f"<{getattr(content, 'type', '?')} content>"
            out.write(f"{message.role}: {text}\n")
        return 0
    raise AssertionError(args.command)  # argparse only allows the commands above


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
    return os.environ.get("MCP_SYNC_TOKEN") or None


def main(argv: Sequence[str] | None = None, *, stdout: TextIO | None = None, stderr: TextIO | None = None,
         connect_fn: Callable[..., Client] = connect) -> int:
    """Run the CLI; returns the exit status."""
    # Everything printed may hold a server's text (results, descriptions,
    # error messages, form prompts, an authorization URL).
    out = cast(TextIO, _Neutralised(stdout or sys.stdout))
    err = cast(TextIO, _Neutralised(stderr or sys.stderr))
    argv = list(sys.argv[1:] if argv is None else argv)
    command: list[str] = []
    if "--" in argv:
        split = argv.index("--")
        argv, command = argv[:split], argv[split + 1:]
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    if args.url and command:
        err.write("mcp-sync: error: give either --url or -- command, not both\n")
        return EXIT_USAGE
    if (args.oauth or args.no_browser or args.token_file) and not args.url:
        err.write("mcp-sync: error: --oauth, --no-browser and --token-file go with --url\n")
        return EXIT_USAGE
    if (args.no_browser or args.token_file) and not args.oauth:
        err.write("mcp-sync: error: --no-browser and --token-file go with --oauth\n")
        return EXIT_USAGE
    target: Any
    if args.url:
        target = args.url
    elif command:
        target = command
    else:
        target = [sys.executable, "-m", "mcp_sync.testing.server"]
    handlers = _input_handlers(args.answer, err)
    options: dict[str, Any] = {}
    if args.url:
        auth = _auth(args, err)
        if auth is not None:
            options["auth"] = auth
    try:
        with connect_fn(target, timeout=args.timeout, protocol=args.protocol, input_handlers=handlers,
                        **options) as client:
            return _run(client, args, out, err)
    except ValueError as exc:
        err.write(f"mcp-sync: error: {exc}\n")
        return EXIT_USAGE
    except (McpError, TypeError, OSError) as exc:
        first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        err.write(f"mcp-sync: error: {first_line}\n")
        return EXIT_ERROR
    except KeyboardInterrupt:
        err.write("mcp-sync: interrupted\n")
        return 130


if __name__ == "__main__":
    sys.exit(main())
