"""`manage.py mcp COMMAND ...`: the `mcp-sync` command line, against the
servers of the settings.

    python manage.py mcp servers                       # what the settings configure
    python manage.py mcp tools --server weather        # --server: a server of the settings
    python manage.py mcp call forecast city=Paris --server weather --json

`--server NAME` names a server of `MCP_SERVERS` (or of `MCP_CONFIG`); it may
be left out when only one is configured. `MCP_CLIENT_OPTIONS` apply, under
the command line's own options (`--timeout`, `--protocol`). With `--url`,
`--config` or `-- program args` the command line is the plain `mcp-sync`
one. Options go after COMMAND. The exit status is the CLI's: 0, 1 (an
error), 2 (a wrong command line).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any, TextIO, cast

from django.core.management.base import BaseCommand  # type: ignore[import-untyped,unused-ignore]

from ..... import cli
from .....client import Client, connect
from .....config import ServerConfig, with_options
from .....errors import ConfigError
from .....transports import Target, _http_options

#: The options that name a target of their own: the plain CLI then.
_OWN_TARGET = ("--url", "--config")


class _Out:
    """A Django `OutputWrapper` as the text stream the CLI writes to: what
    is written goes out as it is (the wrapper would end each write with a
    newline)."""

    def __init__(self, wrapper: Any) -> None:
        self._wrapper = wrapper

    def write(self, text: str) -> int:
        self._wrapper.write(text, ending="")
        return len(text)

    def flush(self) -> None:
        self._wrapper.flush()

    def isatty(self) -> bool:
        return bool(self._wrapper.isatty())


class _WithOptions(ServerConfig):
    """A config whose targets carry the settings' HTTP options: the config
    `MCP_SERVERS` (or `MCP_CONFIG`) describes, as `get_client()` sees it."""

    def __init__(self, config: ServerConfig, options: dict[str, Any]) -> None:
        super().__init__(config.entries, path=config.path, disabled=config.disabled, unusable=config.unusable)
        self._options = options

    def __getitem__(self, name: str) -> Target:
        return with_options(super().__getitem__(name), self._options)[0]


class Command(BaseCommand):  # type: ignore[misc,unused-ignore]  # Django ships no type stubs
    """`manage.py mcp`: `mcp-sync` with the servers of the settings.

    Example::

        python manage.py mcp call echo text=hi --server demo
    """

    help = ("Talk to a configured MCP server with the mcp-sync command line: "
            "mcp servers | tools [NAME] | call TOOL key=value ... | resources | read URI | prompts | discover; "
            "--server NAME picks a server of settings.MCP_SERVERS (or MCP_CONFIG).")

    def add_arguments(self, parser: Any) -> None:
        """Everything after `mcp` goes to the command line as it is."""
        parser.add_argument("cli_args", nargs=argparse.REMAINDER, metavar="COMMAND ...",
                            help="an mcp-sync command and its arguments (mcp-sync --help)")

    def handle(self, *args: Any, **options: Any) -> None:
        """Run the command line; a status other than 0 leaves with `SystemExit`."""
        status = run([*options["cli_args"], *args], stdout=cast(TextIO, _Out(self.stdout)),
                     stderr=cast(TextIO, _Out(self.stderr)))
        if status:
            raise SystemExit(status)


def run(argv: Sequence[str], *, stdout: TextIO, stderr: TextIO) -> int:
    """`mcp-sync argv` with the settings' servers.

    Args:
        argv: The command line after `mcp` (`["tools", "--server", "files"]`).
        stdout: Where results go.
        stderr: Where errors and diagnostics go.

    Returns:
        The exit status: 0, 1 (an error, a config that cannot be read), 2
        (a command line that cannot work, such as no `--server` among several).

    It raises nothing: errors are printed on `stderr` and counted in the
    status.

    Example::

        status = run(["call", "echo", "text=hi", "--server", "demo"], stdout=sys.stdout, stderr=sys.stderr)
    """
    from ... import _registry

    own = list(argv[:argv.index("--")] if "--" in argv else argv)
    if "--" in argv or any(arg.split("=", 1)[0] in _OWN_TARGET for arg in own):
        return cli.main(list(argv), stdout=stdout, stderr=stderr)
    try:
        config, options = _registry.settings()
    except (ConfigError, TypeError, ValueError) as exc:
        stderr.write(f"manage.py mcp: error: {exc}\n")
        return cli.EXIT_ERROR

    # The command line's --timeout and --protocol, when typed, win over the
    # settings' options; the CLI's default timeout does not.
    typed = {name for name in ("timeout", "protocol")
             if any(arg == f"--{name}" or arg.startswith(f"--{name}=") for arg in own)}

    # The settings' HTTP options (`headers`, `verify`, ...) go onto each URL
    # server's target as the CLI takes it from the config, and are left out
    # for a program, as `get_client()` does. Put there, under the CLI's
    # `--header`, which the CLI applies over that target: headers by
    # precedence are the entry's, then the settings', then the typed ones
    # (a name matched case-insensitively). Applied at connect time instead,
    # the settings' would replace the typed ones.
    configured = _WithOptions(config, options)
    rest = {key: value for key, value in options.items() if key not in _http_options()}

    def connect_configured(target: Any, **given: Any) -> Client:
        chosen = {key: value for key, value in given.items()
                  if value is not None and (key in typed or key not in rest)}
        return connect(target, **{**rest, **chosen})

    return cli.main(list(argv), stdout=stdout, stderr=stderr, connect_fn=connect_configured,
                    config=configured)
