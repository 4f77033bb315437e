"""Request options and the checks every layer above the engine shares.

`RequestOptions` is the keyword arguments every request method takes; the
defaults are the client's. Checks raise `TypeError`/`ValueError` before
anything is sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable, TypedDict

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
    - `input_handlers`: handlers for this request, over the client's.
    - `answer_input`: False returns no answers: `input_required` raises
      `InputRequired` at once.
    - `max_input_rounds`: the most `input_required` rounds answered (10).
    - `input_responses`, `request_state`: answers to a previous
      `InputRequired`, to retry by hand (see `InputRequired.retry_with`).
    - `bypass_cache`: ask the server even when the cache holds a fresh
      result (the answer still refreshes the cache).
    """

    timeout: float | None
    meta: Mapping[str, Any] | None
    trace_context: Mapping[str, str] | None
    progress: Callable[[Progress], Any] | None
    reset_timeout_on_progress: bool
    max_total_timeout: float | None
    input_handlers: Mapping[str, Callable[[dict[str, Any]], Any]] | None
    answer_input: bool
    max_input_rounds: int
    input_responses: Mapping[str, Any] | None
    request_state: str | None
    bypass_cache: bool


OPTION_NAMES = frozenset(RequestOptions.__annotations__)


def check_option_names(options: Mapping[str, Any]) -> None:
    """A misspelt option is a TypeError, as for any keyword argument."""
    unknown = set(options) - OPTION_NAMES
    if unknown:
        raise TypeError(f"unknown request option(s): {', '.join(sorted(unknown))}")


def check_timeout(name: str, value: Any, allow_none: bool = True) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(f"{name} must be a positive number of seconds, not {value!r}")


def check_input_handlers(handlers: Any) -> dict[str, Callable[[dict[str, Any]], Any]]:
    """Validate `input_handlers=`: kinds among form, url, sampling, roots."""
    if handlers is None:  # the common case, before any import
        return {}
    from .protocol.inputs import KINDS

    if not isinstance(handlers, Mapping):
        raise TypeError("input_handlers must be a mapping of kind to handler")
    for kind, handler in handlers.items():
        if kind not in KINDS:
            raise ValueError(f"input_handlers kind must be one of {', '.join(KINDS)}, not {kind!r}")
        if not callable(handler):
            raise TypeError(f"the {kind} input handler is not callable")
    return dict(handlers)


def check_positive_int(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, not {value!r}")
