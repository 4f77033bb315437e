"""The Flask extension (mcp_sync.contrib.flask): settings, one client per
server per process, the health blueprint, and the app served by gunicorn
with --preload and two workers."""

from __future__ import annotations

import gc
import sys
import threading
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("flask")

from flask import Flask  # noqa: E402

import mcp_sync  # noqa: E402
from mcp_sync.contrib.flask import MCP  # noqa: E402
from tests.examples.harness import server_processes, wait_until_gone  # noqa: E402

from .served import check_preloaded  # noqa: E402

# Every client, thread and descriptor a test opens is closed by its end.
pytestmark = pytest.mark.usefixtures("no_leaks")

def demo(marker: str) -> dict[str, Any]:
    return {"command": sys.executable, "args": ["-m", "mcp_sync.testing.server", "--name", marker]}


@pytest.fixture
def apps() -> Iterator[list[tuple[MCP, Flask]]]:
    """A list to put (extension, app) pairs in; their clients are closed afterwards."""
    made: list[tuple[MCP, Flask]] = []
    yield made
    for mcp, app in made:
        with app.app_context():
            mcp.close()


def make(apps: list[tuple[MCP, Flask]], mcp: MCP | None = None, **config: Any) -> tuple[MCP, Flask]:
    app = Flask("test")
    app.config.update(config)
    if mcp is None:
        mcp = MCP(app)
    else:
        mcp.init_app(app)
    app.register_blueprint(mcp.health_blueprint(), url_prefix="/health")
    app.register_blueprint(mcp.health_blueprint(start=True, name="deep"), url_prefix="/health/deep")
    apps.append((mcp, app))
    return mcp, app


def test_wrong_settings_fail_at_init_app(tmp_path: Any) -> None:
    with pytest.raises(mcp_sync.ConfigError, match="not both"):
        MCP().init_app(_app(MCP_SERVERS={}, MCP_CONFIG="mcp.json"))
    with pytest.raises(mcp_sync.ConfigError, match="no MCP servers configured"):
        MCP(_app())
    with pytest.raises(mcp_sync.ConfigError, match="neither \"command\" nor \"url\""):
        MCP(_app(MCP_SERVERS={"files": {"args": []}}))
    with pytest.raises(mcp_sync.ConfigError, match="no config file"):
        MCP(_app(MCP_CONFIG=str(tmp_path / "missing.json")))
    with pytest.raises(TypeError, match="timout"):
        MCP(_app(MCP_SERVERS={}, MCP_CLIENT_OPTIONS={"timout": 3}))
    # A truthy string would have started every server on each health check.
    with pytest.raises(TypeError, match="start must be True or False, not 'false'"):
        MCP().health_blueprint(start="false")  # type: ignore[arg-type]


def _app(**config: Any) -> Flask:
    app = Flask("t")
    app.config.update(config)
    return app


def test_client_is_shared_and_health_starts_nothing(apps: list[tuple[MCP, Flask]], marker: str) -> None:
    mcp, app = make(apps, MCP_SERVERS={"demo": demo(marker), "other": demo(marker + "-other")},
                    MCP_CLIENT_OPTIONS={"timeout": 20})
    web = app.test_client()
    response = web.get("/health/mcp")
    assert response.status_code == 200
    assert response.json == {"status": "ok", "pid": response.json["pid"],
                             "servers": {"demo": {"status": "unused"}, "other": {"status": "unused"}}}
    assert server_processes(marker) == {}, "the health view started a server"

    client = mcp.client("demo")  # outside a request: the app given to MCP(app)
    with app.test_request_context():
        assert mcp.client("demo") is client
    assert client.options.timeouts.request == 20  # MCP_CLIENT_OPTIONS applied
    assert client.call_tool("echo", {"text": "hi"}).text == "hi"
    servers = web.get("/health/mcp").json["servers"]
    assert servers["demo"]["status"] == "ready" and servers["demo"]["requests"] == 1
    assert servers["other"] == {"status": "unused"}

    client.close()
    response = web.get("/health/mcp")
    assert response.status_code == 503 and response.json["servers"]["demo"]["status"] == "closed"
    assert mcp.client("demo") is not client
    assert web.get("/health/mcp").status_code == 200


def test_deep_health_starts_servers_and_reports_failures(apps: list[tuple[MCP, Flask]], marker: str) -> None:
    broken = {"command": sys.executable, "args": ["-c", "raise SystemExit(3)", marker]}
    _, app = make(apps, MCP_SERVERS={"demo": demo(marker), "broken": broken})
    response = app.test_client().get("/health/deep/mcp")
    assert response.status_code == 503
    servers = response.json["servers"]
    assert servers["demo"]["status"] == "ready" and servers["broken"]["status"] == "failed"
    assert len(server_processes(marker)) == 1


