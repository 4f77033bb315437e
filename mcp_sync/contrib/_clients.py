"""What the framework integrations share: settings read into a config, one
client per server per process, the configuration checks, the health report.

Nothing here imports a framework. The integrations hand in their settings
(`MCP_SERVERS`, `MCP_CONFIG`, `MCP_CLIENT_OPTIONS`) as plain values.

Fork: a web server that forks workers (gunicorn, with or without
`--preload`) copies whatever clients the parent made. A worker never uses
those in its own name: right after a fork (or at the first use in a process
forked by C code, through `forking.check()`) each `Clients` forgets the
clients it holds, keeps them aside to close, and takes fresh locks. The
worker then connects on its first use, with its own server process. Closing
an inherited client in the child ends nothing of the parent's (the client
let go of what it inherited at the fork).
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import weakref
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from .. import forking
from ..client import Client, ClientOptions, connect
from ..config import ServerConfig, load_config, with_options
from ..errors import ConfigError
from ..shared_attempt import SharedAttempt
from ..options import check_flag

log = logging.getLogger("mcp_sync.contrib")

#: The keys of an `mcpServers` entry that mcp_sync reads; others are ignored
#: (hosts keep their own there), and flagged in a project's own settings.
KNOWN_ENTRY_KEYS = frozenset({
    "command", "args", "env", "envFile", "cwd", "type", "transport", "url", "serverUrl", "httpUrl", "headers",
    "disabled",
})


@attrs.frozen
class Problem:
    """One thing wrong with the settings: an error (nothing works) or a warning."""

    id: str
    msg: str
    hint: str | None = None
    error: bool = True


def setting_names(prefix: str = "", *, lower: bool = False) -> tuple[str, str, str]:
    """How the three settings are spelled where they are read: Django's and
    Flask's `MCP_SERVERS`, Celery's lowercase `mcp_servers`; for messages."""
    def spelled(name: str) -> str:
        return prefix + (name.lower() if lower else name)

    return spelled("MCP_SERVERS"), spelled("MCP_CONFIG"), spelled("MCP_CLIENT_OPTIONS")


#: The three settings' names as messages spell them, when they are not
#: `setting_names()`'s: Celery's values given to `MCP()` are named there.
Names = tuple[str, str, str]


def read_settings(servers: Any, path: Any, options: Any, *, prefix: str = "", lower: bool = False,
                  names: Names | None = None) -> tuple[ServerConfig, dict[str, Any]]:
    """The config and connect options the settings describe.

    Raises:
        ConfigError: Both or neither of `MCP_SERVERS` and `MCP_CONFIG`, a
            value of the wrong kind, or a config `load_config()` refuses.
        TypeError, ValueError: `MCP_CLIENT_OPTIONS` that `connect()` refuses.
    """
    servers_name, config_name, _ = names or setting_names(prefix, lower=lower)
    if servers is not None and path is not None:
        raise ConfigError(f"set one of {servers_name} and {config_name}, not both")
    if servers is None and path is None:
        raise ConfigError(f"no MCP servers configured: set {servers_name} (an mcpServers object) "
                          f"or {config_name} (a config file's path)")
    if servers is not None:
        if not isinstance(servers, Mapping):
            raise ConfigError(f"{servers_name} must be a mapping of server name to entry "
                              f"(an mcpServers object), not {type(servers).__name__}")
        # The names are what `get_client(name)` and `--server NAME` look up,
        # and what messages list: strings, as in a JSON mcpServers object.
        # Another key would pass `load_config()` and break every lookup.
        named = [name for name in servers if not isinstance(name, str)]
        if named:
            raise ConfigError(f"{servers_name}: server names must be strings, not "
                              f"{', '.join(repr(name) for name in named)}")
        config = load_config({"mcpServers": servers})
    else:
        if not isinstance(path, (str, os.PathLike)):
            raise ConfigError(f"{config_name} must be a config file's path, not {type(path).__name__}")
        config = load_config(path)
    for why in config.unusable.values():
        # Set aside by `load_config` (a file shared by hosts), but these are
        # the app's own settings: every server in them is meant to work.
        raise ConfigError(why)
    return config, check_options(options, prefix=prefix, lower=lower, names=names)


def check_options(options: Any, *, prefix: str = "", lower: bool = False,
                  names: Names | None = None) -> dict[str, Any]:
    """`MCP_CLIENT_OPTIONS` as a dict, its client options validated.

    HTTP options (`headers`, `verify`, ...) are checked as `HTTP()` checks
    them; they apply to the servers with a URL (`config.with_options`), not
    to the programs.

    Raises:
        TypeError: Not a mapping, or an unknown option.
        ValueError: A value out of range.

    Each message starts with the setting's name: raised at start-up or at
    a first use, far from the settings file, `connect()`'s own words alone
    ("unexpected keyword argument 'timout'") would not say where to look.
    """
    name = (names or setting_names(prefix, lower=lower))[2]
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise TypeError(f"{name} must be a mapping of connect() options, not {type(options).__name__}")
    from ..transports import (
        _http_options,  # the HTTP option names, known to the transports only
    )

    http = {key: value for key, value in options.items() if key in _http_options()}
    try:
        ClientOptions(**{key: value for key, value in options.items() if key not in http})
        if http:
            from ..transports.http_target import HTTP

            # Checked on a target that is never used (an `auth=` provider is
            # left out: it would take this URL for its server's).
            HTTP("http://127.0.0.1/", **{key: value for key, value in http.items() if key != "auth"})
    except (TypeError, ValueError) as exc:
        exc.args = (f"{name}: {exc}",)  # (the error of this check alone: named in place, type kept)
        raise
    return dict(options)


def problems(servers: Any, path: Any, options: Any, *, prefix: str = "", lower: bool = False,
             names: Names | None = None) -> list[Problem]:
    """Everything wrong with the settings, found without connecting: for a
    system check. The ids are `E001`... (errors) and `W001`... (warnings)."""
    servers_name, config_name, _ = names or setting_names(prefix, lower=lower)
    if servers is not None and path is not None:
        return [Problem("E001", f"both {servers_name} and {config_name} are set",
                        "keep one: the servers in settings, or the path of a config file")]
    if servers is None and path is None:
        return [Problem("W001", f"no MCP servers configured: neither {servers_name} nor {config_name} "
                                "is set", "set one, or remove the app", error=False)]
    found: list[Problem] = []
    try:
        config, _ = read_settings(servers, path, None, prefix=prefix, lower=lower, names=names)
    except ConfigError as exc:
        return [Problem("E002", str(exc))]
    for name in config:
        try:
            config[name]  # substitutes the environment: a missing variable is found here
        except ConfigError as exc:
            found.append(Problem("E003", str(exc), "set the variable, or give it a default: ${NAME:-default}"))
    if servers is not None:
        for name, entry in config.entries.items():
            unknown = sorted(set(entry) - KNOWN_ENTRY_KEYS)
            if unknown:
                found.append(Problem("W002", f"{servers_name}[{name!r}] has keys mcp_sync ignores: "
                                             f"{', '.join(unknown)}",
                                     f"the keys read are {', '.join(sorted(KNOWN_ENTRY_KEYS))}", error=False))
    try:
        check_options(options, prefix=prefix, lower=lower, names=names)
    except (TypeError, ValueError) as exc:
        found.append(Problem("E004", str(exc),  # (it names the setting)
                             "it takes the keyword arguments of mcp_sync.connect()"))
    return found


#: Every `Clients` of this process, for the fork hook. Weak: a registry that
#: is dropped (a test's Flask app) is not kept alive by this.
_registries: weakref.WeakSet[Clients] = weakref.WeakSet()


class Clients:
    """The shared clients of one process: one per configured server, made on
    first use, closed at interpreter exit (or by `close()`).

    Lock discipline: `_lock` guards `_source`, `_loaded`, `_clients`,
    `_connects`, `_inherited` and `_generation`, and is held only to read
    or swap them, never while connecting or closing. A server's client is
    made by one `SharedAttempt` (`_connects[name]`, one per configured
    name): two threads never make two clients of one server, the threads
    that wait for a connect get its outcome (its error too, rather than
    each trying again after it), and a slow start of one server holds up
    no other. The fork hook replaces the lock and the attempts: a parent
    thread may have held one at the fork.
    """

    def __init__(self, source: Callable[[], tuple[ServerConfig, dict[str, Any]]]) -> None:
        # Called (under `_lock`) at the first use after a construction or a
        # reset: the settings may not be ready when the registry is made.
        self._source = source
        self._lock = threading.Lock()
        self._loaded: tuple[ServerConfig, dict[str, Any]] | None = None
        self._clients: dict[str, Client] = {}
        self._connects: dict[str, SharedAttempt[Client | None]] = {}
        # Clients made before a fork, found in a child: closed at its next use.
        self._inherited: list[Client] = []
        # Bumped by `reset()`: a client made meanwhile, from the old settings, is not kept.
        self._generation = 0
        # Closed at exit in every process that has the registry (a forked
        # worker too: its own clients only), by one hook for all of them.
        _registries.add(self)

    def settings(self) -> tuple[ServerConfig, dict[str, Any]]:
        """The config and options, read from the settings on first use."""
        forking.check()  # (an entry point: `configured_servers()`, the health view, `manage.py mcp`)
        with self._lock:
            if self._loaded is None:
                self._loaded = self._source()
            return self._loaded

    def names(self) -> list[str]:
        """The configured servers' names."""
        return list(self.settings()[0])

    def peek(self, name: str) -> Client | None:
        """The client of `name` if this process made one, else None (never connects)."""
        forking.check()
        with self._lock:
            return self._clients.get(name)

    def get(self, name: str) -> Client:
        """The client of server `name`, connected on the first call in this process."""
        while True:
            client = self._get_once(name)
            if client is not None:
                return client

    def warm(self, name: str) -> None:
        """Connect `name` now if this process has no client of it. Unlike
        `get()`, it does not try again when `close()` ran meanwhile: a
        start-up connect must not outlive the close that ended it."""
        self._get_once(name)

    def _get_once(self, name: str) -> Client | None:
        """The client of `name`, made if needed; None when `close()` (or a
        settings reset) ran while it connected: that client, made from the
        old settings, is closed again."""
        forking.check()
        self._close_inherited()
        with self._lock:
            client = self._clients.get(name)
            if client is not None and client.status != "closed":
                return client
        config = self.settings()[0]
        if name not in config:  # nothing is kept for a name that is not configured
            config[name]  # noqa: B018 - raises the config's own error, which names the servers it has
        with self._lock:
            attempt = self._connects.setdefault(name, SharedAttempt())
        return attempt.run(lambda: self._connect(name))

    def _connect(self, name: str) -> Client | None:
        with self._lock:
            client = self._clients.get(name)
            if client is not None and client.status != "closed":
                return client  # another thread made it just before this attempt began
            generation = self._generation
        config, options = self.settings()
        target, options = with_options(config[name], options)
        client = connect(target, **options)
        with self._lock:
            if generation == self._generation:
                self._clients[name] = client
                return client
        client.close()
        return None

    def close(self) -> None:
        """Close every client of this process; the next `get()` connects
        again, from the settings as they are then."""
        self.reload(None)

    def reload(self, source: Callable[[], tuple[ServerConfig, dict[str, Any]]] | None) -> None:
        """Read the settings from `source` from now on (None: the same
        source, read again), closing every client made from the old ones.
        One step under the lock: no `get()` in between connects from the
        old settings and keeps its client."""
        forking.check()
        with self._lock:
            clients = [*self._clients.values(), *self._inherited]
            self._clients, self._inherited = {}, []
            if source is not None:
                self._source = source
            self._loaded = None
            self._generation += 1
        for client in clients:
            try:
                client.close()
            except Exception:  # noqa: BLE001 - one client's failure must not leave the others open
                log.exception("closing an MCP client failed")

    def _close_inherited(self) -> None:
        if not self._inherited:  # read without the lock: the common case, nothing to do
            return
        with self._lock:
            inherited, self._inherited = self._inherited, []
        for client in inherited:
            client.close()

    def _after_fork(self) -> None:
        self._lock = threading.Lock()
        self._connects = {}
        self._inherited = [*self._inherited, *self._clients.values()]
        self._clients = {}


