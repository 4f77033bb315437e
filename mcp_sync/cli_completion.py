"""Shell completion for the `mcp-sync` command: the bash, zsh and fish
scripts `mcp-sync completion SHELL` prints.

Each script is made from the command's argument parser itself: the
subcommands, their options, option choices and which options take a file
are read from it, so a script cannot drift from the parser, and it needs no
package of its own (argcomplete would be a runtime dependency, and would
start Python at every Tab). Only a tool name is completed by running the
command: the scripts call its hidden `__complete_tools` subcommand with the
command line as typed (`cli._complete_tools`, which uses `line_words`).
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Sequence
from typing import Callable

__all__ = ["SCRIPTS", "line_words", "TOOL_COMMANDS", "PROMPT_COMMANDS", "COMPLETE_TOOLS"]

#: Subcommands whose first argument is a tool name, completed by asking the server.
TOOL_COMMANDS = ("call", "tools")
#: Subcommands whose first argument is a prompt name, completed likewise.
PROMPT_COMMANDS = ("prompt", "prompts")
#: The hidden subcommand the scripts run to list the tool (or prompt) names.
COMPLETE_TOOLS = "__complete_tools"


def _visible_commands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, help, parser) of each subcommand `--help` lists (not the hidden ones)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return [(choice.dest, choice.help or "", action.choices[choice.dest])
                    for choice in action._choices_actions]
    return []


def _option_kinds(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Each option of `parser` and what follows it: "" (nothing: a flag),
    "file" (a FILE or PATH metavar), "@file" (`--args JSON|@FILE`),
    "choices:a b c", or "value" (free text)."""
    kinds: dict[str, str] = {}
    for action in parser._actions:
        if not action.option_strings or action.help == argparse.SUPPRESS:
            continue
        if action.nargs == 0:
            kind = ""
        elif action.choices:
            kind = "choices:" + " ".join(map(str, action.choices))
        elif action.metavar in ("FILE", "PATH"):
            kind = "file"
        elif isinstance(action.metavar, str) and "@FILE" in action.metavar:
            kind = "@file"
        else:
            kind = "value"
        for flag in action.option_strings:
            kinds[flag] = kind
    return kinds


def _sh_words(words: Sequence[str]) -> str:
    return " ".join(shlex.quote(word) for word in words)


def _commands_and_options(parser: argparse.ArgumentParser) -> tuple[
        list[tuple[str, str, argparse.ArgumentParser]], dict[str, dict[str, str]], dict[str, str]]:
    """The visible subcommands, each one's options (`_option_kinds`), and
    every option of the command line, the top-level parser's included."""
    commands = _visible_commands(parser)
    every = _option_kinds(parser)
    per_command = {}
    for name, _, sub in commands:
        per_command[name] = _option_kinds(sub)
        every.update(per_command[name])
    return commands, per_command, every


def _value_cases(every: dict[str, str], indent: str, shell: dict[str, Callable[[str], str]]) -> list[str]:
    """The `case` branches, one per option that takes a value, completing
    that value: `shell` gives the branch's body for each kind of value
    (choices, "file", "@file", "value"), from the choices' words."""
    cases = []
    for flag, kind in sorted(every.items()):
        if kind.startswith("choices:"):
            cases.append(f"{indent}{flag}) " + shell["choices"](kind[8:]))
        elif kind:
            cases.append(f"{indent}{flag}) " + shell[kind](""))
    return cases


