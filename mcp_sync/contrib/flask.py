"""Flask integration: MCP servers configured in `app.config`, one shared
client per server in each worker process, and a health blueprint.

    mcp = MCP()

    def create_app():
        app = Flask(__name__)
        app.config["MCP_SERVERS"] = {"demo": {"command": "python", "args": ["-m", "mcp_sync.testing"]}}
        mcp.init_app(app)
        app.register_blueprint(mcp.health_blueprint(), url_prefix="/health")
        return app

`MCP_SERVERS` is an `mcpServers` object (as in `.mcp.json`, `${env:NAME}`
and `${NAME}` taken from the environment when a server is first used);
`MCP_CONFIG` is instead the path of such a file. `MCP_CLIENT_OPTIONS`
(optional) holds keyword arguments for `mcp_sync.connect()`. See
docs/flask.md.
"""

from __future__ import annotations

from flask import Blueprint, Flask, current_app, has_app_context, jsonify
from flask.typing import ResponseReturnValue

from ..client import Client
from ..options import check_flag
from . import _clients

__all__ = ["MCP"]

#: Where an app keeps its clients: `app.extensions[EXTENSION]`.
EXTENSION = "mcp_sync"


class MCP:
    """The Flask extension: `init_app(app)` reads the app's MCP settings,
    `client(name)` gives the process's shared client of a server.

    Each app that `init_app()` saw has its own clients, in
    `app.extensions["mcp_sync"]`; `client()` uses the current app's (or,
    outside an app context, the app given to the constructor). In each
    process a server's client is made on first use (a gunicorn worker
    connects on its own, even after `--preload` made one in the master),
    shared by all threads and closed at interpreter exit.

    Args:
        app: The app to initialise now; or None, for `init_app()` later
            (the application factory pattern).

    Raises:
        ConfigError: From `init_app()`, for settings that cannot work.

    Example::

        mcp = MCP(app)

        @app.get("/echo")
        def echo():
            return {"text": mcp.client("demo").call_tool("echo", {"text": request.args["text"]}).text}
    """

    def __init__(self, app: Flask | None = None) -> None:
        self._app = app
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask) -> None:
        """Read `MCP_SERVERS` or `MCP_CONFIG`, and `MCP_CLIENT_OPTIONS`, from
        `app.config`. Nothing connects yet; an entry's environment variables
        are read when its server is first used. Called again for the same
        app (its settings changed), it closes the clients made from the old
        settings; the next `client()` connects from the new ones.

        Args:
            app: The Flask app.

        Raises:
            ConfigError: Both or neither setting, a value of the wrong kind,
                a config file missing or malformed, a malformed entry.
            TypeError: `MCP_CLIENT_OPTIONS` with an unknown option.
            ValueError: `MCP_CLIENT_OPTIONS` with a value out of range.

        Example::

            app.config["MCP_CONFIG"] = "mcp.json"
            mcp.init_app(app)
        """
        # Read now, so that a wrong setting fails at start, not at the first request.
        loaded = _clients.read_settings(app.config.get("MCP_SERVERS"), app.config.get("MCP_CONFIG"),
                                        app.config.get("MCP_CLIENT_OPTIONS"), prefix="app.config.")
        # One registry per app for its life: called again (a settings
        # reload), the app's registry takes the new settings and closes the
        # clients of the old ones, which a replaced registry would have left
        # running for as long as anything held them.
        clients = app.extensions.get(EXTENSION)
        if isinstance(clients, _clients.Clients):
            clients.reload(lambda: loaded)
        else:
            app.extensions[EXTENSION] = _clients.Clients(lambda: loaded)

    def client(self, name: str) -> Client:
        """The shared client of the configured server `name` in this process.

        Args:
            name: A server of the app's `MCP_SERVERS` (or `MCP_CONFIG` file).

        Returns:
            The connected client; do not close it yourself.

        Raises:
            ConfigError: `name` is not configured (also a `KeyError`), or its
                entry cannot be used (a missing environment variable).
            McpError: The server could not be started or reached; the next
                call tries again.
            RuntimeError: No app: outside an app context, with none given to
                the constructor, or an app `init_app()` did not see.

        Example::

            text = mcp.client("demo").call_tool("echo", {"text": "hi"}).text
        """
        return self._clients().get(name)

    def close(self) -> None:
        """Close the current app's clients in this process (also done at
        interpreter exit); the next `client()` connects again.

        Returns:
            None.

        Raises:
            RuntimeError: No app (see `client()`).

        Example::

            mcp.close()  # in a test's teardown
        """
        self._clients().close()

    def health_blueprint(self, *, path: str = "/mcp", start: bool = False,
                         name: str = "mcp_health") -> Blueprint:
        """A blueprint with one GET view at `path`: this worker's MCP clients as JSON.

        200 when every client the process made is ready, 503 otherwise. The
        body: `status` (`"ok"` or `"unavailable"`), `pid`, and `servers`: for
        each configured server its client's `status` (or `"unused"`) with
        `requests`, `timeouts`, `reconnects`, `in_flight`, `queued` and
        `uptime` from `client.stats()`.

        Args:
            path: The view's path in the blueprint.
            start: Connect to the servers this process has not used yet
                (by default they are reported `"unused"`, never started).
            name: The blueprint's name (two blueprints need two names).

        Returns:
            The blueprint, to register with `url_prefix` as you like.

        Its view raises `RuntimeError` for an app that `init_app()` did not see.

        Example::

            app.register_blueprint(mcp.health_blueprint(), url_prefix="/health")   # GET /health/mcp
        """
        check_flag("start", start)
        blueprint = Blueprint(name, __name__)

        # The view refers to no `MCP`: registered on the app, it would keep
        # the extension, which keeps the app given to `MCP(app)`, and the
        # cycle would leave a dropped app's clients (threads, server
        # processes) running until the garbage collector ran. A request
        # always has its app: `current_app` is the one to report on.
        @blueprint.get(path)
        def health() -> ResponseReturnValue:
            body, status = _clients.health(_app_clients(current_app), start=start)
            return jsonify(body), status

        return blueprint

    def _clients(self) -> _clients.Clients:
        app: Flask | None = current_app if has_app_context() else self._app
        if app is None:
            raise RuntimeError("no Flask app: call MCP(app), or use the client inside an app or request context")
        return _app_clients(app)


def _app_clients(app: Flask) -> _clients.Clients:
    """The registry `init_app()` put in `app`."""
    clients = app.extensions.get(EXTENSION)
    if not isinstance(clients, _clients.Clients):
        raise RuntimeError(f"MCP.init_app() was not called for the app {app.name!r}")
    return clients
