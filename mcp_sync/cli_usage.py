"""What a mistyped `mcp-sync` command line meant, said in its usage error.

The usual first mistakes are a misspelt command (`mcp-sync tolls`), a
server program or URL put where the command goes (`mcp-sync ./server.py
tools`, `mcp-sync -- npx -y some-server tools`), and a tool called without
`call` (`mcp-sync echo text=hi`): argparse says "invalid choice" and lists
every command (the hidden completion one too), or that the command is
missing, without the line that would work. `CommandLineParser` says it
instead; everything else is argparse's own.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
from collections.abc import Sequence
from typing import Any, NoReturn

from .options import close_names

#: Launchers a server program is usually started with: a program whatever
#: PATH holds on this machine.
_LAUNCHERS = frozenset({"python", "python3", "node", "npx", "uv", "uvx", "pipx", "docker", "podman", "deno",
                        "bun", "bunx", "java"})
#: Files that are server programs, or scripts of one.
_SCRIPT_SUFFIXES = (".py", ".js", ".mjs", ".cjs", ".ts", ".sh", ".exe", ".bat", ".cmd", ".jar")
#: argparse's words for an unknown command (the same from 3.10 to 3.13; the
#: value is the `repr` of what was typed).
_INVALID_COMMAND = re.compile(r"argument COMMAND: invalid choice: ('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")")
_REQUIRED = "the following arguments are required: "
_MISSING_COMMAND = _REQUIRED + "COMMAND"
#: The options that choose the server (the CLI takes one of them or a
#: program after `--`): a line that puts a program or URL where it goes
#: leaves them out.
_SERVER_CHOICES = ("--url", "--server", "--config")


def is_url(word: str) -> bool:
    """Whether `word` is an `http://` or `https://` URL (any case)."""
    return word.lower().startswith(("http://", "https://"))


def looks_like_program(word: str) -> bool:
    """Whether `word` reads as a server program whatever this machine has:
    a path, a script or a usual launcher (a URL is none of them). A bare
    word on PATH (`echo`, `cal`) may as well be a tool or a misspelt
    command, so PATH is not asked here.

        >>> looks_like_program("./server.py"), looks_like_program("npx"), looks_like_program("echo")
        (True, True, False)
    """
    if "://" in word:  # (a URL)
        return False
    return "/" in word or os.sep in word or word.endswith(_SCRIPT_SUFFIXES) or word in _LAUNCHERS


def where_it_goes(words: Sequence[str], options: Sequence[str], commands: Sequence[str]) -> str:
    """What a server program or URL put first is told: the command line
    that uses `words` (the program and its arguments, or a URL, then maybe
    the command meant and its arguments) as the server, with `options`
    (those typed before it) after the command. The first command name in
    `words` after the program and what follows it go first; else `tools`,
    as an example. An option that chose a server already (`--url`,
    `--server`, `--config`) is left out, and the line says so.

        >>> where_it_goes(["npx", "-y", "srv", "call", "add", "a=1"], ["--json"], ["tools", "call"])
        'a server program goes last, after --: mcp-sync call add a=1 --json -- npx -y srv'
        >>> where_it_goes(["http://127.0.0.1:8000/mcp", "tools"], [], ["tools", "call"])
        'a server URL goes with --url: mcp-sync tools --url http://127.0.0.1:8000/mcp'
    """
    at = next((i for i in range(1, len(words)) if words[i] in commands), len(words))
    command = list(words[at:]) or ["tools"]
    kept, dropped = _without_server_choices(options)
    left_out = f" ({shlex.join(dropped)} was left out: one server at a time)" if dropped else ""
    if is_url(words[0]):
        line = shlex.join(["mcp-sync", *command, *kept, "--url", words[0]])
        return f"a server URL goes with --url: {line}{left_out}"
    line = shlex.join(["mcp-sync", *command, *kept, "--", *words[:at]])
    return f"a server program goes last, after --: {line}{left_out}"


def _without_server_choices(options: Sequence[str]) -> tuple[list[str], list[str]]:
    """`options` split into those kept and the server choices (with their
    values) left out."""
    kept: list[str] = []
    dropped: list[str] = []
    words = iter(options)
    for word in words:
        if word in _SERVER_CHOICES:
            dropped += [word, next(words, "")]
        elif word.startswith(tuple(choice + "=" for choice in _SERVER_CHOICES)):
            dropped.append(word)
        else:
            kept.append(word)
    return kept, [word for word in dropped if word]


class CommandLineParser(argparse.ArgumentParser):
    """argparse's parser, whose errors about the command say what to type
    instead (see the module's docstring). The top-level parser is given
    its `commands` once built, and the line (`expect`) before parsing it.

    Attributes:
        commands (list[str]): The command names a user may type (the
            hidden ones left out); empty on a subcommand's parser.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands: list[str] = []
        self._argv: list[str] = []
        self._after_dashes: list[str] = []

    def expect(self, argv: Sequence[str], after_dashes: Sequence[str]) -> None:
        """The line about to be parsed: `argv` (the words before `--`) and
        `after_dashes` (a server program and its arguments).

        Args:
            argv: The words before `--`.
            after_dashes: The words after it.
        """
        self._argv = list(argv)
        self._after_dashes = list(after_dashes)

    def error(self, message: str) -> NoReturn:
        """Print the usage and `message`, or a better one, and exit with 2."""
        super().error(self._better(message))

    def _better(self, message: str) -> str:
        commands = self.commands
        if not commands:  # a subcommand's parser
            return self._only_required(message)
        if message == _MISSING_COMMAND:
            words = self._after_dashes
            if words and any(word in commands for word in words[1:]):
                said = where_it_goes(words, self._argv, commands)
                if is_url(words[0]):
                    return f"the command goes first, and {said}"
                return f"the command goes before --, the server program after it: {said.partition(': ')[2]}"
            return message
        found = _INVALID_COMMAND.search(message)
        if found is None:
            return message
        import ast

        typed = ast.literal_eval(found.group(1))
        at = self._command_index()
        if at is None or self._argv[at] != typed:
            return message
        rest = self._argv[at + 1:] + self._after_dashes  # (a `--` after the program: its words are the program's too)
        if looks_like_program(typed) or is_url(typed):
            return f"unknown command {typed!r}: {where_it_goes([typed, *rest], self._argv[:at], commands)}"
        close = close_names(typed, commands, cutoff=0.6)
        if close:
            return f"unknown command {typed!r}; did you mean {close[0]!r}? (mcp-sync --help lists the commands)"
        if rest and all("=" in word and not word.startswith(("-", "=")) for word in rest):
            # Pairs after it: a tool called without `call`.
            line = shlex.join(["mcp-sync", *self._argv[:at], "call", typed, *rest])
            return f"unknown command {typed!r}; to call the tool {typed!r}: {line}"
        if any(word in commands for word in rest) and shutil.which(typed) is not None:
            # A program on PATH, with the command after it.
            return f"unknown command {typed!r}: {where_it_goes([typed, *rest], self._argv[:at], commands)}"
        return f"unknown command {typed!r} (mcp-sync --help lists the commands)"

    def _command_index(self) -> int | None:
        """Where in the line the command was: the first word that is
        neither an option nor an option's value (None: no such word)."""
        words = self._argv
        at = 0
        while at < len(words):
            word = words[at]
            if not word.startswith("-") or word == "-":
                return at
            action = self._option_string_actions.get(word)
            # An option that takes a value, given apart from it (`--url X`, not `--url=X`).
            at += 2 if action is not None and action.nargs != 0 else 1
        return None

    def _only_required(self, message: str) -> str:
        """argparse's "required" message without the positionals that may
        be left out (`key=value` of `call`: some Pythons list them)."""
        head, said, names = message.partition(_REQUIRED)
        if head or not said:
            return message
        optional = {action.metavar or action.dest for action in self._actions
                    if not action.option_strings and action.nargs in ("*", "?")}
        return _REQUIRED + ", ".join(name for name in names.split(", ") if name not in optional)
