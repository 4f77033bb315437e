"""The pinned reference `@modelcontextprotocol/server-everything` as a test
peer, over stdio and Streamable HTTP (shared by the modules that talk to it;
test modules never import each other).

    command = stdio_command()                 # [node, entry, "stdio"]
    target = stdio_target(env={"X": "1"})     # the same, as an mcp_sync.Stdio
    with http_server(free_port()) as url:     # http://127.0.0.1:PORT/mcp
        ...

Its HTTP side listens on every interface by default, so it is started with
`loopback.cjs` preloaded, which binds it to 127.0.0.1.
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Mapping

import mcp_sync
from tests.interop import old_peers
from tests.interop.listening import listening

HERE = Path(__file__).parent
LOOPBACK = str(HERE / "loopback.cjs")


def stdio_command() -> list[str]:
    """The command line of the server over stdio (installed on first use)."""
    node, entry = old_peers.everything_server()
    return [node, entry, "stdio"]


def stdio_target(env: Mapping[str, str] | None = None) -> mcp_sync.Stdio:
    """The server over stdio as a `Stdio` target, with `env` added to its environment."""
    node, *args = stdio_command()
    return mcp_sync.Stdio(node, args, env=dict(env or {}))


def http_server(port: int, env: Mapping[str, str] | None = None) -> AbstractContextManager[str]:
    """The server over Streamable HTTP on 127.0.0.1:`port` (with `env` added
    to its environment) while the block runs; yields its MCP endpoint's URL."""
    node, entry = old_peers.everything_server()
    return listening([node, "--require", LOOPBACK, entry, "streamableHttp"], port,
                     env={**os.environ, **(env or {}), "PORT": str(port)})
