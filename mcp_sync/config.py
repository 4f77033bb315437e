"""Server config files: the JSON files MCP hosts keep their servers in.

Owns: reading those files (the `mcpServers` object of Claude Desktop,
Claude Code's `.mcp.json`, Cursor and Windsurf; VS Code's `servers` object,
also under `mcp` in its settings), substituting `${env:NAME}` / `${NAME}`
from the environment, reading a VS Code `envFile`, turning each entry into a
target `connect()` takes (`Stdio`, `HTTP`, `SSE`), finding the usual files,
and `connect_configured()`.

Must not know: how a target connects (the transports'), or what a client
does with it (`client.py`). It builds targets with their public
constructors only.

Substitution happens when an entry is read (`config[name]`), not when the
file is loaded: a variable missing for one server does not stop the others
from being used, and the error names the variable and the server. So with
an entry of the wrong shape (a file is shared by several hosts, each with
its own ideas): it is set aside at load time (`unusable`, and a warning on
the `mcp_sync.config` logger), and only `config[name]` for it raises. What
makes the whole file unreadable (not JSON, no servers object, a name
defined twice) is an error at load time.
"""

from __future__ import annotations

import codecs
import json
import logging
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from .errors import ConfigError
from .transports import Stdio, Target

if TYPE_CHECKING:
    from .client import Client

__all__ = ["ServerConfig", "load_config", "config_locations", "find_config", "connect_configured"]

ConfigSource = Union[str, "os.PathLike[str]", Mapping[str, Any]]

log = logging.getLogger(__name__)

#: `type` values that mean Streamable HTTP (hosts spell it several ways).
_HTTP_TYPES = frozenset({"http", "streamable-http", "streamable_http", "streamablehttp"})
_TYPES = "stdio, http, sse"

#: `${env:NAME}`, `${NAME}`, `${NAME:-default}` (Claude Code), `${input:id}` (VS Code prompts).
_VARIABLE = re.compile(r"\$\{(?P<body>[^}]*)\}")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: What follows a trailing comma, comments blanked out: whitespace, then a closer (JSONC).
_TRAILING_COMMA = re.compile(r"\s*[}\]]")


class _UnknownServer(ConfigError, KeyError):
    """`config[name]` for a name the file does not define: a `ConfigError`
    that is also the `KeyError` a mapping raises."""

    __str__ = Exception.__str__  # KeyError's would quote the whole message


class ServerConfig(Mapping[str, Target]):
    """The servers of a config file: a read-only mapping of server name to a
    target `connect()` takes. Load one with `load_config()`.

    Indexing it (`config["files"]`) builds the server's target then, with
    `${...}` taken from the environment at that moment.

    Args:
        entries: Each server's entry by name, as in the file's `mcpServers`
            (or `servers`) object.
        path: The file they were read from, or None.
        disabled: The names of the entries left out.
        unusable: Why each entry of the wrong shape cannot be used, by name.

    Attributes:
        path (Path | None): The file read (absolute), None for a mapping.
        entries (dict[str, dict]): Each server's entry as written: unknown
            keys kept, nothing substituted.
        disabled (frozenset[str]): The entries marked `"disabled": true`,
            which are left out.
        unusable (dict[str, str]): The entries of the wrong shape (no
            `command` or `url`, an unknown `type`, a value of the wrong
            kind), left out too, each with the error `config[name]`
            raises for it: the file's other servers can be used.

    Raises:
        ConfigError: From `config[name]`, for a name the file does not
            define (it is also a `KeyError`), or an entry that cannot be
            used (one in `unusable`, a missing variable, a bad `envFile`, ...).

    Example::

        config = mcp_sync.load_config(".mcp.json")
        print(config.path, list(config))
        with mcp_sync.connect(config["files"]) as client:
            ...
    """

    def __init__(self, entries: Mapping[str, Mapping[str, Any]], *, path: Path | None = None,
                 disabled: frozenset[str] = frozenset(), unusable: Mapping[str, str] | None = None) -> None:
        self.path = path
        self.entries: dict[str, dict[str, Any]] = {name: dict(entry) for name, entry in entries.items()}
        self.disabled = disabled
        self.unusable: dict[str, str] = dict(unusable or {})

    def __getitem__(self, name: str) -> Target:
        entry = self.entries.get(name) if isinstance(name, str) else None
        if entry is None:
            if isinstance(name, str) and name in self.unusable:
                raise ConfigError(self.unusable[name])
            raise _UnknownServer(self._unknown(name))
        return _target(name, entry, self._where(), self._workspace())

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self.entries

    def __repr__(self) -> str:
        where = f" from {self.path}" if self.path is not None else ""
        return f"<ServerConfig{where}: {', '.join(self.entries) or 'no servers'}>"

    def _where(self) -> str:
        return str(self.path) if self.path is not None else "the config"

    def _workspace(self) -> Path:
        """The folder `${workspaceFolder}` and relative paths stand for: the
        project the file belongs to (the parent of `.vscode/` or `.cursor/`)."""
        if self.path is None:
            return Path.cwd()
        folder = self.path.parent
        return folder.parent if folder.name in (".vscode", ".cursor") else folder

    def _unknown(self, name: object) -> str:
        if name in self.disabled:
            return f"server {name!r} is disabled in {self._where()}"
        known = ", ".join(sorted(self.entries)) or "none"
        return f"no server named {name!r} in {self._where()} (servers: {known})"



