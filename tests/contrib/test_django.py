"""The Django app (mcp_sync.contrib.django): the system check, the health
view through Django's test client, the `manage.py mcp` command, and the
app served by gunicorn with --preload and three workers."""

from __future__ import annotations

import io
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

django = pytest.importorskip("django")

from django.conf import settings  # noqa: E402
from django.core import checks  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.test import Client as DjangoClient  # noqa: E402
from django.test import override_settings  # noqa: E402
from django.urls import include, path  # noqa: E402

from tests.examples.harness import server_processes, wait_until_gone  # noqa: E402

from .served import check_preloaded  # noqa: E402

# Every client, thread and descriptor a test opens is closed by its end.
pytestmark = pytest.mark.usefixtures("no_leaks")

if not settings.configured:
    settings.configure(SECRET_KEY="test-only-not-secret", ALLOWED_HOSTS=["testserver"], INSTALLED_APPS=[],
                       MIDDLEWARE=[])
    django.setup()

urlpatterns = [
    path("health/mcp", include("mcp_sync.contrib.django.urls")),
    path("health/mcp/deep", __import__("mcp_sync.contrib.django.views", fromlist=["health"]).health,
         {"start": True}),
]


def demo(marker: str) -> dict[str, Any]:
    return {"command": sys.executable, "args": ["-m", "mcp_sync.testing.server", "--name", marker]}


@pytest.fixture
def app() -> Iterator[None]:
    """The app installed and this module's URLs; its clients closed afterwards."""
    with override_settings(INSTALLED_APPS=["mcp_sync.contrib.django"], ROOT_URLCONF=__name__):
        from mcp_sync.contrib.django import close_clients

        try:
            yield
        finally:
            close_clients()


def mcp_messages() -> list[tuple[str, str]]:
    """The system check's messages about MCP: (id, message)."""
    return [(message.id, message.msg) for message in checks.run_checks() if message.id.startswith("mcp_sync.")]


# -- the system check ---------------------------------------------------------------


