"""The clients under test, behind one small interface.

A synchronous client has `echo(text) -> str`, `blob(n) -> int` (the length
of the text received) and `close()`; `official_async` has the same as
coroutines. Modules are imported only when a client is opened, so a worker
process holds exactly one client's code.
"""

from __future__ import annotations

from typing import Any

LIMIT = 64 * 1024 * 1024
STDIO = "stdio"
HTTP = "http"

#: client name -> the transports it runs over.
CLIENTS: dict[str, tuple[str, ...]] = {
    "mcp_sync": (STDIO, HTTP),
    "raw_inline": (STDIO,),
    "raw_reader": (STDIO,),
    "raw_http": (HTTP,),
    "official_sync": (STDIO, HTTP),
    "official_async": (STDIO, HTTP),
}
#: Clients that may be shared by many threads (raw_inline has one reader: its caller).
THREAD_SAFE = {"mcp_sync", "raw_reader", "raw_http", "official_sync", "official_async"}


class McpSync:
    """mcp_sync as a user would call it: connect once, call tools by name."""

    def __init__(self, transport: str, target: list[str] | str, *, compress: bool = True,
                 protocol: str | None = None) -> None:
        import mcp_sync

        # The 10 MB blob answers with about 20 MB (the text in content and in
        # structuredContent), over the 16 MiB default bound on one message.
        # `protocol` pins a revision (say the initialize era's 2025-11-25).
        pin: dict[str, Any] = {"protocol": protocol} if protocol else {}
        if isinstance(target, list):
            self._client = mcp_sync.connect(mcp_sync.Stdio(target[0], target[1:], max_line_bytes=LIMIT), **pin)
        else:
            self._client = mcp_sync.connect(target, max_response_bytes=LIMIT, compress=compress, **pin)

    def echo(self, text: str) -> str:
        return self._client.call_tool("echo", {"text": text}).text

    def stats_cost(self, quads: int, block: int) -> dict[str, float]:
        """What `stats()` costs, paired (see `paired`): short blocks of calls
        in ABBA order between the client's metrics recorder (A) and one that
        does nothing (B), on the same client and server; the median of the
        quads' ratios of client CPU per call, and each arm's per call."""
        from .paired import paired

        pipeline = self._client._pipeline
        real, none = pipeline.metrics, _NoMetrics()

        def use_real() -> None:
            pipeline.metrics = real

        def use_none() -> None:
            pipeline.metrics = none  # type: ignore[assignment]

        try:
            return paired(use_real, use_none, lambda i: self.echo(f"s-{i}"), quads=quads, block=block)
        finally:
            pipeline.metrics = real

    def tracing_off_cost(self, quads: int, block: int) -> dict[str, float]:
        """What the tracing hook costs when nothing traces, paired (see
        `paired`): short blocks of calls in ABBA order between the client as
        built (A: the hook present, no provider configured) and the same
        client whose pipeline's `request` is a copy compiled from its source without
        the hook's lines (B); the median of the quads' ratios of client CPU
        and of wall time per call, and each arm's per call. The calls pass
        an option (`timeout`), so they take the general path, where the hook
        is: a plain call's fast lane (taken only when no tracer is set)
        tests `tracer` once and never reaches `request`."""
        from .paired import paired

        client = self._client
        pipeline = client._pipeline

        def echo(i: int) -> str:
            return client.call_tool("echo", {"text": f"t-{i}"}, timeout=60).text

        if pipeline.tracer is not None:
            raise RuntimeError("a tracer or meter provider is configured: this case measures tracing off")
        hooked, bypassed = pipeline.request, _without_tracing_hook(pipeline)

        def use_hooked() -> None:
            pipeline.calls._send = hooked

        def use_bypassed() -> None:
            pipeline.calls._send = bypassed

        try:
            return paired(use_hooked, use_bypassed, echo, quads=quads, block=block)
        finally:
            pipeline.calls._send = hooked

    def blob(self, n: int) -> int:
        return len(self._client.call_tool("blob", {"n": n}).text)

    def list_tools(self) -> int:
        return len(self._client.list_tools())

    def received(self) -> int:
        """Bytes received so far, on the wire (compressed when they came so)."""
        return int(self._client.stats().bytes_received)

    def close(self) -> None:
        self._client.close()


#: The lines of `Pipeline.request` that make the tracing hook.
_HOOK_LINES = ("tracer = self.tracer", "if tracer is not None:", "return tracer.request(")


def _without_tracing_hook(pipeline: Any) -> Any:
    """`pipeline.request` as it would be built without the tracing hook:
    its source, less the hook's lines, compiled in the pipeline module,
    bound to `pipeline`. Fails loudly if the hook is not found as expected."""
    import __future__
    import inspect
    import textwrap
    import types

    from mcp_sync import pipeline as client_module

    source = textwrap.dedent(inspect.getsource(client_module.Pipeline.request))
    lines = source.splitlines()
    kept = [line for line in lines if not line.strip().startswith(_HOOK_LINES)]
    if len(lines) - len(kept) != len(_HOOK_LINES) or "tracer" in "\n".join(kept):
        raise RuntimeError("the tracing hook of Pipeline.request is not the one this case removes")
    namespace: dict[str, Any] = {}
    code = compile("\n".join(kept) + "\n", client_module.__file__ or "pipeline.py", "exec",
                   flags=__future__.annotations.compiler_flag, dont_inherit=True)
    exec(code, vars(client_module), namespace)
    return types.MethodType(namespace["request"], pipeline)


class _NoMetrics:
    def record(self, method: str, outcome: str, seconds: float) -> None:
        pass

    def finished(self, method: str, outcome: str, seconds: float) -> None:
        pass

    def count(self, name: str, n: int = 1) -> None:
        pass


def open_sync(name: str, transport: str, target: list[str] | str) -> Any:
    """Open a synchronous client (every client but official_async)."""
    if name == "mcp_sync":
        return McpSync(transport, target)
    if name == "raw_inline":
        from .floors import RawStdioInline
        assert isinstance(target, list)
        return RawStdioInline(target)
    if name == "raw_reader":
        from .floors import RawStdioReader
        assert isinstance(target, list)
        return RawStdioReader(target)
    if name == "raw_http":
        from .floors import RawHTTP
        assert isinstance(target, str)
        return RawHTTP(target)
    if name == "official_sync":
        from .official import OfficialSync
        return OfficialSync(transport, target)
    raise ValueError(f"unknown synchronous client {name!r}")


async def open_async(name: str, transport: str, target: list[str] | str) -> Any:
    if name != "official_async":
        raise ValueError(f"unknown async client {name!r}")
    from .official import OfficialAsync
    return await OfficialAsync.open(transport, target)
