"""Transports: IO only. `stdio` (a server subprocess), `http` (Streamable
HTTP), `sse` (the old HTTP+SSE), `memory` (in-process), and the
`Transport`/`Target` interface for custom ones."""

import inspect
import shlex
from typing import Any

from .base import Custom, MessageSink, Target, Transport
from .http import HTTP

#: The keyword options of `HTTP()`, which `connect()` also takes for a URL.
HTTP_OPTIONS = frozenset(p for p in inspect.signature(HTTP.__init__).parameters if p not in ("self", "url"))
from .memory import Memory
from .sse import SSE
from .stdio import Stdio

__all__ = ["Custom", "HTTP", "Memory", "MessageSink", "SSE", "Stdio", "Target", "Transport", "resolve_target"]


def resolve_target(target: Any, http_options: dict[str, Any] | None = None) -> Target | Transport:
    """Turn what the user passed to `connect()` into a `Target` (or a bare
    transport). `http_options` are `HTTP()` options, for a URL string only."""
    unknown = set(http_options or {}) - HTTP_OPTIONS
    if unknown:
        raise TypeError(f"connect() got unexpected keyword argument(s): {', '.join(sorted(unknown))}")
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
            return HTTP(target, **(http_options or {}))
        if "://" in target:
            raise ValueError(f"unsupported URL scheme in {target!r}: use http:// or https://")
        try:
            example = shlex.split(target) or [target]
        except ValueError:  # unbalanced quotes
            example = target.split() or [target]
        raise TypeError(f"pass a stdio command as a list of strings, e.g. {example!r}")
    if callable(getattr(target, "open_session", None)):
        return Memory(target)
    raise TypeError(f"cannot connect to a {type(target).__name__}: pass a command list, a Stdio(), a Target or an in-process server")

