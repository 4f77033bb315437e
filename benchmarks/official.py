"""The official async MCP Python SDK (`mcp` 2.x), driven the way benchmarks need.

`OfficialSync` is the baseline synchronous users have today: the SDK has no
synchronous client, so they run an asyncio event loop in a background thread
and submit every call to it with `asyncio.run_coroutine_threadsafe(...)`.
`OfficialAsync` is plain async use, for the SDK's own best case.

Both connect through the SDK's low-level pieces (a transport context manager
plus `ClientSession`, then `session.initialize()`) and otherwise keep the
SDK's defaults, so the numbers are what a user of the SDK gets.

`mcp` is imported only inside functions: the harness imports this module in
processes that measure the import cost and memory of other clients.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import threading
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from mcp.client.session import ClientSession
    from mcp.types import CallToolResult

STDIO = "stdio"
HTTP = "http"

_T = TypeVar("_T")


async def _connect(stack: contextlib.AsyncExitStack, transport: str, target: list[str] | str) -> ClientSession:
    """Open transport and session on `stack` and initialize; exiting the stack closes both."""
    from mcp.client.session import ClientSession

    # The SDK logs every HTTP request and session event at INFO; keep benchmark output clean.
    for name in ("mcp", "httpx", "httpx2"):
        logging.getLogger(name).setLevel(logging.WARNING)
    if transport == STDIO:
        from mcp.client.stdio import StdioServerParameters, stdio_client

        assert isinstance(target, list)
        # By default the child gets only HOME/PATH/...; pass the whole environment
        # so it runs like the other clients' servers (same venv, same settings).
        params = StdioServerParameters(command=target[0], args=list(target[1:]), env=dict(os.environ))
        # errlog is the child's stderr; the server's logging must not spam the benchmark.
        # (Opening /dev/null cannot block the loop; the stack closes it after the child.)
        errlog = stack.enter_context(open(os.devnull, "w"))  # noqa: ASYNC230, SIM115
        read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
    elif transport == HTTP:
        from mcp.client.streamable_http import streamable_http_client

        assert isinstance(target, str)
        # The default max_sse_event_size (1 MiB) fails any larger result a server
        # answers as an SSE event (the official server's default); None is the
        # documented way to lift it. JSON answers are not limited either way.
        read, write = await stack.enter_async_context(streamable_http_client(target, max_sse_event_size=None))
    else:
        raise ValueError(f"unknown transport {transport!r}")
    session = await stack.enter_async_context(ClientSession(read, write))
    await session.initialize()
    return session


async def _open(transport: str, target: list[str] | str) -> tuple[contextlib.AsyncExitStack, ClientSession]:
    """Connect; on failure, close what was opened and raise the error itself.

    (Failing inside an `async with` would re-raise it wrapped in the transport's
    ExceptionGroup, hiding e.g. "Connection closed" from the harness's report.)
    """
    stack = contextlib.AsyncExitStack()
    try:
        return stack, await _connect(stack, transport, target)
    except BaseException:
        await stack.aclose()
        raise


def _text(result: CallToolResult) -> str:
    """content[0].text of a tool result, refusing a tool error."""
    from mcp.types import TextContent

    first = result.content[0] if result.content else None
    if result.is_error or not isinstance(first, TextContent):
        raise RuntimeError(f"unexpected tool result: {result.content!r:.200}")
    return first.text


class OfficialSync:
    """The official async client driven from synchronous code the way sync users do today:
    an asyncio event loop in one background thread, each call submitted with
    asyncio.run_coroutine_threadsafe(...).result(). Safe to call from many threads at once
    (all share one ClientSession)."""

    def __init__(self, transport: str, target: list[str] | str) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="official-sdk-loop", daemon=True)
        self._thread.start()
        self._closed = False
        ready: concurrent.futures.Future[tuple[ClientSession, asyncio.Event]] = concurrent.futures.Future()
        self._owner = asyncio.run_coroutine_threadsafe(self._own(transport, target, ready), self._loop)
        try:
            self._session, self._stop = ready.result()
        except BaseException:
            self._stop_loop()
            raise

    async def _own(
        self,
        transport: str,
        target: list[str] | str,
        ready: concurrent.futures.Future[tuple[ClientSession, asyncio.Event]],
    ) -> None:
        # anyio cancel scopes (inside the transport and the session) must be exited
        # by the task that entered them, so one long-lived task owns the connection
        # from start to close(); calls are separate tasks that only use the session.
        try:
            stack, session = await _open(transport, target)
        except BaseException as exc:
            ready.set_exception(exc)  # __init__ raises it
            raise
        stop = asyncio.Event()
        ready.set_result((session, stop))
        try:
            await stop.wait()
        finally:
            await stack.aclose()

    def _run(self, coro: Coroutine[Any, Any, _T]) -> _T:
        if self._closed:
            coro.close()  # never scheduled; closing it avoids a "never awaited" warning
            raise RuntimeError("client is closed")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def echo(self, text: str) -> str:
        return _text(self._run(self._session.call_tool("echo", {"text": text})))

    def blob(self, n: int) -> int:
        return len(_text(self._run(self._session.call_tool("blob", {"n": n}))))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._loop.call_soon_threadsafe(self._stop.set)
        try:
            self._owner.result()  # the stack has exited: session closed, server stopped
        finally:
            self._stop_loop()

    def _stop_loop(self) -> None:
        # getaddrinfo runs in the loop's default executor; shut it down too, or its
        # worker thread outlives close().
        asyncio.run_coroutine_threadsafe(self._loop.shutdown_default_executor(), self._loop).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()


class OfficialAsync:
    """Plain async use."""

    def __init__(self, stack: contextlib.AsyncExitStack, session: ClientSession) -> None:
        self._stack = stack
        self._session = session

    @classmethod
    async def open(cls, transport: str, target: list[str] | str) -> OfficialAsync:
        """Connect and initialize. Call aclose() from the same task (anyio cancel scopes)."""
        return cls(*await _open(transport, target))

    async def echo(self, text: str) -> str:
        return _text(await self._session.call_tool("echo", {"text": text}))

    async def blob(self, n: int) -> int:
        return len(_text(await self._session.call_tool("blob", {"n": n})))

    async def aclose(self) -> None:
        await self._stack.aclose()
