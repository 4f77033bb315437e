"""Request options and the checks every layer above the engine shares.

`RequestOptions` is the keyword arguments every request method takes; the
defaults are the client's. Checks raise `TypeError`/`ValueError` before
anything is sent.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, TypedDict

from .types import Progress

DEFAULT_TIMEOUT = 30.0
DEFAULT_PROBE_TIMEOUT = 10.0
DEFAULT_MAX_TOTAL_TIMEOUT = 600.0
DEFAULT_MAX_PAGES = 1000


class RequestOptions(TypedDict, total=False):
    """Options every request method takes as keyword arguments.

    - `timeout`: seconds to wait for the answer (the client's default, 30 s,
      unless set); None waits for ever.
    - `meta`: extra `_meta` entries; they win over the protocol's own.
    - `trace_context`: W3C `traceparent` (and `tracestate`, `baggage`), checked.
    - `progress`: a callable run on the calling thread with each `Progress`.
    - `reset_timeout_on_progress`: each progress restarts `timeout`, bounded by
      `max_total_timeout` (default 600 s).
    """

    timeout: float | None
    meta: Mapping[str, Any] | None
    trace_context: Mapping[str, str] | None
    progress: Callable[[Progress], Any] | None
    reset_timeout_on_progress: bool
    max_total_timeout: float | None


OPTION_NAMES = frozenset(RequestOptions.__annotations__)


def check_timeout(name: str, value: Any, allow_none: bool = True) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(f"{name} must be a positive number of seconds, not {value!r}")
