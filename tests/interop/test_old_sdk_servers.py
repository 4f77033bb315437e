"""mcp_sync against servers built on old official SDK releases that are still
everywhere: the Python SDK 1.x (1.9.4 answers `2025-03-26`, 1.3.0 answers
`2024-11-05`) and the TypeScript SDK 1.12.3 (`2025-03-26`), over stdio,
Streamable HTTP at `/mcp` (with Starlette's 307 to `/mcp/`) and the HTTP+SSE
transport at `/sse`, reached by the automatic fallback (a plain URL) and
explicitly (`mcp_sync.SSE`).

Each case (server, transport, protocol) is one client, connected the way a
user would (a command list or a URL, no options but a pinned `protocol=`
where the id says "pinned"), and every test runs against every case: the
ids read `<server>-<transport>-<protocol>`. The peers are installed on first
use by `old_peers` (cached in `.interop/`); the HTTP servers are shared by
the module and every client is connected at once, so the cases that swallow
the `server/discover` probe pay its timeout together, once. The time each
`connect()` took is printed at the end of the run (tests/interop/conftest.py).
"""

from __future__ import annotations

import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest

import mcp_sync
from mcp_sync.transports.http import HTTPTransport
from mcp_sync.transports.sse import SSETransport
from tests.interop import old_peers
from tests.helpers import GENEROUS
from tests.interop.listening import free_port, wait_until_listening
from tests.schema_check import SchemaChecker

HERE = Path(__file__).parent
PY_SERVER = str(HERE / "py_sdk1_server.py")
TS_SERVER = str(HERE / "ts_sdk1_server.mjs")

#: connect() time of each case, for the summary the conftest prints.
CONNECT_TIMES: dict[str, tuple[float, str]] = {}
#: Messages the HTTP transports sent that break their revision's schema (the
#: suite's conftest checks the stdio ones), and those of them sent by connect().
SENT_PROBLEMS: list[str] = []
CONNECT_PROBLEMS: list[str] = []
_schema = SchemaChecker(HERE.parent / "schemas")


@dataclass(frozen=True)
class Case:
    server: str  # "py-1.9.4", "py-1.3.0", "ts-1.12.3"
    transport: str  # "stdio", "http" (Streamable HTTP), "sse-fallback" (a plain /sse URL), "sse" (mcp_sync.SSE)
    protocol: str  # the version the session must end up on
    pinned: bool = False  # connect(protocol=...) instead of letting the client settle it

    @property
    def id(self) -> str:
        return f"{self.server}-{self.transport}-{self.protocol}" + ("-pinned" if self.pinned else "")

    @property
    def python(self) -> bool:
        return self.server.startswith("py-")

    @property
    def http_mode(self) -> str | None:
        """Which shared HTTP server the case needs."""
        if self.transport == "stdio":
            return None
        return "http" if self.transport == "http" else "sse"


CASES = [
    Case("py-1.9.4", "stdio", "2025-03-26"),
    Case("py-1.9.4", "stdio", "2024-11-05", pinned=True),
    Case("py-1.9.4", "http", "2025-03-26"),
    Case("py-1.9.4", "sse-fallback", "2025-03-26"),
    Case("py-1.9.4", "sse", "2024-11-05", pinned=True),
    Case("py-1.3.0", "stdio", "2024-11-05"),
    Case("py-1.3.0", "sse-fallback", "2024-11-05"),
    Case("py-1.3.0", "sse", "2024-11-05"),
    Case("ts-1.12.3", "stdio", "2025-03-26"),
    Case("ts-1.12.3", "stdio", "2024-11-05", pinned=True),
    Case("ts-1.12.3", "sse-fallback", "2025-03-26"),
    Case("ts-1.12.3", "sse", "2025-03-26"),
]

#: The Python SDK before 1.10 sends a tool's progress on the session's
#: standalone GET stream (it relates no notification to the request), so over
#: Streamable HTTP it races the result on the request's own stream: a step that
#: arrives after the result belongs to no call any more and is dropped, as the
#: spec has it. Over stdio and HTTP+SSE one stream keeps them in order.
PROGRESS_MAY_TRAIL = {"py-1.9.4-http-2025-03-26"}


def command(case: Case, *args: str) -> list[str]:
    if case.python:
        return [old_peers.python_sdk(case.server[3:]), PY_SERVER, *args]
    node, sdk_dir = old_peers.typescript_sdk()
    return [node, TS_SERVER, sdk_dir, *args]