def test_factory_apps_have_their_own_clients(apps: list[tuple[MCP, Flask]], marker: str) -> None:
    mcp = MCP()
    _, first = make(apps, mcp, MCP_SERVERS={"demo": demo(marker)})
    _, second = make(apps, mcp, MCP_SERVERS={"demo": demo(marker)})
    with pytest.raises(RuntimeError, match="no Flask app"):
        mcp.client("demo")
    with first.app_context():
        one = mcp.client("demo")
    with second.app_context():
        two = mcp.client("demo")
    with first.app_context():
        assert mcp.client("demo") is one
    assert one is not two and len(server_processes(marker)) == 2
    with pytest.raises(RuntimeError, match="init_app"), Flask("unknown").app_context():
        mcp.client("demo")
    for app in (first, second):
        with app.app_context():
            mcp.close()
    assert one.status == "closed" and two.status == "closed"
    assert wait_until_gone(marker) == {}


def test_init_app_again_closes_the_clients_of_the_settings_it_replaces(apps: list[tuple[MCP, Flask]],
                                                                     marker: str) -> None:
    # A settings reload (init_app() again on the same app) starts from the
    # new settings; the clients of the old ones were left open, their server
    # processes running, for as long as anything held them.
    mcp, app = make(apps, MCP_SERVERS={"demo": demo(marker)})
    old = mcp.client("demo")
    assert len(server_processes(marker)) == 1
    app.config["MCP_SERVERS"] = {"demo": demo(marker + "-new")}
    mcp.init_app(app)
    assert old.status == "closed"
    assert wait_until_gone(marker) == {}, "the client of the replaced settings was left running"
    new = mcp.client("demo")
    assert new is not old and new.call_tool("echo", {"text": "hi"}).text == "hi"
    assert len(server_processes(marker + "-new")) == 1


@pytest.mark.parametrize("servers", [{1: {"command": "x"}}, {None: {"command": "x"}}])
def test_a_server_name_that_is_not_a_string_fails_at_init_app(servers: dict[Any, Any]) -> None:
    # Found at start, naming the setting, rather than as a TypeError about
    # str.join at the first client() of any name.
    with pytest.raises(mcp_sync.ConfigError, match=r"app\.config\.MCP_SERVERS: server names must be strings"):
        MCP(_app(MCP_SERVERS=servers))


@pytest.mark.parametrize(("options", "error", "words"), [
    ({"timout": 3}, TypeError, "timout"),
    ({"timeout": -1}, ValueError, "positive"),
    ({"verify": 3}, TypeError, "verify"),
])
def test_a_wrong_client_option_names_the_setting(options: dict[str, Any], error: type[Exception], words: str) -> None:
    # Raised at start-up, far from the settings: connect()'s words alone
    # ("unexpected keyword argument 'timout'") did not say where to look.
    with pytest.raises(error, match=r"^app\.config\.MCP_CLIENT_OPTIONS: .*" + words):
        MCP(_app(MCP_SERVERS={}, MCP_CLIENT_OPTIONS=options))


def test_gunicorn_preload_two_workers(marker: str) -> None:
    check_preloaded("tests.contrib.served_flask:app", marker, workers=2, label="flask contrib --preload --workers 2")


def test_a_dropped_app_closes_its_clients_without_the_garbage_collector(marker: str) -> None:
    # `MCP(app)` keeps the app (for `client()` outside an app context); the
    # app must not keep the extension in turn (through its health view), or
    # the two form a cycle that only the collector frees, and the app's
    # clients, their threads and server processes live on until it runs.
    before = set(threading.enumerate())
    gc.disable()  # (a collection would free the cycle, and hide it)
    try:
        app = Flask("dropped")
        app.config["MCP_SERVERS"] = {"demo": demo(marker)}
        mcp = MCP(app)
        app.register_blueprint(mcp.health_blueprint(), url_prefix="/health")
        with app.app_context():
            client = mcp.client("demo")
            assert client.call_tool("echo", {"text": "hi"}).text == "hi"
        dropped_app, dropped_client = weakref.ref(app), weakref.ref(client)
        del app, mcp, client
        assert dropped_app() is None, "the app is in a reference cycle"
        # Its client went with it: its finalizer closes it (on a thread of its own).
        assert dropped_client() is None
    finally:
        gc.enable()
    for thread in set(threading.enumerate()) - before:
        thread.join(10)
        assert not thread.is_alive(), thread
    assert wait_until_gone(marker) == {}, "the dropped app's server process is still running"