def _completion_bash(parser: argparse.ArgumentParser) -> str:
    commands, options, every = _commands_and_options(parser)
    top = _option_kinds(parser)
    per_command = [f"            {name}) opts={shlex.quote(' '.join(kinds))} ;;" for name, kinds in options.items()]
    takes_value = [flag for flag, kind in every.items() if kind]
    value_cases = _value_cases(every, "        ", {
        "choices": lambda words: f'COMPREPLY=($(compgen -W {shlex.quote(words)} -- "$cur")); return ;;',
        "file": lambda _: 'compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur")); return ;;',
        "@file": lambda _: ("[[ $cur == @* ]] && { compopt -o filenames 2>/dev/null; "
                            "COMPREPLY=($(compgen -f -- \"${cur#@}\" | sed 's/^/@/')); }; return ;;"),
        "value": lambda _: "return ;;",
    })
    names = " ".join(name for name, _, _ in commands)
    return f"""\
# bash completion for mcp-sync (made by `mcp-sync completion bash` from its argument parser).
# Load it with: source <(mcp-sync completion bash)
_mcp_sync() {{
    local cur=${{COMP_WORDS[COMP_CWORD]}} prev= cmd= npos=0 i w opts
    local -a words=()
    COMPREPLY=()
    # COMP_WORDS splits at = and : as well (COMP_WORDBREAKS): rejoin the
    # pieces that no blank separates, so that a URL stays one word.
    local rest=$COMP_LINE trimmed cword=0
    for (( i = 0; i < ${{#COMP_WORDS[@]}}; i++ )); do
        w=${{COMP_WORDS[i]}}
        trimmed=${{rest#"${{rest%%[![:space:]]*}}"}}
        if (( i > 0 && ${{#trimmed}} == ${{#rest}} && ${{#words[@]}} > 0 )); then
            words[${{#words[@]}}-1]+=$w
        else
            words+=("$w")
        fi
        rest=${{trimmed#"$w"}}
        (( i == COMP_CWORD )) && cword=$(( ${{#words[@]}} - 1 ))
    done
    (( cword > 0 )) && prev=${{words[cword-1]}}
    for (( i = 1; i < cword; i++ )); do
        w=${{words[i]}}
        case $w in
            --) compopt -o default 2>/dev/null; return ;;  # the server program's own words
            {'|'.join(takes_value) or '--'}) (( i++ )) ;;
            -*) ;;
            *) if [[ -z $cmd ]]; then cmd=$w; else (( npos++ )); fi ;;
        esac
    done
    case $prev in
{chr(10).join(value_cases)}
    esac
    if [[ $cur == -* ]]; then
        opts={shlex.quote(' '.join(top))}
        case $cmd in
{chr(10).join(per_command)}
        esac
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
        return
    fi
    if [[ -z $cmd ]]; then
        COMPREPLY=($(compgen -W {shlex.quote(names)} -- "$cur"))
        return
    fi
    case $cmd in
        {'|'.join(TOOL_COMMANDS + PROMPT_COMMANDS)})
            if (( npos == 0 )); then
                local tools
                tools=$("${{COMP_WORDS[0]}}" {COMPLETE_TOOLS} "$COMP_LINE" "$COMP_POINT" 2>/dev/null) || return
                COMPREPLY=($(compgen -W "$tools" -- "$cur"))
            fi ;;
        completion) (( npos == 0 )) && COMPREPLY=($(compgen -W "bash zsh fish" -- "$cur")) ;;
    esac
}}
complete -F _mcp_sync mcp-sync
"""


def _zsh_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _completion_zsh(parser: argparse.ArgumentParser) -> str:
    commands, options, every = _commands_and_options(parser)
    top = _option_kinds(parser)
    per_command = [f"        {name}) opts=({' '.join(kinds)}) ;;" for name, kinds in options.items()]
    takes_value = [flag for flag, kind in every.items() if kind]
    value_cases = _value_cases(every, "    ", {
        "choices": lambda words: f"compadd -- {words}; return ;;",
        "file": lambda _: "_files; return ;;",
        "@file": lambda _: "compset -P '@' && _files; return ;;",
        "value": lambda _: "return 1 ;;",
    })
    described = " ".join(_zsh_quote(f"{name}:{help_}".replace("\n", " ")) for name, help_, _ in commands)
    return f"""\
#compdef mcp-sync
# zsh completion for mcp-sync (made by `mcp-sync completion zsh` from its argument parser).
# Load it with: source <(mcp-sync completion zsh)   (after compinit), or save it as _mcp-sync in $fpath.
_mcp_sync() {{
  local cur=${{words[CURRENT]}} prev=${{words[CURRENT-1]}} cmd= i w
  local -i npos=0
  local -a opts commands
  for (( i = 2; i < CURRENT; i++ )); do
    w=${{words[i]}}
    case $w in
      --)  # the server program's own words
        shift $i words
        (( CURRENT -= i ))
        _normal
        return ;;
      {'|'.join(takes_value) or '--'}) (( i++ )) ;;
      -*) ;;
      *) if [[ -z $cmd ]]; then cmd=$w; else (( npos++ )); fi ;;
    esac
  done
  case $prev in
{chr(10).join(value_cases)}
  esac
  if [[ $cur == -* ]]; then
    opts=({' '.join(top)})
    case $cmd in
{chr(10).join(per_command)}
    esac
    compadd -- $opts
    return
  fi
  if [[ -z $cmd ]]; then
    commands=({described})
    _describe -t commands 'mcp-sync command' commands
    return
  fi
  case $cmd in
    {'|'.join(TOOL_COMMANDS + PROMPT_COMMANDS)})
      if (( npos == 0 )); then
        local line="${{(j: :)words}}" point="${{#${{(j: :)words[1,CURRENT]}}}}"
        local -a tools
        tools=(${{(f)"$(${{(Q)words[1]}} {COMPLETE_TOOLS} "$line" "$point" 2>/dev/null)"}})
        (( ${{#tools}} )) && compadd -- $tools
      fi ;;
    completion) (( npos == 0 )) && compadd -- bash zsh fish ;;
  esac
}}
if [[ ${{zsh_eval_context[-1]}} == loadautofunc ]]; then
  _mcp_sync "$@"
else
  compdef _mcp_sync mcp-sync
fi
"""


