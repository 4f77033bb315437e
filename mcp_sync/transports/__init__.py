"""Transports: IO only. `stdio` (a server subprocess), `http` (Streamable
HTTP), `sse` (the old HTTP+SSE), `memory` (in-process), and the
`Transport`/`Target` interface for custom ones."""

import functools
import importlib
import inspect
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .base import Custom, MessageSink, Target, Transport
from .memory import Memory
from .stdio import Stdio

if TYPE_CHECKING:
    from .http_target import HTTP, SSE

    #: The keyword options of `HTTP()`, which `connect()` also takes for a URL.
    HTTP_OPTIONS: frozenset[str]

# `HTTP`, `SSE` and `HTTP_OPTIONS` load on first use (PEP 562): the HTTP
# stack (urllib3, requests, auth) costs more than the rest of the package
# put together, and a stdio-only program never needs it.
_LAZY_SUBMODULES = frozenset({"decoding", "http", "http11", "http_answer", "http_auth", "http_request", "http_session",
                              "http_target", "http_network", "pool", "sse", "tunnel"})


def __getattr__(name: str) -> Any:
    if name == "HTTP":
        from .http_target import HTTP
        value: Any = HTTP
    elif name == "SSE":
        from .http_target import SSE
        value = SSE
    elif name == "HTTP_OPTIONS":
        value = _http_options()
    elif name in _LAZY_SUBMODULES:
        # `mcp_sync.transports.http` as an attribute, as when it was imported eagerly.
        return importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


@functools.lru_cache(maxsize=None)
def _http_options() -> frozenset[str]:
    from .http_target import HTTP
    return frozenset(p for p in inspect.signature(HTTP.__init__).parameters if p not in ("self", "url"))


def __dir__() -> list[str]:
    return sorted(set(globals()) | {"HTTP", "SSE", "HTTP_OPTIONS"} | _LAZY_SUBMODULES)


__all__ = ["Custom", "HTTP", "Memory", "MessageSink", "SSE", "Stdio", "Target", "Transport", "resolve_target"]


def _looks_like_an_address(text: str) -> bool:
    """`host:port[/path]` or `localhost/path`: an HTTP address without its
    scheme rather than a command line."""
    import re  # here: only this error message needs it

    host = r"(localhost|(?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,}|\d{1,3}(?:\.\d{1,3}){3}|\[[0-9A-Fa-f:]+\])"
    return re.fullmatch(host + r"(:\d+)?(/\S*)?", text) is not None and (":" in text or "/" in text)


def resolve_target(target: Any, http_options: dict[str, Any] | None = None, *,
                   client_options: Iterable[str] = ()) -> Target | Transport:
    """Turn what the user passed to `connect()` into a `Target` (or a bare
    transport). `http_options` are `HTTP()` options, for a URL string only;
    `client_options` the other names `connect()` takes (for the error that
    names a misspelt one)."""
    # Only a URL with HTTP options needs `HTTP` itself (and so the HTTP stack).
    unknown = set(http_options) - _http_options() if http_options else set()
    if unknown:
        from ..options import unknown_names

        known = {*_http_options(), *client_options}
        raise TypeError(f"connect() got unexpected keyword argument(s): {unknown_names(unknown, known)}")
    if http_options and not (isinstance(target, str) and target.startswith(("http://", "https://"))):
        raise TypeError(f"{', '.join(sorted(http_options))} only apply to a URL target; "
                        "set them on the HTTP(...) or Stdio(...) target instead")
    if isinstance(target, (Target, Transport)):
        return target
    if isinstance(target, (list, tuple)):
        if not target or not all(isinstance(part, str) for part in target):
            raise TypeError("a stdio target is a non-empty list of strings: ['python', 'server.py']")
        return Stdio(target[0], list(target[1:]))
    if isinstance(target, str):
        if target.startswith(("http://", "https://")):
            from .http_target import HTTP
            return HTTP(target, **(http_options or {}))
        if "://" in target:
            raise ValueError(f"unsupported URL scheme in {target!r}: use http:// or https://")
        if _looks_like_an_address(target):
            raise TypeError(f"{target!r} has no URL scheme: connect('http://{target}') (or https://) for an "
                            "HTTP server; a stdio command is a list of strings")
        import shlex  # here: only this error message needs it

        try:
            example = shlex.split(target) or [target]
        except ValueError:  # unbalanced quotes
            example = target.split() or [target]
        raise TypeError(f"pass a stdio command as a list of strings, e.g. {example!r}")
    if callable(getattr(target, "open_session", None)):
        return Memory(target)
    raise TypeError(f"cannot connect to a {type(target).__name__}: pass a URL, a command list, a Stdio(), a Target or an in-process server")

