"""Connect and first list against real servers, each in a fresh process:
mcp_sync against the official SDK's `ClientSession` on the same server.

What a script, a CLI command or a new worker process pays before its first
answer: the import, the server's start (stdio), settling the protocol era,
and one `tools/list`. Measured inside the child, from before the import to
the answer (closing is not counted). The two clients take turns, pair after
pair, so that a slow moment of a shared machine falls on both; the median
of each is kept, and their ratio is the figure.

Servers nobody here wrote, over stdio and Streamable HTTP: the reference
`@modelcontextprotocol/server-everything` (TypeScript SDK, initialize era:
2025-11-25) and a server on the official Python SDK
(tests/interop/official_server.py, which speaks 2026-07-28 to mcp_sync and
2025-11-25 to the official client's `initialize`; over HTTP with
sessions). An HTTP server runs for all the pairs (its start is not
counted; a stdio server's is). mcp_sync runs twice: with
an empty era cache (a first connect ever) and with the cache its first
connect wrote (every later process).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

MCP_SYNC = """
import json, sys, time
started = time.perf_counter()
import mcp_sync
with mcp_sync.connect(json.loads(sys.argv[1])) as client:
    client.list_tools()
    print(time.perf_counter() - started, client.protocol_version)
"""

OFFICIAL = """
import json, sys, time
started = time.perf_counter()
import asyncio, logging, os
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
logging.getLogger("mcp").setLevel(logging.WARNING)
command = json.loads(sys.argv[1])

async def first_list(read, write):
    async with ClientSession(read, write) as session:
        answer = await session.initialize()
        await session.list_tools()
        print(time.perf_counter() - started, answer.protocol_version)

async def main():
    if isinstance(command, str):
        from mcp.client.streamable_http import streamable_http_client
        async with streamable_http_client(command) as (read, write):
            await first_list(read, write)
        return
    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            await first_list(read, write)

asyncio.run(main())
"""


#: The official Python SDK's server that the interop tests run.
OFFICIAL_SERVER = str(ROOT / "tests" / "interop" / "official_server.py")


def stdio_servers() -> dict[str, list[str]]:
    """The stdio command line of each server (the everything server is
    installed on first use, as the interop tests install it)."""
    sys.path.insert(0, str(ROOT))
    from tests.interop import everything_peer

    return {
        "everything (TS SDK)": everything_peer.stdio_command(),
        "official Python SDK": [sys.executable, OFFICIAL_SERVER],
    }


@contextmanager
def http_servers() -> Iterator[dict[str, str]]:
    """The URL of each HTTP server, listening on loopback while the block runs."""
    sys.path.insert(0, str(ROOT))
    from tests.interop import everything_peer
    from tests.interop.listening import free_port, listening

    official, everything = free_port(), free_port()
    command = [sys.executable, OFFICIAL_SERVER, "--http", str(official),
               "stateful"]
    with listening(command, official) as official_url, everything_peer.http_server(everything) as everything_url:
        yield {"everything (TS SDK), HTTP": everything_url, "official Python SDK, HTTP": official_url}


def _once(code: str, command: list[str] | str, env: dict[str, str]) -> tuple[float, str]:
    done = subprocess.run([sys.executable, "-c", code, json.dumps(command)], capture_output=True, text=True,
                          timeout=120, env=env, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"a connect run failed: {done.stderr.strip()[-2000:]}")
    seconds, version = done.stdout.split()
    return float(seconds), version


def connect_real(pairs: int) -> dict[str, dict[str, Any]]:
    """Per server: the median seconds of each client over `pairs` turns,
    and mcp_sync's ratios to the official client."""
    with http_servers() as urls:
        targets: dict[str, list[str] | str] = {**stdio_servers(), **urls}
        return {name: _pairs(target, pairs) for name, target in targets.items()}


def _pairs(command: list[str] | str, pairs: int) -> dict[str, Any]:
    """One server's row: the median of `pairs` turns of each run."""
    times: dict[str, list[float]] = {"official": [], "first": [], "remembered": []}
    versions: set[str] = set()
    for _ in range(pairs):
        with tempfile.TemporaryDirectory(prefix="bench-eras-") as cache:
            env = {**os.environ, "MCP_SYNC_CACHE_DIR": cache}
            for label, code in (("official", OFFICIAL), ("first", MCP_SYNC), ("remembered", MCP_SYNC)):
                seconds, version = _once(code, command, env)
                times[label].append(seconds)
                versions.add(f"{label}:{version}")
    official = statistics.median(times["official"])
    first = statistics.median(times["first"])
    remembered = statistics.median(times["remembered"])
    return {"official_s": official, "first_s": first, "remembered_s": remembered,
            "first_ratio": first / official, "remembered_ratio": remembered / official,
            "versions": " ".join(sorted(versions))}