def _fish_quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _completion_fish(parser: argparse.ArgumentParser) -> str:
    commands = _visible_commands(parser)
    top = _option_kinds(parser)
    where: dict[str, tuple[str, list[str]]] = {flag: (kind, []) for flag, kind in top.items()}
    helps: dict[str, str] = {}
    for action in [*parser._actions, *(a for _, _, sub in commands for a in sub._actions)]:
        for flag in action.option_strings:
            helps.setdefault(flag, (action.help or "").replace("\n", " ") if action.help != argparse.SUPPRESS else "")
    for name, _, sub in commands:
        for flag, kind in _option_kinds(sub).items():
            if flag not in top:
                where.setdefault(flag, (kind, []))[1].append(name)
    takes_value = " ".join(flag for flag, (kind, _) in where.items() if kind)
    lines = [
        "# fish completion for mcp-sync (made by `mcp-sync completion fish` from its argument parser).",
        "# Load it with: mcp-sync completion fish | source",
        "# (or save it as ~/.config/fish/completions/mcp-sync.fish).",
        "function __mcp_sync_state --description 'mcp-sync: the subcommand and how many arguments follow it'",
        "    set -l tokens (commandline -opc)",
        "    set -l cmd ''",
        "    set -l npos 0",
        "    set -l skip 0",
        "    for w in $tokens[2..-1]",
        "        if test $skip = 1",
        "            set skip 0",
        "            continue",
        "        end",
        "        switch $w",
        "            case --",
        "                echo -- --",
        "                return",
        f"            case {takes_value or '--'}",
        "                set skip 1",
        "            case '-*'",
        "            case '*'",
        "                if test -z \"$cmd\"",
        "                    set cmd $w",
        "                else",
        "                    set npos (math $npos + 1)",
        "                end",
        "        end",
        "    end",
        "    echo -- $cmd $npos",
        "end",
        "function __mcp_sync_is --description 'mcp-sync: the subcommand is one of these, before the server program'",
        "    set -l state (__mcp_sync_state | string split ' ')",
        "    test \"$state[1]\" != -- ; and contains -- \"$state[1]\" $argv",
        "end",
        "function __mcp_sync_wants --description 'mcp-sync: the subcommand is one of these and this is its first argument'",
        "    set -l state (__mcp_sync_state | string split ' ')",
        "    test \"$state[1]\" != -- ; and test \"$state[2]\" = 0; and contains -- \"$state[1]\" $argv",
        "end",
        "function __mcp_sync_tools --description 'mcp-sync: the tool (or prompt) names the server on the line lists'",
        "    set -l tokens (commandline -opc)",
        "    set -l before (commandline -cp | string collect)",
        f"    command $tokens[1] {COMPLETE_TOOLS} (commandline -p | string collect) (string length -- \"$before\") 2>/dev/null",
        "end",
        "complete -c mcp-sync -f",
        "complete -c mcp-sync -n '__mcp_sync_is --' -F  # the server program's own words",
    ]
    for name, help_, _ in commands:
        lines.append(f"complete -c mcp-sync -n '__mcp_sync_is \"\"' -a {name} -d {_fish_quote(help_)}")
    for flag, (kind, only) in where.items():
        names = f"-l {flag[2:]}" if flag.startswith("--") else f"-s {flag[1:]}"
        condition = f"__mcp_sync_is {' '.join(only)}" if only else "not __mcp_sync_is --"
        spec = f"complete -c mcp-sync -n {_fish_quote(condition)} {names}"
        if kind.startswith("choices:"):
            spec += f" -x -a {_fish_quote(kind[8:])}"
        elif kind in ("file", "@file"):
            spec += " -r -F"
        elif kind:
            spec += " -x"
        lines.append(spec + f" -d {_fish_quote(helps.get(flag, ''))}")
    lines += [
        f"complete -c mcp-sync -n '__mcp_sync_wants {' '.join(TOOL_COMMANDS + PROMPT_COMMANDS)}' -a '(__mcp_sync_tools)'",
        "complete -c mcp-sync -n '__mcp_sync_wants completion' -a 'bash zsh fish'",
    ]
    return "\n".join(lines) + "\n"


SCRIPTS: dict[str, Callable[[argparse.ArgumentParser], str]] = {
    "bash": _completion_bash, "zsh": _completion_zsh, "fish": _completion_fish}


def line_words(line: str, point: int) -> tuple[list[str], list[str]] | None:
    """The words of a command line before the word being completed (the
    program's name left out), and the words from a `--` after it on; None
    when the line cannot be read."""
    def split(text: str) -> tuple[list[str], bool]:
        for close in ("", '"', "'"):  # the word being typed may be an open quote
            try:
                return shlex.split(text + close), bool(close)
            except ValueError:
                continue
        raise ValueError(text)

    try:
        before, in_quotes = split(line[:point])
        after, _ = split(line[point:])
    except ValueError:
        return None
    if before and (in_quotes or not line[:point][-1:].isspace()):
        before.pop()  # the word being completed
    if after and not line[point:][:1].isspace():
        after.pop(0)  # the rest of the word the cursor is in
    tail = after[after.index("--"):] if "--" in after else []
    return before[1:], tail