def load_config(source: ConfigSource | ServerConfig) -> ServerConfig:
    """Read a server config file (or an already parsed mapping).

    Takes the `mcpServers` object (Claude Desktop, Claude Code's `.mcp.json`,
    Cursor, Windsurf) and VS Code's `servers` object (`.vscode/mcp.json`, or
    `mcp.servers` in its settings); a `ServerConfig` is returned as it is.
    Comments and trailing commas (JSONC, as VS Code writes) are accepted.
    Each entry becomes a target:

    - `command` (+ `args`, `env`, `cwd`, VS Code's `envFile`): `Stdio`;
    - `url` or `serverUrl` (+ `headers`): `HTTP`, or `SSE` when `type` is
      "sse". `type` may be "stdio", "http" or "sse".

    `${env:NAME}`, `${NAME}` and `${NAME:-default}` in the command, args,
    env, cwd, url and headers are taken from the environment when an entry
    is read; `${workspaceFolder}` and `${userHome}` are the project folder
    and the home folder. Unknown keys are kept (`entries`) and ignored;
    entries with `"disabled": true` are left out, unchecked (`disabled`
    names them). An entry of the wrong shape is left out with a warning
    (`unusable` says why; `config[name]` raises that `ConfigError`), so
    that the file's other servers can be used; what makes the file
    unreadable raises `ConfigError`, naming the file.

    Example::

        config = mcp_sync.load_config({"mcpServers": {
            "demo": {"command": "python", "args": ["-m", "mcp_sync.testing"]},
            "search": {"url": "https://example.com/mcp",
                       "headers": {"Authorization": "Bearer ${env:SEARCH_TOKEN}"}},
        }})
        print(list(config))            # ['demo', 'search']
        print(config["demo"])          # Stdio('python', ['-m', 'mcp_sync.testing'])

    Args:
        source: A path to a JSON (or JSONC) file, a mapping already parsed
            from one, or a `ServerConfig` (returned as it is).

    Returns:
        The servers defined, by name.

    Raises:
        ConfigError: The file is missing, unreadable or not valid JSON, or
            it has no `mcpServers`/`servers` object, or defines a name twice.
        TypeError: `source` is neither a path nor a mapping.
    """
    path: Path | None = None
    if isinstance(source, ServerConfig):
        return source
    if isinstance(source, Mapping):
        data: Any = source
    elif isinstance(source, (str, os.PathLike)):
        path = Path(source).expanduser().absolute()  # absolute: it says which file was used
        try:
            raw = path.read_bytes()
            # UTF-8 (a BOM allowed), or UTF-16 with its BOM: what Windows
            # PowerShell's `>` writes.
            text = raw.decode("utf-16" if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)) else "utf-8-sig")
        except FileNotFoundError:
            raise ConfigError(f"no config file at {path}") from None
        except OSError as exc:
            raise ConfigError(f"cannot read the config file {path}: {exc}") from None
        except UnicodeDecodeError as exc:
            raise ConfigError(f"the config file {path} is not UTF-8 text ({exc.reason} at byte {exc.start}): "
                              "save it as UTF-8") from None
        data = _parse_json(text, path)
    else:
        raise TypeError(f"load_config() takes a file path or a mapping, not {type(source).__name__}")
    where = str(path) if path is not None else "the config"
    servers, disabled, unusable = _servers_of(data, where)
    for why in unusable.values():
        log.warning("%s (left out: the file's other servers can be used)", why)
    return ServerConfig(servers, path=path, disabled=disabled, unusable=unusable)