@pytest.fixture(scope="module")
def http_servers():
    """One process per (server, HTTP mode) the cases need, started together;
    `{(server, mode): port}`."""
    wanted = sorted({(case.server, case.http_mode) for case in CASES if case.http_mode})
    procs: dict[tuple[str, str], tuple[subprocess.Popen[bytes], int]] = {}
    try:
        for server, mode in wanted:
            case = next(c for c in CASES if c.server == server)
            port = free_port()
            proc = subprocess.Popen(command(case, mode, str(port)), stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            procs[(server, mode)] = (proc, port)
        for proc, port in procs.values():
            wait_until_listening(proc, port)
        yield {key: port for key, (_, port) in procs.items()}
    finally:
        for proc, _ in procs.values():
            proc.terminate()
        # The Python SDK 1.3.0 HTTP+SSE server ignores SIGTERM once it has
        # served a stream (its graceful shutdown waits forever): a bounded wait, then kill.
        deadline = time.monotonic() + 3
        for proc, _ in procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stderr:
                proc.stderr.close()


def target(case: Case, ports: dict[tuple[str, str], int]) -> Any:
    """What a user would hand to `connect()` for this case."""
    if case.transport == "stdio":
        return command(case, "stdio")
    port = ports[(case.server, case.http_mode)]
    if case.transport == "http":
        return f"http://127.0.0.1:{port}/mcp"
    url = f"http://127.0.0.1:{port}/sse"
    return mcp_sync.SSE(url) if case.transport == "sse" else url


@contextmanager
def checking_http_messages() -> Iterator[None]:
    """While the module runs, every message an HTTP or HTTP+SSE transport
    sends is checked against the schema of the revision it negotiated."""
    saved = [(cls, name, vars(cls)[name]) for cls, name in
             ((HTTPTransport, "send"), (SSETransport, "send"), (HTTPTransport, "negotiated")) if name in vars(cls)]
    for cls, name, original in saved:
        if name == "send":
            def send(self, message, *args, _original=original, **kwargs):
                problem = _schema.check(self, message)
                if problem:
                    SENT_PROBLEMS.append(problem)
                return _original(self, message, *args, **kwargs)
            cls.send = send
        else:
            def negotiated(self, version, stateless, _original=original):
                _schema.negotiated(self, version)
                return _original(self, version, stateless)
            cls.negotiated = negotiated
    try:
        yield
    finally:
        for cls, name, original in saved:
            setattr(cls, name, original)


@pytest.fixture(autouse=True)
def http_messages_follow_their_schema():
    first = len(SENT_PROBLEMS)
    yield
    assert SENT_PROBLEMS[first:] == [], "the client sent messages that break the schema"


@pytest.fixture(scope="module")
def clients(http_servers):
    """Every case's client, connected in parallel; `{id: client or the
    exception its connect() raised}`."""
    # Install the peers first, one at a time, so no connect() is timed with an install in it.
    for server in sorted({case.server for case in CASES}):
        command(next(c for c in CASES if c.server == server))

    def connect(case: Case) -> Any:
        started = time.monotonic()
        try:
            client = mcp_sync.connect(target(case, http_servers), protocol=case.protocol if case.pinned else None)
        except Exception as exc:  # reported by every test of the case
            CONNECT_TIMES[case.id] = (time.monotonic() - started, f"failed: {type(exc).__name__}: {exc}")
            return exc
        CONNECT_TIMES[case.id] = (time.monotonic() - started, f"{client.protocol_version}")
        return client

    with checking_http_messages():
        with ThreadPoolExecutor(len(CASES)) as pool:
            connected = dict(zip([case.id for case in CASES], pool.map(connect, CASES)))
        CONNECT_PROBLEMS.extend(SENT_PROBLEMS)
        try:
            yield connected
        finally:
            for client in connected.values():
                if isinstance(client, mcp_sync.Client):
                    client.close()


@pytest.fixture(params=CASES, ids=lambda case: case.id)
def case(request):
    return request.param


@pytest.fixture
def client(case, clients):
    got = clients[case.id]
    if isinstance(got, Exception):
        raise got
    return got


# -- the calls -----------------------------------------------------------------------------------


def test_connect_settles_the_revision(case, client):
    assert CONNECT_PROBLEMS == [], "connect() sent messages that break the schema"
    assert _schema.checked > 0  # the HTTP transports' messages are being checked
    assert client.protocol_version == case.protocol
    assert client.stateless is False
    expected_name = "ts-sdk1-peer" if case.server.startswith("ts-") else "py-sdk1-peer"
    assert client.session.server_info.name == expected_name
    assert client.instructions.endswith("SDK 1.x server for interop tests.")
    assert client.transport_kind == {"stdio": "stdio", "http": "streamable-http"}.get(case.transport, "sse")
    if case.transport == "http":
        # Starlette answered /mcp with a 307 to /mcp/; the connection stays on the new path.
        assert client._conn.transport._url.endswith("/mcp/")
    client.ping()


def test_connect_time(case, client):
    """A server that answers the probe (even with an error) is settled at
    once; one that swallows it costs the probe timeout (printed at the end)."""
    seconds, _ = CONNECT_TIMES[case.id]
    # The probe's timeout at most once (10 s), with room for starting a
    # server beside all the other cases; not two probes' worth.
    assert seconds < client.options.timeouts.probe + GENEROUS < 2 * client.options.timeouts.probe


def test_tools(case, client):
    tools = {t.name: t for t in client.list_tools()}
    assert {"add", "shout", "steps", "broken"} <= set(tools)
    assert tools["add"].input_schema["properties"]["a"]["type"] in ("integer", "number")
    assert client.call_tool("add", {"a": 20, "b": 22}).text == "42"
    assert client.call_tool(tools["shout"], {"text": "hey"}).text == "HEY"


def test_structured_output_only_where_the_server_sends_it(case, client):
    """Neither 2025-03-26 nor 2024-11-05 has structured output: the Python
    SDK 1.x sends none; the TypeScript SDK 1.12 sends `outputSchema` and
    `structuredContent` whatever it negotiated, and the result still parses."""
    tools = {t.name: t for t in client.list_tools()}
    assert tools["add"].output_schema is None
    add = client.call_tool("add", {"a": 1, "b": 2})
    assert add.structured_content is None
    if case.server.startswith("ts-"):
        assert tools["divide"].output_schema["properties"]["quotient"]["type"] == "number"
        divided = client.call_tool("divide", {"a": 5, "b": 2})
        assert divided.text == "2.5"
        assert divided.structured_content == {"quotient": 2.5}


def test_audio_content_and_tool_annotations(case, client):
    """2025-03-26 added audio content and tool annotations; the Python SDK
    1.3.0 predates both."""
    tools = {t.name: t for t in client.list_tools()}
    if case.server == "py-1.3.0":
        assert "beep" not in tools and tools["add"].annotations is None
        return
    assert tools["add"].annotations["readOnlyHint"] is True
    audio = client.call_tool("beep", {}).content[0]
    assert isinstance(audio, mcp_sync.AudioContent)
    assert (audio.data, audio.mime_type) == ("UklGRg==", "audio/wav")


def test_progress_on_the_calling_thread(case, client):
    seen: list[tuple[float, float | None, threading.Thread]] = []
    result = client.call_tool("steps", {"n": 3},
                              progress=lambda p: seen.append((p.progress, p.total, threading.current_thread())))
    assert result.text == "did 3 steps"
    assert {thread for _, _, thread in seen} <= {threading.current_thread()}
    steps = [(progress, total) for progress, total, _ in seen]
    if case.id in PROGRESS_MAY_TRAIL:
        assert steps == sorted(steps) and set(steps) <= {(1, 3), (2, 3), (3, 3)}
    else:
        assert steps == [(1, 3), (2, 3), (3, 3)]


def test_resources(case, client):
    assert "note://hello" in [r.uri for r in client.list_resources()]
    assert client.read_resource("note://hello").text.startswith("hello from the ")
    assert [t.uri_template for t in client.list_resource_templates()] == ["note://items/{item}"]
    assert client.read_resource("note://items/7").text == "item 7"


def test_prompts(case, client):
    prompts = {p.name: p for p in client.list_prompts()}
    assert [a.name for a in prompts["review"].arguments] == ["code"]
    rendered = client.get_prompt("review", {"code": "x = 1"})
    assert "x = 1" in rendered.messages[0].content.text


def test_errors(case, client):
    broken = client.call_tool("broken", {})
    assert broken.is_error and "always fails" in broken.text
    with pytest.raises(mcp_sync.ToolError):
        broken.raise_for_error()
    # An unknown tool is an error result (Python SDK) or a JSON-RPC error
    # (TypeScript SDK); either way the caller gets an McpError.
    with pytest.raises(mcp_sync.McpError):
        client.call_tool("nope", {}).raise_for_error()
    with pytest.raises(mcp_sync.ServerError):
        client.read_resource("note://missing")
    with pytest.raises(mcp_sync.ServerError):
        client.get_prompt("no-such-prompt", {})
    # The session is still good after all of that.
    assert client.call_tool("add", {"a": 1, "b": 1}).text == "2"


def test_sixteen_threads_each_get_their_own_answers(case, client):
    failures: list[str] = []

    def work(n: int) -> None:
        try:
            for i in range(5):
                got = client.call_tool("add", {"a": n, "b": i}).text
                if got != str(n + i):
                    failures.append(f"thread {n}: add({n}, {i}) gave {got}")
                word = f"thread{n}word{i}"
                shouted = client.call_tool("shout", {"text": word}).text
                if shouted != word.upper():
                    failures.append(f"thread {n}: shout({word}) gave {shouted}")
            seen: list[tuple[float, threading.Thread]] = []
            steps = n % 4 + 1
            result = client.call_tool("steps", {"n": steps},
                                      progress=lambda p: seen.append((p.progress, threading.current_thread())))
            if result.text != f"did {steps} steps":
                failures.append(f"thread {n}: steps gave {result.text}")
            if any(thread is not threading.current_thread() for _, thread in seen):
                failures.append(f"thread {n}: progress ran on another thread")
            got_steps = [progress for progress, _ in seen]
            want = [float(k) for k in range(1, steps + 1)]
            if got_steps != want and not (case.id in PROGRESS_MAY_TRAIL and set(got_steps) <= set(want)):
                failures.append(f"thread {n}: progress {got_steps}, expected {want}")
        except Exception as exc:
            failures.append(f"thread {n}: {type(exc).__name__}: {exc}")

    pool = [threading.Thread(target=work, args=(n,)) for n in range(16)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in pool)
    assert failures == []
