"""A FastAPI app with plain `def` endpoints that call an MCP server.

FastAPI runs a plain `def` endpoint in its thread pool, so a blocking
client fits as it is: the endpoints' threads share one `mcp_sync.Client`,
made on the first request that needs it (under a lock) and closed when the
app shuts down. Serve it with uvicorn (from this folder)::

    uvicorn fastapi_app:app

    curl 'http://127.0.0.1:8000/echo?text=hello'

`MCP_SERVER` says which server to call: a URL (Streamable HTTP) or a
command line (stdio); by default the bundled demo server over stdio.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, HTTPException

import mcp_sync

_client: mcp_sync.Client | None = None
_client_lock = threading.Lock()


def server_target() -> str | list[str]:
    """`MCP_SERVER`: a URL, or a command line; the demo server by default."""
    configured = os.environ.get("MCP_SERVER", "")
    if configured.startswith(("http://", "https://")):
        return configured
    if configured:
        return shlex.split(configured)
    return [sys.executable, "-m", "mcp_sync.testing"]


def mcp() -> mcp_sync.Client:
    """The client of this process, connected on first use."""
    global _client
    with _client_lock:
        if _client is None:
            _client = mcp_sync.connect(server_target(), timeout=10)
        return _client


def close_client() -> None:
    global _client
    with _client_lock:
        client, _client = _client, None
    if client is not None:
        client.close()


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    yield
    # close() blocks (it waits for the server process to end): not on the event loop.
    await asyncio.to_thread(close_client)


app = FastAPI(lifespan=lifespan)


@app.get("/echo")
def echo(text: str = "") -> dict[str, Any]:
    """A plain `def`: FastAPI runs it on a thread of its pool, where blocking is fine."""
    try:
        result = mcp().call_tool("echo", {"text": text})
    except TimeoutError:
        raise HTTPException(504, "the MCP server did not answer in time") from None
    except mcp_sync.McpError as exc:
        raise HTTPException(502, str(exc)) from None
    if result.is_error:
        raise HTTPException(502, result.text)
    return {"text": result.text, "pid": os.getpid(), "thread": threading.get_ident()}


@app.get("/health")
def health() -> dict[str, Any]:
    client = mcp()
    return {"pid": os.getpid(), "status": client.status.value, "stats": client.stats().as_dict()}