def config_locations(cwd: str | os.PathLike[str] | None = None) -> list[Path]:
    """Where MCP hosts keep their server config, in the order `find_config()`
    looks: the project's `.mcp.json` (Claude Code), `.vscode/mcp.json`,
    `.cursor/mcp.json`, then the user's Claude Desktop file (per OS), Cursor's
    `~/.cursor/mcp.json` and Windsurf's `~/.codeium/windsurf/mcp_config.json`.

    Example::

        for path in mcp_sync.config.config_locations():
            print(path, path.exists())

    Args:
        cwd: The project folder the project files are looked for in; None:
            the current directory.

    Returns:
        The candidate paths, whether they exist or not.
    """
    project = Path(cwd) if cwd is not None else Path.cwd()
    home = Path.home()
    if sys.platform == "darwin":
        claude = home / "Library" / "Application Support" / "Claude"
    elif sys.platform == "win32":
        claude = Path(os.environ.get("APPDATA") or home / "AppData" / "Roaming") / "Claude"
    else:
        claude = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config") / "Claude"
    return [
        project / ".mcp.json",
        project / ".vscode" / "mcp.json",
        project / ".cursor" / "mcp.json",
        claude / "claude_desktop_config.json",
        home / ".cursor" / "mcp.json",
        home / ".codeium" / "windsurf" / "mcp_config.json",
    ]


def find_config(server: str | None = None, *, cwd: str | os.PathLike[str] | None = None) -> Path:
    """The config file to use: the first of `config_locations(cwd)` that
    exists, or with `server`, the first that defines that server. Raises
    `ConfigError` naming the places looked at when there is none (and a
    file that cannot be read or parsed, rather than skip it silently).

    Example::

        path = mcp_sync.find_config("github")
        print("using", path)
        client = mcp_sync.connect(mcp_sync.load_config(path)["github"])

    Args:
        server: A server name the file must define; None takes the first
            file that exists.
        cwd: The project folder (see `config_locations()`); None: the
            current directory.

    Returns:
        The path of the file found.

    Raises:
        ConfigError: No such file, or one of the files looked at cannot be
            read or parsed.
    """
    places = config_locations(cwd)
    disabled_in: list[Path] = []
    defined: dict[str, None] = {}  # what the files found define, for the error
    for path in places:
        if not path.is_file():
            continue
        if server is None:
            return path
        config = load_config(path)
        if server in config or server in config.unusable:  # (which `config[server]` then explains)
            return path
        if server in config.disabled:
            disabled_in.append(path)
        defined.update(dict.fromkeys(config))
    looked = ", ".join(str(p) for p in places)
    what = f"defining server {server!r}" if server is not None else ""
    also = (f"; it is disabled in {', '.join(str(p) for p in disabled_in)} (its \"disabled\": true)"
            if disabled_in else f"; the files found define: {', '.join(defined)}" if defined else "")
    raise ConfigError(f"no MCP config file {what}{' ' if what else ''}found (looked at {looked}){also}")


def connect_configured(name: str, config: ConfigSource | ServerConfig | None = None,
                       **connect_options: Any) -> Client:
    """Connect to the server `name` of a config file: `config` is a path, a
    mapping or a `ServerConfig`; None looks in the usual places
    (`find_config(name)`). Other keyword arguments go to `connect()`
    (`timeout=`, `input_handlers=`, ...); HTTP options (`verify=`,
    `headers=`, ...) apply to a server with a URL, its headers added to the
    file's (`with_options`). Returns a `Client`.

    Example::

        with mcp_sync.connect_configured("demo", config=".mcp.json", timeout=10) as client:
            print(client.call_tool("echo", {"text": "hi"}).text)

    Args:
        name: The server's name in the file.
        config: A path, a mapping or a `ServerConfig`; None: the file
            `find_config(name)` finds.
        **connect_options: Keyword arguments for `connect()`.

    Returns:
        An open client, as `connect()` returns it.

    Raises:
        ConfigError: No config file defines `name`, or its entry cannot be
            used (for a name the file lacks, also a `KeyError`).
        TypeError: `name` is not a non-empty string.
        McpError: What `connect()` raises, such as `ConnectError`.
    """
    from .client import connect  # the client layer sits above this module

    if not isinstance(name, str) or not name:
        raise TypeError("connect_configured() needs a server name string")
    if config is None:
        config = find_config(name)
    target, options = with_options(load_config(config)[name], connect_options)
    return connect(target, **options)


