"""The client's options, request options, and the checks they share.

`ClientOptions` is everything `connect()` and `Client` take besides the
target, validated once when it is built (the two only build one).
`RequestOptions` is the keyword arguments every request method takes; its
defaults are the client's. Checks raise `TypeError`/`ValueError` before
anything is sent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Callable, TypedDict

import attrs

from .cache import ResultCache
from .protocol import versions
from .status import Reconnect
from .types import Progress

DEFAULT_TIMEOUT = 30.0
"""Seconds a request waits for its answer when neither `connect(timeout=)`
nor the call's own `timeout=` says otherwise."""
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


InputHandler = Callable[[dict[str, Any]], Any]


def _freeze_protocol(value: str | Iterable[str] | None) -> str | tuple[str, ...] | None:
    return value if value is None or isinstance(value, str) else tuple(value)


@attrs.frozen(kw_only=True)
class ClientOptions:
    """The options of a client, validated once; `connect()` takes them as
    keyword arguments (see there for what each means), `Client(target,
    options)` as this object.

    A bad value raises `TypeError` or `ValueError` here, before anything is
    sent.

    Example::

        >>> options = ClientOptions(timeout=10, protocol="2026-07-28")
        >>> options.timeout, options.allowed_versions
        (10, ('2026-07-28',))

    Attributes:
        protocol: The protocol version to use (a string), the versions
            allowed (a tuple), or None for every one this client speaks
            (`SUPPORTED_VERSIONS`).
        timeout: Seconds a request waits for its answer unless the call
            says otherwise (`DEFAULT_TIMEOUT`, 30); None waits for ever.
        probe_timeout: Seconds the `server/discover` probe may take before
            the client falls back to `initialize` (10).
        client_info: The `clientInfo` to send, with string `name` and
            `version`; None sends `mcp_sync` and its version.
        client_capabilities: Capabilities to declare, over those the input
            handlers imply (these win); None declares only those.
        log_level: The level of log messages to ask of the server (`"debug"`
            to `"emergency"`), or None to leave the server's default.
        max_pages: The most pages a list call follows (1000);
            `PaginationError` beyond.
        max_total_timeout: The longest a request waits when its progress
            keeps restarting `timeout` (600 seconds).
        restart: False: never open a failed connection again, whatever
            `reconnect` says.
        input_handlers: Handlers for the server's requests for input, by
            kind (`form`, `url`, `sampling`, `roots`; see
            `mcp_sync.handlers`), or None.
        max_input_rounds: The most `input_required` rounds answered for one
            request (10).
        max_server_requests: The most server requests that belong to no
            call handled at once (16, initialize era); more are refused.
        handler_timeout: Seconds such a server request may take from its
            arrival before it is answered with an error; None: no limit.
        cache: True for a `ResultCache` of the client's own, a `ResultCache`
            to share one between clients, False for no caching.
        stale_if_error: Let an expired cache entry answer when its refetch
            fails with a transport error (the result's `stale` is then True).
        reconnect: True to reopen a failed connection with the default
            backoff, a `Reconnect` for another one, False to stay failed.
        keepalive: Seconds of idleness after which the connection is checked
            (`ping`, or `server/discover` in 2026-07-28), or None for no
            checks.
        keepalive_failures: Failed checks in a row after which the
            connection counts as dead (3).
        max_in_flight: The most calls on the wire at once, or None for no
            bound.
        max_queued: The most calls that may wait for a slot when
            `max_in_flight` are on the wire (0: none wait), or None for no
            bound; a call beyond it raises `Overloaded` at once.
        tasks: True to declare the tasks extension for every request (at
            `initialize` in the initialize era, where it cannot be declared
            per call): the server may then run any tool call as a task,
            which `call_tool()` waits for (see docs/tasks.md).
        allowed_versions: `protocol` normalised: a tuple of versions, newest
            first (computed, not an argument).
    """

    protocol: str | tuple[str, ...] | None = attrs.field(default=None, converter=_freeze_protocol)
    timeout: float | None = DEFAULT_TIMEOUT
    probe_timeout: float = DEFAULT_PROBE_TIMEOUT
    client_info: Mapping[str, Any] | None = None
    client_capabilities: Mapping[str, Any] | None = None
    log_level: str | None = None
    max_pages: int = DEFAULT_MAX_PAGES
    max_total_timeout: float = DEFAULT_MAX_TOTAL_TIMEOUT
    restart: bool = True
    input_handlers: Mapping[str, InputHandler] | None = None
    max_input_rounds: int = 10
    max_server_requests: int = 16
    handler_timeout: float | None = None
    cache: bool | ResultCache = False
    stale_if_error: bool = False
    reconnect: bool | Reconnect = True
    keepalive: float | None = None
    keepalive_failures: int = 3
    max_in_flight: int | None = None
    max_queued: int | None = None
    tasks: bool = False
    tracer_provider: Any = None
    """The OpenTelemetry `TracerProvider` of the request spans; None: the
    global one, if one is set (see docs/tracing.md)."""
    meter_provider: Any = None
    """The OpenTelemetry `MeterProvider` of `mcp.client.operation.duration`;
    None: the global one, if one is set."""
    allowed_versions: tuple[str, ...] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        check_timeout("timeout", self.timeout)
        check_timeout("probe_timeout", self.probe_timeout, allow_none=False)
        check_timeout("max_total_timeout", self.max_total_timeout, allow_none=False)
        check_positive_int("max_pages", self.max_pages)
        if self.log_level is not None and self.log_level not in versions.LOG_LEVELS:
            raise ValueError(f"log_level must be one of {', '.join(versions.LOG_LEVELS)}, not {self.log_level!r}")
        info = self.client_info
        if info is not None and not (isinstance(info, Mapping) and isinstance(info.get("name"), str)
                                     and isinstance(info.get("version"), str)):
            raise ValueError("client_info needs string 'name' and 'version'")
        if self.client_capabilities is not None and not isinstance(self.client_capabilities, Mapping):
            raise TypeError("client_capabilities must be a mapping")
        check_input_handlers(self.input_handlers)
        if not isinstance(self.tasks, bool):
            raise TypeError("tasks must be True or False")
        check_positive_int("max_input_rounds", self.max_input_rounds)
        check_positive_int("max_server_requests", self.max_server_requests)
        check_timeout("handler_timeout", self.handler_timeout)
        if not isinstance(self.cache, (bool, ResultCache)):
            raise TypeError("cache must be True, False or a ResultCache")
        Reconnect.coerce(self.reconnect)  # raises TypeError for anything else
        check_timeout("keepalive", self.keepalive)
        check_positive_int("keepalive_failures", self.keepalive_failures)
        if self.max_in_flight is not None:
            check_positive_int("max_in_flight", self.max_in_flight)
        if self.max_queued is not None and (isinstance(self.max_queued, bool) or not isinstance(self.max_queued, int)
                                            or self.max_queued < 0):
            raise ValueError(f"max_queued must be None or an integer >= 0 (0: never wait), not {self.max_queued!r}")
        # A one-shot iterable would be used up by the check: keep the tuple.
        object.__setattr__(self, "allowed_versions", versions.allowed_versions(self.protocol))


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
