"""Celery integration: MCP servers configured on the Celery app, one shared
client per server in each worker process, made when the process starts and
closed when it ends.

    app = Celery("jobs", broker="redis://127.0.0.1:6379/0")
    app.conf.mcp_servers = {"demo": {"command": "python", "args": ["-m", "mcp_sync.testing"]}}
    mcp = MCP(app)

    @app.task
    def echo(text):
        return mcp.client("demo").call_tool("echo", {"text": text}).text

`mcp_servers` is an `mcpServers` object (as in `.mcp.json`, `${env:NAME}`
and `${NAME}` taken from the environment when a server is first used);
`mcp_config` is instead the path of such a file; `mcp_client_options`
(optional) holds keyword arguments for `mcp_sync.connect()`. A Django
project that configures Celery from its settings with
`namespace="CELERY"` writes them `CELERY_MCP_SERVERS` and so on. See
docs/celery.md.

The worker's lifecycle, through Celery's signals:

- `worker_init` (the worker's main process, before its pool starts): the
  settings are checked, each problem logged; nothing connects.
- `worker_process_init` (each prefork child, as it starts): the child's
  clients start connecting on a short-lived thread, so that the child
  answers the pool within `worker_proc_alive_timeout` however slow a server
  is to start. A task that needs a client meanwhile waits for that one.
- `worker_process_shutdown` (each prefork child, as it ends: at shutdown or
  when `max_tasks_per_child` recycles it): the child's clients are closed
  and their server processes stopped. A prefork child ends with
  `os._exit()`, so `atexit` would never run there.
- `worker_shutdown` (the main process): its clients are closed; with the
  `solo` and `threads` pools the tasks run there, sharing them.

Importing this module imports Celery's signals only.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

from celery import Celery, signals  # type: ignore[import-untyped,unused-ignore]

from ..client import Client
from ..config import ServerConfig
from ..options import check_flag
from . import _clients

__all__ = ["MCP"]

log = logging.getLogger("mcp_sync.contrib.celery")

#: How long a closing process waits for its start-up connects to finish.
#: Each connect is bounded by its own timeout; this only stops a slow one
#: from holding up the child's exit for longer.
WARMUP_JOIN = 30.0


class MCP:
    """The Celery integration: `client(name)` gives the worker process's
    shared client of a configured server.

    The settings are read from the app's configuration (`mcp_servers` or
    `mcp_config`, and `mcp_client_options`) on first use, unless given here.
    Each worker process has its own clients, one per server, shared by every
    task it runs (with the `threads` pool, by all its threads at once).

    Args:
        app: The Celery app whose workers use the servers.
        servers: An `mcpServers` object, instead of `app.conf.mcp_servers`.
        config: A config file's path, instead of `app.conf.mcp_config`.
        options: Keyword arguments for `mcp_sync.connect()`, instead of
            `app.conf.mcp_client_options`.
        connect_at_start: Connect every configured server when a prefork
            child starts (on a thread of its own), rather than at its first
            task that asks for it.

    Raises:
        TypeError: `app` is not a Celery app.

    Example::

        mcp = MCP(app, servers={"search": {"url": "https://mcp.example.com/mcp"}})

        @app.task(autoretry_for=(mcp_sync.ServerUnavailable,), retry_backoff=True)
        def search(query):
            return mcp.client("search").call_tool("search", {"q": query}).structured
    """

    def __init__(self, app: Celery, *, servers: Mapping[str, Any] | None = None, config: Any = None,
                 options: Mapping[str, Any] | None = None, connect_at_start: bool = True) -> None:
        if not isinstance(app, Celery):
            raise TypeError(f"MCP() takes a Celery app, not {type(app).__name__}")
        check_flag("connect_at_start", connect_at_start)
        self.app = app
        self._given = (servers, config, options)
        self._connect_at_start = connect_at_start
        self._clients = _clients.Clients(self._settings)
        # Set in the worker's main process when this app's worker starts;
        # inherited by its prefork children. Another app's worker in the
        # same process (rare) starts nothing of this one's.
        self._in_worker = False
        # The start-up connects of this process, joined before it closes;
        # `_closing` stops them between servers. Set at process start on the
        # process's main thread, taken by `close()` on any thread.
        self._warmup: threading.Thread | None = None
        self._closing = threading.Event()
        # Celery's signals hold weak references to bound methods by default:
        # the receivers live as long as this object.
        signals.worker_init.connect(self._on_worker_init, weak=True)
        signals.worker_process_init.connect(self._on_process_init, weak=True)
        signals.worker_process_shutdown.connect(self._on_process_shutdown, weak=True)
        signals.worker_shutdown.connect(self._on_worker_shutdown, weak=True)

    def _raw(self) -> tuple[Any, Any, Any, _clients.Names]:
        """The three values, and the name of each where it was read: messages
        must send one to the place the wrong value is (a value given to
        `MCP()` is not fixed in `app.conf`)."""
        servers, config, options = self._given
        conf = self.app.conf
        names = ["MCP(servers=...)", "MCP(config=...)", "MCP(options=...)"]
        if servers is None and config is None:
            servers, config = conf.get("mcp_servers"), conf.get("mcp_config")
            names[:2] = _clients.setting_names("app.conf.", lower=True)[:2]
        if options is None:
            options = conf.get("mcp_client_options")
            names[2] = _clients.setting_names("app.conf.", lower=True)[2]
        return servers, config, options, (names[0], names[1], names[2])

    def _settings(self) -> tuple[ServerConfig, dict[str, Any]]:
        servers, config, options, names = self._raw()
        return _clients.read_settings(servers, config, options, names=names)

    def client(self, name: str) -> Client:
        """The shared client of the configured server `name` in this process.

        Args:
            name: A server of `mcp_servers` (or of the `mcp_config` file).

        Returns:
            The connected client, shared by the process's tasks; do not
            close it yourself.

        Raises:
            ConfigError: The settings are missing or wrong, `name` is not
                configured (also a `KeyError`), or its entry cannot be used
                (a missing environment variable).
            McpError: The server could not be started or reached; the next
                call tries again (a task may retry on it).

        Example::

            @app.task
            def add(a, b):
                return mcp.client("calc").call_tool("add", {"a": a, "b": b}).structured["result"]
        """
        return self._clients.get(name)

    def problems(self) -> list[str]:
        """What is wrong with the settings, found without connecting (the
        checks of Django's `manage.py check`): one line each, warnings
        marked. The worker logs them when it starts.

        Returns:
            The problems; empty when the settings can work.

        Example::

            assert not mcp.problems(), mcp.problems()   # in a deployment check
        """
        servers, config, options, names = self._raw()
        found = _clients.problems(servers, config, options, names=names)
        return [("warning: " if not problem.error else "") + problem.msg
                + (f" ({problem.hint})" if problem.hint else "") for problem in found]

    def close(self) -> None:
        """Close this process's clients (done when a worker process ends);
        the next `client()` reads the settings again and connects again. A
        client that fails to close is logged, and the others are closed.

        Returns:
            None.

        Example::

            mcp.close()  # in a test's teardown, with `task_always_eager`
        """
        warmup, self._warmup = self._warmup, None
        if warmup is not None:
            self._closing.set()
            warmup.join(WARMUP_JOIN)
        self._clients.close()

    # -- the worker's signals -------------------------------------------------
    # Each receiver runs in the process and thread Celery sends it from, and
    # never raises: Celery would only log it.

    def _on_worker_init(self, sender: Any = None, **_: Any) -> None:
        if getattr(sender, "app", None) is not self.app:
            return
        self._in_worker = True
        for problem in self.problems():
            (log.warning if problem.startswith("warning: ") else log.error)("MCP settings: %s", problem)

    def _on_process_init(self, **_: Any) -> None:
        if not (self._in_worker and self._connect_at_start):
            return
        try:
            names = self._clients.names()
        except Exception:  # noqa: BLE001 - logged at worker_init already; a task's client() raises it
            return
        self._closing.clear()
        self._warmup = threading.Thread(target=self._connect_all, args=(names,), name="mcp-sync-celery-start",
                                        daemon=True)
        self._warmup.start()

    def _connect_all(self, names: list[str]) -> None:
        for name in names:
            if self._closing.is_set():
                return  # the process is ending: connect nothing more
            try:
                self._clients.warm(name)
            except Exception:  # noqa: BLE001 - the first task that uses it tries again, and raises
                log.warning("could not connect to MCP server %r at worker process start", name, exc_info=True)

    def _on_process_shutdown(self, **_: Any) -> None:
        self.close()

    def _on_worker_shutdown(self, sender: Any = None, **_: Any) -> None:
        self.close()