@atexit.register
def _close_at_exit() -> None:
    for clients in list(_registries):
        clients.close()


@forking.in_child
def _after_fork_in_child() -> None:
    for clients in forking.members(_registries):
        clients._after_fork()


def health(clients: Clients, *, start: bool = False) -> tuple[dict[str, Any], int]:
    """The health report of this process's clients and its HTTP status.

    Each configured server: `status` (the client's, or `"unused"` when this
    process made none) and, for a client, a few `stats()` numbers. 200 when
    every client made is ready, 503 otherwise. With `start`, a server never
    used is connected first (a failure shows as `"failed"` with the error's
    type only: messages may quote a server's output). A config that cannot
    be read answers 503 with the error.
    """
    check_flag("start", start)  # a mistake in the site's code, not the servers' health: raised
    try:
        names = clients.names()
    except (ConfigError, TypeError, ValueError) as exc:
        return {"status": "unavailable", "pid": os.getpid(), "error": str(exc), "servers": {}}, 503
    servers: dict[str, dict[str, Any]] = {}
    healthy = True
    for name in names:
        client = clients.peek(name)
        if client is None and start:
            try:
                client = clients.get(name)
            except Exception as exc:  # noqa: BLE001 - any failure to connect is this server's report
                log.warning("health check: cannot connect to MCP server %r", name, exc_info=True)
                servers[name] = {"status": "failed", "error": type(exc).__name__}
                healthy = False
                continue
        if client is None:
            servers[name] = {"status": "unused"}
            continue
        status = client.status
        stats = client.stats()
        servers[name] = {"status": status.value, "requests": stats.requests_total, "timeouts": stats.timeouts,
                         "reconnects": stats.reconnects, "in_flight": stats.in_flight, "queued": stats.queued,
                         "uptime": round(stats.uptime, 3)}
        healthy = healthy and status == "ready"
    return ({"status": "ok" if healthy else "unavailable", "pid": os.getpid(), "servers": servers},
            200 if healthy else 503)