def test_check_passes_a_good_config(app: None, marker: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_TEST_KEY", "k")
    servers = {"demo": demo(marker), "web": {"url": "http://127.0.0.1:9/mcp", "headers": {"K": "${MCP_TEST_KEY}"}}}
    with override_settings(MCP_SERVERS=servers, MCP_CLIENT_OPTIONS={"timeout": 5, "verify": False}):
        assert mcp_messages() == []
    assert server_processes(marker) == {}, "the check started a server"


@pytest.mark.parametrize(("configured", "expected_id", "words"), [
    ({"MCP_SERVERS": {}, "MCP_CONFIG": "mcp.json"}, "mcp_sync.E001", "both"),
    ({"MCP_SERVERS": ["demo"]}, "mcp_sync.E002", "must be a mapping"),
    ({"MCP_SERVERS": {"files": {"args": ["x"]}}}, "mcp_sync.E002", "neither \"command\" nor \"url\""),
    ({"MCP_SERVERS": {"files": {"command": "x", "type": "carrier-pigeon"}}}, "mcp_sync.E002", "unknown type"),
    ({"MCP_CONFIG": "/nonexistent/mcp.json"}, "mcp_sync.E002", "no config file"),
    ({"MCP_SERVERS": {"w": {"url": "http://127.0.0.1:9/mcp", "headers": {"K": "${env:MCP_TEST_UNSET_VAR}"}}}},
     "mcp_sync.E003", "MCP_TEST_UNSET_VAR is not set"),
    ({"MCP_SERVERS": {"d": {"command": "x"}}, "MCP_CLIENT_OPTIONS": {"timout": 5}}, "mcp_sync.E004", "timout"),
    ({"MCP_SERVERS": {"d": {"command": "x"}}, "MCP_CLIENT_OPTIONS": {"timeout": -1}}, "mcp_sync.E004", "positive"),
    ({}, "mcp_sync.W001", "no MCP servers configured"),
    ({"MCP_SERVERS": {"d": {"command": "x", "arg": ["typo"]}}}, "mcp_sync.W002", "arg"),
])
def test_check_reports_each_problem(app: None, monkeypatch: pytest.MonkeyPatch, configured: dict[str, Any],
                                    expected_id: str, words: str) -> None:
    monkeypatch.delenv("MCP_TEST_UNSET_VAR", raising=False)
    with override_settings(**configured):
        found = mcp_messages()
    assert [id for id, _ in found] == [expected_id], found
    assert words in found[0][1]


def test_check_reads_a_config_file(app: None, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MCP_TEST_UNSET_VAR", raising=False)
    config = tmp_path / "mcp.json"
    config.write_text('{"mcpServers": {"demo": {"command": "python"}, "bad": {"url": "${MCP_TEST_UNSET_VAR}"}}}')
    with override_settings(MCP_CONFIG=str(config)):
        found = mcp_messages()
    assert [id for id, _ in found] == ["mcp_sync.E003"] and "'bad'" in found[0][1]


# -- the health view ----------------------------------------------------------------


def test_health_reports_used_clients_and_starts_nothing(app: None, marker: str) -> None:
    from mcp_sync.contrib.django import get_client

    with override_settings(MCP_SERVERS={"demo": demo(marker), "other": demo(marker + "-other")}):
        web = DjangoClient()
        response = web.get("/health/mcp")
        assert response.status_code == 200
        assert response.json()["servers"] == {"demo": {"status": "unused"}, "other": {"status": "unused"}}
        assert server_processes(marker) == {}, "the health view started a server"

        client = get_client("demo")
        assert get_client("demo") is client  # one shared client
        assert client.call_tool("echo", {"text": "hi"}).text == "hi"
        body = web.get("/health/mcp").json()
        assert body["status"] == "ok"
        assert body["servers"]["demo"]["status"] == "ready" and body["servers"]["demo"]["requests"] == 1
        assert body["servers"]["other"] == {"status": "unused"}

        client.close()  # not ready any more: 503, and the next use makes a new client
        response = web.get("/health/mcp")
        assert response.status_code == 503
        assert response.json()["servers"]["demo"]["status"] == "closed"
        assert get_client("demo") is not client
        assert web.get("/health/mcp").status_code == 200


def test_health_starts_servers_only_when_asked(app: None, marker: str) -> None:
    broken = {"command": sys.executable, "args": ["-c", "raise SystemExit(3)", marker]}
    with override_settings(MCP_SERVERS={"demo": demo(marker)}):
        response = DjangoClient().get("/health/mcp/deep")
        assert response.status_code == 200
        assert response.json()["servers"]["demo"]["status"] == "ready"
        assert len(server_processes(marker)) == 1
    with override_settings(MCP_SERVERS={"demo": demo(marker), "broken": broken}):
        response = DjangoClient().get("/health/mcp/deep")
        assert response.status_code == 503
        body = response.json()
        assert body["status"] == "unavailable" and body["servers"]["demo"]["status"] == "ready"
        assert body["servers"]["broken"]["status"] == "failed" and body["servers"]["broken"]["error"]


def test_a_start_that_is_not_a_bool_is_a_mistake_in_the_url_pattern(app: None, marker: str) -> None:
    """`{"start": "false"}` would have started every server on each check."""
    from django.test import RequestFactory

    from mcp_sync.contrib.django.views import health

    with override_settings(MCP_SERVERS={"demo": demo(marker)}):
        with pytest.raises(TypeError, match="start must be True or False, not 'false'"):
            health(RequestFactory().get("/health/mcp"), start="false")  # type: ignore[arg-type]
        assert server_processes(marker) == {}


def test_changing_the_settings_closes_the_clients(app: None, marker: str) -> None:
    from mcp_sync.contrib.django import get_client

    with override_settings(MCP_SERVERS={"demo": demo(marker)}):
        client = get_client("demo")
        assert len(server_processes(marker)) == 1
    assert client.status == "closed"
    assert wait_until_gone(marker) == {}


def test_an_unknown_server_or_missing_variable_is_a_config_error(app: None, marker: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import mcp_sync
    from mcp_sync.contrib.django import get_client

    monkeypatch.delenv("MCP_TEST_UNSET_VAR", raising=False)
    servers = {"demo": demo(marker), "w": {"url": "http://127.0.0.1:9/mcp?k=${MCP_TEST_UNSET_VAR}"}}
    with override_settings(MCP_SERVERS=servers):
        with pytest.raises(mcp_sync.ConfigError, match="no server named 'nope'"):
            get_client("nope")
        with pytest.raises(mcp_sync.ConfigError, match="MCP_TEST_UNSET_VAR is not set"):
            get_client("w")
    with override_settings(MCP_SERVERS=servers, MCP_CONFIG="mcp.json"), \
            pytest.raises(mcp_sync.ConfigError, match="not both"):
        get_client("demo")
    assert server_processes(marker) == {}


# -- manage.py mcp ------------------------------------------------------------------


def run_mcp(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("mcp", *args, stdout=out, stderr=err)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


def test_management_command_reuses_the_cli(app: None, marker: str) -> None:
    with override_settings(MCP_SERVERS={"demo": demo(marker)}, MCP_CLIENT_OPTIONS={"timeout": 20}):
        # One server configured: --server may be left out.
        assert run_mcp("call", "echo", "text=hello") == (0, "hello\n", "")
        code, out, _ = run_mcp("tools", "--json")
        assert code == 0 and "echo" in {tool["name"] for tool in __import__("json").loads(out)}
        code, _, err = run_mcp("call", "fail", "message=nope")  # a tool's error result: status 1
        assert code == 1 and "nope" in err
    servers = {"demo": demo(marker), "web": {"url": "http://127.0.0.1:9/mcp", "headers": {"K": "${SECRET_X}"}}}
    with override_settings(MCP_SERVERS=servers):
        code, _, err = run_mcp("tools")
        assert code == 2 and "--server NAME" in err and "demo, web" in err
        assert run_mcp("call", "add", "a=2", "b=3", "--server", "demo")[:2] == (0, "5\n")
        code, out, _ = run_mcp("servers")
        assert code == 0
        assert out.splitlines()[0].split()[:2] == ["demo", "stdio"]
        assert "http://127.0.0.1:9/mcp  (headers: K)" in out.splitlines()[1]
    assert wait_until_gone(marker) == {}, "the command left a server running"


def test_management_command_options_and_typos(app: None, marker: str) -> None:
    # MCP_CLIENT_OPTIONS' timeout applies unless --timeout is typed (the
    # CLI's default does not override it); an abbreviated option is not
    # taken for another (`--ur` would aim the settings' options elsewhere).
    with override_settings(MCP_SERVERS={"demo": demo(marker)}, MCP_CLIENT_OPTIONS={"timeout": 0.5}):
        code, _, err = run_mcp("call", "sleep", "seconds=3")
        assert code == 1 and "timed out" in err, err
        assert run_mcp("call", "sleep", "seconds=1", "--timeout", "20")[:2] == (0, "slept\n")
        code, _, err = run_mcp("tools", "--ur", "http://127.0.0.1:9/mcp")
        assert code == 2 and "unrecognized arguments: --ur" in err, err
    assert wait_until_gone(marker) == {}, "the command left a server running"


def test_management_command_applies_http_options_to_the_url_servers_only(app: None, marker: str) -> None:
    # MCP_CLIENT_OPTIONS' HTTP options (headers, verify, ...) go with the
    # servers that have a URL, as get_client() applies them: a program takes
    # none, and a URL server gets them on its target (connect() refuses them
    # next to a target object). Before, every command failed with status 2.
    from mcp_sync.testing import HTTPServer, demo_server

    seen: list[str | None] = []

    def gate(request: Any) -> None:
        seen.append(request.headers.get("X-Team"))

    options = {"timeout": 20, "headers": {"X-Team": "blue"}, "verify": False}
    with HTTPServer(demo_server(), gate=gate) as http:
        with override_settings(MCP_SERVERS={"demo": demo(marker), "web": {"url": http.url}},
                               MCP_CLIENT_OPTIONS=options):
            assert run_mcp("call", "echo", "text=hi", "--server", "demo") == (0, "hi\n", "")
            assert run_mcp("call", "echo", "text=hi", "--server", "web") == (0, "hi\n", "")
    assert seen and set(seen) == {"blue"}, seen
    assert wait_until_gone(marker) == {}, "the command left a server running"


@pytest.mark.parametrize("servers", [{1: {"command": "x"}}, {("a", "b"): {"command": "x"}}])
def test_a_server_name_that_is_not_a_string_is_reported_not_raised(app: None, servers: dict[Any, Any]) -> None:
    # The system check reports every problem as a message; a name that is
    # not a string crashed it (a TypeError out of `manage.py check`) and made
    # get_client() and `manage.py mcp` fail with a message about str.join.
    import mcp_sync
    from mcp_sync.contrib.django import get_client

    with override_settings(MCP_SERVERS=servers):
        found = mcp_messages()
        assert [id for id, _ in found] == ["mcp_sync.E002"], found
        assert "settings.MCP_SERVERS" in found[0][1] and "must be strings" in found[0][1], found
        with pytest.raises(mcp_sync.ConfigError, match="settings.MCP_SERVERS"):
            get_client("x")
        code, _, err = run_mcp("servers")
        assert code == 1 and "settings.MCP_SERVERS" in err, err


def test_wrong_client_options_name_the_setting_once(app: None) -> None:
    from mcp_sync.contrib.django import get_client

    with override_settings(MCP_SERVERS={"d": {"command": "x"}}, MCP_CLIENT_OPTIONS="timeout=3"):
        assert mcp_messages() == [("mcp_sync.E004", "settings.MCP_CLIENT_OPTIONS must be a mapping of connect() "
                                                    "options, not str")]
    with override_settings(MCP_SERVERS={"d": {"command": "x"}}, MCP_CLIENT_OPTIONS={"timout": 3}):
        with pytest.raises(TypeError, match=r"^settings\.MCP_CLIENT_OPTIONS: .*timout"):
            get_client("d")
        code, _, err = run_mcp("servers")
        assert code == 1 and "settings.MCP_CLIENT_OPTIONS: " in err and "timout" in err, err


# -- import cost and gunicorn -------------------------------------------------------


def test_importing_mcp_sync_imports_no_framework() -> None:
    code = ("import sys, mcp_sync, mcp_sync.contrib; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('django', 'flask')))")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "[]\n"


def test_gunicorn_preload_three_workers(marker: str) -> None:
    check_preloaded("tests.contrib.served_django", marker, workers=3, label="django contrib --preload --workers 3")


def test_a_header_typed_on_the_command_line_wins_over_the_settings_headers(app: None) -> None:
    # Precedence, lowest first: the entry's headers, MCP_CLIENT_OPTIONS'
    # headers, `--header` (a name matched case-insensitively). Before, the
    # settings' headers were applied last and replaced the typed one.
    from mcp_sync.testing import HTTPServer, demo_server

    seen: list[tuple[str | None, str | None, str | None]] = []

    def gate(request: Any) -> None:
        seen.append((request.headers.get("X-Team"), request.headers.get("X-Entry"),
                     request.headers.get("X-Settings")))

    options = {"timeout": 20, "headers": {"X-Team": "blue", "X-Settings": "kept"}}
    with HTTPServer(demo_server(), gate=gate) as http:
        servers = {"web": {"url": http.url, "headers": {"X-Entry": "entry", "X-Team": "entry"}}}
        with override_settings(MCP_SERVERS=servers, MCP_CLIENT_OPTIONS=options):
            assert run_mcp("call", "echo", "text=hi", "--header", "x-team: red") == (0, "hi\n", "")
            assert seen and set(seen) == {("red", "entry", "kept")}, seen
            seen.clear()
            assert run_mcp("call", "echo", "text=hi") == (0, "hi\n", "")  # untyped: the settings' value
            assert seen and set(seen) == {("blue", "entry", "kept")}, seen