def with_options(target: Target, options: Mapping[str, Any]) -> tuple[Target, dict[str, Any]]:
    """A configured `target` and `connect()` options, made to go together.
    The HTTP options among `options` (`headers`, `verify`, `proxy`, ...;
    `connect()` takes them with a URL string only) are applied to an `HTTP`
    or `SSE` target, rebuilt from its URL and headers with them: headers
    given add to the entry's, a name in both taking the value given. A
    program (stdio) takes none: they are left out for it. The other options
    are returned for `connect()`.

    Example::

        target, options = with_options(load_config(".mcp.json")["search"], {"timeout": 10, "verify": False})
        client = mcp_sync.connect(target, **options)

    Args:
        target: A target from a `ServerConfig`.
        options: `connect()` keyword arguments, HTTP options among them.

    Returns:
        The target to connect to and the options left for `connect()`.
    """
    from .transports import _http_options

    names = _http_options()
    rest = {name: value for name, value in options.items() if name not in names}
    http = {name: value for name, value in options.items() if name in names}
    if not http:
        return target, rest
    from .transports.http_target import HTTP  # (a URL's options: the HTTP stack is wanted)

    if not isinstance(target, HTTP):
        return target, rest
    headers = http.pop("headers", None)
    if isinstance(headers, Mapping):
        given = {name.lower() for name in headers if isinstance(name, str)}
        headers = {**{k: v for k, v in target.headers.items() if k.lower() not in given}, **headers}
    elif headers is None:
        headers = target.headers
    return type(target)(target.url, headers=headers, **http), rest  # HTTP or SSE, as the entry said


# -- parsing ------------------------------------------------------------------------


def _parse_json(text: str, path: Path) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    try:
        return json.loads(_strip_jsonc(text))
    except json.JSONDecodeError as exc:
        # The position is the stripped text's; comments are blanked, not
        # removed, so line and column still point into the file.
        raise ConfigError(f"{path} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None


def _strip_jsonc(text: str) -> str:
    """JSON with comments and trailing commas made plain JSON. Comments are
    replaced by spaces (newlines kept) so error positions stay right; then
    a comma whose next character (whitespace aside) closes an object or
    array goes. Two passes: a bracket inside a comment (`// [optional]`)
    is no closer."""
    return _without_trailing_commas(_without_comments(text))


def _without_comments(text: str) -> str:
    return _outside_strings(text, _comment_step)


def _without_trailing_commas(text: str) -> str:
    return _outside_strings(text, _comma_step)


def _outside_strings(text: str, step: Callable[[str, int, list[str]], int]) -> str:
    """`text` with each JSON string kept as it is and what lies between
    them handed to `step(text, i, out)`, which appends to `out` and says
    where to go on from."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        if text[i] == '"':
            j = _string_end(text, i)
            out.append(text[i:j])
            i = j
        else:
            i = step(text, i, out)
    return "".join(out)


def _comment_step(text: str, i: int, out: list[str]) -> int:
    """A comment becomes spaces (its newlines kept); anything else is kept."""
    if text.startswith("//", i):
        j = text.find("\n", i)
        j = len(text) if j < 0 else j
        out.append(" " * (j - i))
        return j
    if text.startswith("/*", i):
        j = text.find("*/", i + 2)
        j = len(text) if j < 0 else j + 2
        out.append(re.sub(r"[^\n]", " ", text[i:j]))
        return j
    out.append(text[i])
    return i + 1


def _comma_step(text: str, i: int, out: list[str]) -> int:
    """A comma followed only by whitespace and a closer goes."""
    c = text[i]
    out.append(" " if c == "," and _TRAILING_COMMA.match(text, i + 1) else c)  # (no copy of the rest)
    return i + 1


def _string_end(text: str, start: int) -> int:
    """Where the JSON string that opens at `start` ends (past its quote)."""
    j, n = start + 1, len(text)
    while j < n and text[j] != '"':
        j += 2 if text[j] == "\\" else 1
    return j + 1


def _servers_of(data: Any, where: str) -> tuple[dict[str, dict[str, Any]], frozenset[str], dict[str, str]]:
    """The entries to use, the names of those disabled, and why each
    entry of the wrong shape cannot be used."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: the top level must be a JSON object, not {_kind(data)}")
    found: list[tuple[str, Any]] = []
    for key in ("mcpServers", "servers"):
        if key in data:
            found.append((key, data[key]))
    mcp = data.get("mcp")
    if isinstance(mcp, Mapping) and "servers" in mcp:  # VS Code settings.json
        found.append(("mcp.servers", mcp["servers"]))
    if not found:
        if data and all(isinstance(v, Mapping) for v in data.values()):
            found.append(("servers", data))  # a bare {name: entry} mapping, as Python users write it
        elif data:
            raise ConfigError(f"{where}: no \"mcpServers\" or \"servers\" object")
    servers: dict[str, dict[str, Any]] = {}
    disabled: set[str] = set()
    unusable: dict[str, str] = {}
    for key, block in found:
        if not isinstance(block, Mapping):
            raise ConfigError(f"{where}: \"{key}\" must be an object of servers, not {_kind(block)}")
        for name, entry in block.items():
            if not isinstance(name, str):  # (a mapping built in Python: JSON's keys are strings)
                raise ConfigError(f"{where}: server names must be strings, not {name!r}")
            if name in servers or name in disabled or name in unusable:
                raise ConfigError(f"{where}: server {name!r} is defined twice")
            if not isinstance(entry, Mapping):
                unusable[name] = f"{where}: server {name!r} must be an object, not {_kind(entry)}"
            elif entry.get("disabled") is True:  # never used: its shape is no reason to refuse the file
                disabled.add(name)
            else:
                try:
                    _check_entry(name, entry, where)
                except ConfigError as exc:
                    unusable[name] = str(exc)
                else:
                    servers[name] = dict(entry)
    return servers, frozenset(disabled), unusable


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null",
            int: "a number", float: "a number"}.get(type(value), f"a {type(value).__name__}")


