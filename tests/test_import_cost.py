"""`import mcp_sync` stays light: the HTTP stack (urllib3, requests), the HTTP
transports, auth, JSON Schema and tracing load only when used, while every
public name still resolves. Each check runs in a fresh interpreter, since
this test process has imported everything already."""

import json
import subprocess
import sys

import mcp_sync

# Modules (and their submodules) a stdio-only program must not pay for.
HEAVY = [
    "urllib3", "requests", "jsonschema", "opentelemetry",
    "mcp_sync.auth", "mcp_sync.network",
    "mcp_sync.transports.http", "mcp_sync.transports.sse", "mcp_sync.transports.pool",
    "mcp_sync.transports.http11", "mcp_sync.transports.tunnel", "mcp_sync.transports.decoding",
    "mcp_sync.transports.http_auth",
]


def fresh(code: str) -> object:
    """Run `code` in a new interpreter; it prints one JSON value."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def heavy_loaded_after(code: str) -> list[str]:
    return fresh(f"""
import json, sys
{code}
heavy = {HEAVY!r}
print(json.dumps(sorted(m for m in sys.modules if any(m == h or m.startswith(h + ".") for h in heavy))))
""")  # type: ignore[return-value]


def test_import_loads_nothing_http_or_auth_related():
    assert heavy_loaded_after("import mcp_sync") == []


def test_a_stdio_client_loads_nothing_http_or_auth_related():
    # Not opentelemetry here: when it is installed, a new client asks it
    # whether a provider is configured (tracing.py's documented decision).
    code = """
import mcp_sync
from mcp_sync.testing import demo_server
with mcp_sync.connect(demo_server()) as client:
    assert client.call_tool("echo", {"text": "hi"}).text == "hi"
    assert client.transport_kind == "memory"
"""
    assert [m for m in heavy_loaded_after(code) if not m.startswith("opentelemetry")] == []


def test_lazy_names_resolve_on_use():
    loaded = fresh("""
import json, sys
import mcp_sync
from mcp_sync import HTTP
names = [mcp_sync.HTTP.__name__, mcp_sync.SSE.__name__, mcp_sync.auth.__name__,
         mcp_sync.ClientGroup.__name__, mcp_sync.load_config.__name__]
print(json.dumps([HTTP is mcp_sync.HTTP, names, "urllib3" in sys.modules]))
""")
    assert loaded == [True, ["HTTP", "SSE", "mcp_sync.auth", "ClientGroup", "load_config"], True]


def test_a_url_target_loads_http_only_then():
    loaded = fresh("""
import json, sys
from mcp_sync.transports import resolve_target
before = "mcp_sync.transports.http" in sys.modules
target = resolve_target("http://127.0.0.1:1/mcp", {"headers": {"X-A": "1"}})
print(json.dumps([before, type(target).__name__]))
""")
    assert loaded == [False, "HTTP"]


def test_dir_covers_all():
    assert set(mcp_sync.__all__) <= set(dir(mcp_sync))
    for name in mcp_sync.__all__:
        assert getattr(mcp_sync, name) is not None, name


def test_an_unknown_name_is_an_attribute_error():
    try:
        mcp_sync.NoSuchName  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchName" in str(exc)
    else:
        raise AssertionError("mcp_sync.NoSuchName resolved")
