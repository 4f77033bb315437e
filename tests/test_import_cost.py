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
    "mcp_sync.auth", "mcp_sync.transports.http_network",
    "mcp_sync.transports.http", "mcp_sync.transports.http_target", "mcp_sync.transports.sse", "mcp_sync.transports.pool",
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


def test_the_test_server_package_loads_on_first_use():
    # As the reference's examples write it: no `import mcp_sync.testing`.
    loaded = fresh("""
import json, sys
import mcp_sync
before = "mcp_sync.testing" in sys.modules
with mcp_sync.connect(mcp_sync.testing.demo_server()) as client:
    text = client.call_tool("echo", {"text": "hi"}).text
print(json.dumps([before, text, mcp_sync.testing.__name__]))
""")
    assert loaded == [False, "hi", "mcp_sync.testing"]


def test_a_url_target_loads_http_only_then():
    loaded = fresh("""
import json, sys
from mcp_sync.transports import resolve_target
before = "mcp_sync.transports.http_target" in sys.modules
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


# Loaded on first use: the extensions' modules, and the stdlib modules only
# starting a server, a reconnect's jitter or Base64 content need. Together
# they were about a sixth of `import mcp_sync`.
DEFERRED = [
    "mcp_sync.tasks", "mcp_sync.skills", "mcp_sync.subscriptions",
    "subprocess", "signal", "shlex", "datetime", "random", "base64",
]

#: The public names that load with their module (PEP 562), and that module.
LAZY_EXTENSION_NAMES = {
    "Task": "tasks",
    "Subscription": "subscriptions", "SubscriptionBroken": "subscriptions",
    "SubscriptionEnded": "subscriptions", "SubscriptionResumed": "subscriptions",
}


def loaded_after(code: str, modules: list[str]) -> list[str]:
    """Which of `modules` a fresh interpreter has loaded after `code`."""
    return fresh(f"""
import json, sys
{code}
print(json.dumps([m for m in {modules!r} if m in sys.modules]))
""")  # type: ignore[return-value]


def test_import_defers_the_extensions_and_process_modules():
    # Only what mcp_sync itself imports counts: on Python 3.10, attrs loads
    # `platform` (and with it `subprocess` and `signal`) for its own use.
    assert set(loaded_after("import mcp_sync", DEFERRED)) <= set(loaded_after("import attrs", DEFERRED))


def test_a_stdio_call_loads_no_extension_module():
    # A 2026-07-28 server: nothing but the call; `shlex` only explains a
    # failed start, `datetime` and `random` only tasks and reconnects.
    code = f"""
import mcp_sync
with mcp_sync.connect({[sys.executable, "-m", "mcp_sync.testing.server"]!r}) as client:
    assert client.call_tool("echo", {{"text": "hi"}}).text == "hi"
    assert client.transport_kind == "stdio"
"""
    assert loaded_after(code, DEFERRED) == ["subprocess", "signal"]


def test_an_initialize_era_stdio_call_loads_no_extension_module():
    # `initialize` declares the Skills extension (negotiation.py, loaded with
    # the client), and the era is remembered on disk (era_file.py, no
    # `tempfile`); skills, tasks and subscriptions stay unloaded.
    code = f"""
import mcp_sync
command = {[sys.executable, "-m", "mcp_sync.testing.server", "--versions", "2025-11-25"]!r}
with mcp_sync.connect(command) as client:
    assert client.call_tool("echo", {{"text": "hi"}}).text == "hi"
    assert client.protocol_version == "2025-11-25"
"""
    assert loaded_after(code, DEFERRED) == ["subprocess", "signal"]


def test_each_deferred_name_resolves_to_its_modules_object():
    resolved = fresh(f"""
import importlib, json
import mcp_sync
from mcp_sync import Task
from mcp_sync.skills import Skills
lazy = {LAZY_EXTENSION_NAMES!r}
same = {{name: getattr(mcp_sync, name) is getattr(importlib.import_module("mcp_sync." + module), name)
         for name, module in lazy.items()}}
listed = [name in mcp_sync.__all__ and name in dir(mcp_sync) for name in lazy]
print(json.dumps([same, all(listed), Skills is mcp_sync.skills.Skills, Task is mcp_sync.Task,
                  [mcp_sync.Task.__name__, mcp_sync.Subscription.__module__]]))
""")
    assert resolved == [{name: True for name in LAZY_EXTENSION_NAMES}, True, True, True,
                        ["Task", "mcp_sync.subscriptions"]]


def test_what_moved_into_functions_still_works_from_a_fresh_import():
    # Each of these runs an import that used to happen at `import mcp_sync`.
    done = fresh("""
import json
import mcp_sync
from mcp_sync.protocol.headers import decode_header_value, encode_header_value
from mcp_sync.transports import resolve_target
delays = list(mcp_sync.Reconnect(max_attempts=3, initial_delay=0.5).delays())
image = mcp_sync.ImageContent.from_wire({"type": "image", "data": "iVBORw==", "mimeType": "image/png"})
try:
    resolve_target("python 'my server.py'")
except TypeError as exc:
    hint = str(exc)
try:
    decode_header_value("=?base64?not base64?=")
except ValueError as exc:
    bad = type(exc).__name__
print(json.dumps([len(delays), all(0 <= d <= 30 for d in delays), image.bytes.hex(),
                  decode_header_value(encode_header_value("h\\u00e9")), hint, bad]))
""")
    assert done == [3, True, "89504e47", "h\u00e9",
                    "pass a stdio command as a list of strings, e.g. ['python', 'my server.py']",
                    "InvalidHeaderValue"]


def test_a_server_started_with_its_command_as_one_string_gets_the_hint():
    done = fresh("""
import json
import mcp_sync
try:
    mcp_sync.connect(mcp_sync.Stdio("no-such-program-mcp-sync --flag 'a b'"))
except mcp_sync.ConnectError as exc:
    print(json.dumps(str(exc)))
""")
    assert "(the command and its arguments are separate strings: ['no-such-program-mcp-sync', '--flag', 'a b'])" in done


def test_client_skills_is_one_object_whichever_thread_asks_first():
    import threading

    from mcp_sync.testing import demo_server

    for _ in range(20):
        client = mcp_sync.connect(demo_server())
        try:
            start = threading.Barrier(8)
            seen: list[object] = []

            def ask() -> None:
                start.wait()
                seen.append(client.skills)

            threads = [threading.Thread(target=ask) for _ in range(8)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert len(seen) == 8 and all(skills is client.skills for skills in seen)
            assert isinstance(client.skills, mcp_sync.skills.Skills)
        finally:
            client.close()