def kind_of_entry(name: str, entry: Mapping[str, Any], where: str) -> str:
    """"stdio", "http" or "sse", from `type` (or `transport`) and the keys present."""
    declared = entry.get("type", entry.get("transport"))
    url = url_of(entry)
    if declared is None:
        if "command" in entry:
            return "stdio"
        if url is not None:
            return "http"
        raise ConfigError(f"{where}: server {name!r} has neither \"command\" nor \"url\"")
    if not isinstance(declared, str):
        raise ConfigError(f"{where}: server {name!r}: \"type\" must be a string ({_TYPES}), not {_kind(declared)}")
    kind = declared.strip().lower()
    if kind in _HTTP_TYPES:
        kind = "http"
    if kind not in ("stdio", "http", "sse"):
        raise ConfigError(f"{where}: server {name!r} has unknown type {declared!r} (known: {_TYPES})")
    if kind == "stdio" and "command" not in entry:
        raise ConfigError(f"{where}: server {name!r} is of type stdio but has no \"command\"")
    if kind != "stdio" and url is None:
        raise ConfigError(f"{where}: server {name!r} is of type {kind} but has no \"url\"")
    return kind


def url_of(entry: Mapping[str, Any]) -> Any:
    """The URL an entry names (under `url`, `serverUrl` or `httpUrl`, the
    keys clients' config files use), as given; None without one."""
    for key in ("url", "serverUrl", "httpUrl"):
        if key in entry:
            return entry[key]
    return None


def _check_entry(name: str, entry: Mapping[str, Any], where: str) -> None:
    """Shape checks done at load time: they need no environment."""
    kind = kind_of_entry(name, entry, where)
    fields = {"command": str, "args": list, "env": Mapping, "cwd": str, "envFile": str} if kind == "stdio" \
        else {"headers": Mapping}
    for key, expected in fields.items():
        if key in entry and not isinstance(entry[key], expected):
            wanted = {str: "a string", list: "a list of strings", Mapping: "an object"}[expected]
            raise ConfigError(f"{where}: server {name!r}: \"{key}\" must be {wanted}, not {_kind(entry[key])}")
    if kind == "stdio":
        if not entry["command"]:
            raise ConfigError(f"{where}: server {name!r} has an empty \"command\"")
        bad = [a for a in entry.get("args", []) if not isinstance(a, (str, int, float)) or isinstance(a, bool)]
        if bad:
            raise ConfigError(f"{where}: server {name!r}: \"args\" must be strings, not {_kind(bad[0])}")
    elif not isinstance(url_of(entry), str):
        raise ConfigError(f"{where}: server {name!r}: \"url\" must be a string")
    for key in ("env", "headers"):
        for k, v in (entry.get(key) or {}).items():
            if not isinstance(v, (str, int, float)) or isinstance(v, bool):
                raise ConfigError(f"{where}: server {name!r}: {key} {k!r} must be a string, not {_kind(v)}")


# -- building targets ---------------------------------------------------------------


class _Substitute:
    """`${...}` substitution for one server's entry."""

    def __init__(self, name: str, where: str, workspace: Path) -> None:
        self.name, self.where, self.workspace = name, where, workspace

    def __call__(self, value: Any, field: str) -> str:
        return _VARIABLE.sub(lambda m: self._one(m["body"], field), str(value))

    def _one(self, body: str, field: str) -> str:
        if body.startswith("env:"):
            return self._env(body[4:], None, field)
        if body in ("workspaceFolder", "workspaceRoot"):
            return str(self.workspace)
        if body == "workspaceFolderBasename":
            return self.workspace.name
        if body == "userHome":
            return str(Path.home())
        if body in ("pathSeparator", "/"):
            return os.sep
        if ":-" in body:
            var, default = body.split(":-", 1)
            return self._env(var, default, field)
        if body.startswith("input:"):
            raise ConfigError(f"{self.where}: server {self.name!r}: {field} uses ${{{body}}}, a VS Code "
                              "input prompt, which cannot be answered here: use ${env:NAME} instead")
        return self._env(body, None, field)

    def _env(self, var: str, default: str | None, field: str) -> str:
        if not _NAME.fullmatch(var):
            raise ConfigError(f"{self.where}: server {self.name!r}: {field} has a bad variable ${{{var}}}")
        value = os.environ.get(var)
        if value is None:
            if default is not None:
                return default
            raise ConfigError(f"{self.where}: server {self.name!r}: environment variable {var} is not set "
                              f"(used in {field})")
        return value


def _target(name: str, entry: Mapping[str, Any], where: str, workspace: Path) -> Target:
    sub = _Substitute(name, where, workspace)
    kind = kind_of_entry(name, entry, where)
    try:
        if kind == "stdio":
            env: dict[str, str] = {}
            if "envFile" in entry:
                env.update(_read_env_file(name, sub(entry["envFile"], "envFile"), where, workspace))
            env.update({str(k): sub(v, f"env {k}") for k, v in (entry.get("env") or {}).items()})
            cwd = None
            if entry.get("cwd"):
                cwd = str(workspace / Path(sub(entry["cwd"], "cwd")).expanduser())
            args = [sub(a, "args") for a in entry.get("args", [])]
            return Stdio(sub(entry["command"], "command"), args, env=env or None, cwd=cwd)
        url = sub(url_of(entry), "url")
        headers = {str(k): sub(v, f"header {k}") for k, v in (entry.get("headers") or {}).items()}
        from .transports.http_target import HTTP, SSE  # loaded only when a file names a URL

        return SSE(url, headers=headers) if kind == "sse" else HTTP(url, headers=headers)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(f"{where}: server {name!r}: {exc}") from None


def _read_env_file(name: str, file: str, where: str, workspace: Path) -> dict[str, str]:
    """A dotenv file: `NAME=value` lines, `#` comments, optional `export `
    and quotes. Values are taken literally (no substitution inside)."""
    path = workspace / Path(file).expanduser()
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{where}: server {name!r}: cannot read envFile {path}: {exc}") from None
    env: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[7:].lstrip()
        key, sep, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not _NAME.fullmatch(key):
            raise ConfigError(f"{where}: server {name!r}: envFile {path} line {number} is not NAME=value")
        quote = value[:1]
        if quote in ("\"", "'") and quote in value[1:]:
            # Up to the closing quote; what follows it is a comment, if anything.
            value = value[1:value.index(quote, 1)]
        elif " #" in value:
            value = value.split(" #", 1)[0].rstrip()  # a trailing comment after an unquoted value
        env[key] = value
    return env
