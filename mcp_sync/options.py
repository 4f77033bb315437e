"""The client's options, request options, and the checks they share.

`ClientOptions` is everything `connect()` and `Client` take besides the
target, validated once when it is built (the two only build one), with
related options in small policy objects: `Timeouts`, `Limits`,
`Keepalive` and `Reconnect`.
`RequestOptions` is the keyword arguments every request method takes; its
defaults are the client's. Checks raise `TypeError`/`ValueError` before
anything is sent.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Callable, TypedDict

import attrs

from .cache import ResultCache
from .protocol import versions
from .types import Progress
from .waiting import check_seconds

if TYPE_CHECKING:
    import random

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


def close_names(name: str, known: Iterable[str], *, count: int = 1, cutoff: float = 0.75) -> list[str]:
    """The `count` names of `known` closest to `name`, closest first, of
    those at least `cutoff` alike (`difflib`'s ratio): what a misspelling
    of `name` most likely meant. Only error messages call it.

        >>> close_names("ech", ["echo", "each", "add"], count=3, cutoff=0.6)
        ['echo', 'each']
    """
    import difflib  # here: only error messages need it

    return difflib.get_close_matches(name, sorted(known), n=count, cutoff=cutoff)


def unknown_names(names: Iterable[str], known: Iterable[str]) -> str:
    """`names` listed for an error message, each with the nearest of
    `known` when one is close (a misspelling):

        >>> unknown_names(["timout", "zzz"], ["timeout", "progress"])
        "'timout' (did you mean 'timeout'?), 'zzz'"
    """
    choices = sorted(known)
    listed = []
    for name in sorted(names):
        close = close_names(name, choices)
        listed.append(f"{name!r} (did you mean {close[0]!r}?)" if close else repr(name))
    return ", ".join(listed)


#: The request options that are switches: True or False only (`check_flag`).
SWITCH_OPTIONS = ("reset_timeout_on_progress", "answer_input", "bypass_cache")


def check_options(options: Mapping[str, Any], *, tool: str | None = None) -> None:
    """A misspelt option is a TypeError, as for any keyword argument,
    naming the option meant. For `call_tool(tool, ...)`, names that are
    close to no option are taken for tool arguments given as keywords.
    A switch (`SWITCH_OPTIONS`) that is not True or False is a TypeError
    too; the other values are checked where they are used."""
    unknown = set(options) - OPTION_NAMES
    if not unknown:
        for name in SWITCH_OPTIONS:
            if name in options:
                check_flag(name, options[name])
        return
    message = f"unknown request option(s): {unknown_names(unknown, OPTION_NAMES)}"
    if tool is not None and any(unknown_names([name], OPTION_NAMES) == repr(name) for name in unknown):
        shown = ", ".join(f"{name!r}: ..." for name in sorted(unknown))
        message += f"; tool arguments go in a dict: call_tool({tool!r}, {{{shown}}})"
    raise TypeError(message)


InputHandler = Callable[[dict[str, Any]], Any]


class _Unset(enum.Enum):
    """The default of a flat keyword that was not given (None means "no limit")."""

    UNSET = "unset"

    def __repr__(self) -> str:
        return "UNSET"


UNSET = _Unset.UNSET


def _freeze_protocol(value: str | Iterable[str] | None) -> str | tuple[str, ...] | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (bytes, Mapping)) or not isinstance(value, Iterable):
        raise TypeError(f"protocol must be a version string such as '2025-11-25', a list of them, or None, "
                        f"not {value!r}")
    return tuple(value)


def _seconds(allow_none: bool) -> Callable[[Any, attrs.Attribute[Any], Any], None]:
    def check(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        check_timeout(attribute.name, value, allow_none=allow_none)
    return check


def _count(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    check_positive_int(attribute.name, value)


def _optional_count(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None:
        check_positive_int(attribute.name, value)


def _queue_bound(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise ValueError(f"max_queued must be None or an integer >= 0 (0: never wait), not {value!r}")


@attrs.frozen
class Timeouts:
    """How long a client waits, in seconds; `connect(timeouts=...)`.

    Example::

        >>> Timeouts(request=10, probe=3)
        Timeouts(request=10, probe=3, max_total=600.0, handler=None)

    Attributes:
        request: A request's wait for its answer unless the call says
            otherwise (`timeout=`; 30, `DEFAULT_TIMEOUT`); None waits for ever.
        probe: The `server/discover` probe's wait before the client falls
            back to `initialize` (10).
        max_total: The longest a request waits when its progress keeps
            restarting `request` (`reset_timeout_on_progress`; 600).
        handler: How long a server request that belongs to no call may take
            from its arrival before it is answered with an error
            (initialize era); None: no limit.

    Raises:
        TypeError: A timeout that is not a number (a string, a bool, or
            None where None is not allowed).
        ValueError: A timeout that is 0, negative, NaN, infinite or longer
            than a thread can wait (`waiting.LONGEST_WAIT`; None is no
            limit where it is allowed).
    """

    request: float | None = attrs.field(default=DEFAULT_TIMEOUT, validator=_seconds(True))
    probe: float = attrs.field(default=DEFAULT_PROBE_TIMEOUT, validator=_seconds(False))
    max_total: float = attrs.field(default=DEFAULT_MAX_TOTAL_TIMEOUT, validator=_seconds(False))
    handler: float | None = attrs.field(default=None, validator=_seconds(True))


@attrs.frozen
class Limits:
    """How much a client does or holds at once; `connect(limits=...)`.

    Example::

        >>> Limits(max_in_flight=8, max_queued=32).max_pages
        1000

    Attributes:
        max_pages: The most pages a list call follows (1000);
            `PaginationError` beyond.
        max_input_rounds: The most `input_required` rounds answered for
            one request (10).
        max_server_requests: The most server requests that belong to no
            call handled at once (16, initialize era); more are refused.
        max_in_flight: The most calls on the wire at once, or None for no
            bound.
        max_queued: The most calls that may wait for a slot when
            `max_in_flight` are on the wire (0: none wait), or None for no
            bound; a call beyond it raises `Overloaded` at once.

    Raises:
        ValueError: A count that is not a positive integer (`max_queued`:
            an integer >= 0), or None where None is not allowed.
    """

    max_pages: int = attrs.field(default=DEFAULT_MAX_PAGES, validator=_count)
    max_input_rounds: int = attrs.field(default=10, validator=_count)
    max_server_requests: int = attrs.field(default=16, validator=_count)
    max_in_flight: int | None = attrs.field(default=None, validator=_optional_count)
    max_queued: int | None = attrs.field(default=None, validator=_queue_bound)


@attrs.frozen
class Keepalive:
    """Checks of an idle connection; `connect(keepalive=Keepalive(30))`
    (or just `keepalive=30`).

    After `interval` seconds without traffic the client checks the
    connection (`ping`, or `server/discover` in 2026-07-28); after
    `failures` failed checks in a row it counts the connection as dead,
    and reconnects when `reconnect` allows it.

    Example::

        >>> Keepalive(30).failures
        3

    Attributes:
        interval: Seconds of idleness before a check.
        failures: Failed checks in a row after which the connection counts
            as dead (3).

    Raises:
        TypeError: `interval` is not a number.
        ValueError: `interval` is not a positive, finite number of seconds
            (`Timeouts` has the same rule), or `failures` not a positive
            integer.
    """

    interval: float = attrs.field(validator=_seconds(False))
    failures: int = attrs.field(default=3, validator=_count)


def _delay(instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    # No upper bound: a backoff longer than one thread wait runs in pieces.
    check_seconds(attribute.name, value, allow_none=False, longest=None)


def _float_if_number(value: Any) -> Any:
    """A number as a float; anything else as it is, for `_delay` to refuse
    under the attribute's name."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


def _max_attempts(instance: object, attribute: attrs.Attribute[int | None], value: int | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"max_attempts must be an int or None, not {value!r}")
    if value < 1:
        raise ValueError("max_attempts must be at least 1 (to turn reconnecting off, pass reconnect=False)")


@attrs.frozen
class Reconnect:
    """How a client reconnects after its connection failed: at most
    `max_attempts` attempts (None: until it succeeds or the client is
    closed), waiting before each a full-jitter exponential backoff: a random
    time between 0 and ``min(max_delay, initial_delay * 2**n)`` for the n-th
    attempt (from 0), or that cap itself with ``jitter=False``.

    The defaults suit a long-lived web process: never give up, start at
    0.5 s, never wait more than 30 s. Jitter keeps many processes that lost
    the same server from coming back at the same instant.

    Example::

        client = mcp_sync.connect(url, reconnect=Reconnect(max_attempts=5, max_delay=10))
        list(Reconnect(max_attempts=4, jitter=False).delays())   # [0.5, 1.0, 2.0, 4.0]

    Attributes:
        max_attempts (int | None): The most attempts before giving up (the
            status becomes `failed`), at least 1; None (the default) for no
            limit.
        initial_delay (float): The cap on the wait before the first attempt,
            in seconds (default 0.5); it doubles with each attempt.
        max_delay (float): The largest wait between attempts, in seconds
            (default 30); at least `initial_delay`.
        jitter (bool): Whether each wait is drawn at random between 0 and its
            cap (default True); False waits the cap itself.
        eager (bool): Whether a failed connection is set up again at once,
            on a thread of the client's, with no call waiting (default
            True): `status` then goes back to `ready` by itself, and a
            crashed stdio server is started again even in an idle process.
            False reconnects only when a call, an open subscription or the
            keepalive needs the connection.

    Raises:
        ValueError: A delay that is not a finite number > 0, `max_delay`
            below `initial_delay`, or `max_attempts` below 1.
        TypeError: A delay that is not a number, or `max_attempts` that is
            not an int or None.
    """

    max_attempts: int | None = attrs.field(default=None, validator=_max_attempts)
    initial_delay: float = attrs.field(default=0.5, converter=_float_if_number, validator=_delay)
    max_delay: float = attrs.field(default=30.0, converter=_float_if_number, validator=_delay)
    jitter: bool = attrs.field(default=True, validator=attrs.validators.instance_of(bool))
    eager: bool = attrs.field(default=True, validator=attrs.validators.instance_of(bool))

    def __attrs_post_init__(self) -> None:
        if self.max_delay < self.initial_delay:
            raise ValueError(f"max_delay ({self.max_delay:g}) must be at least initial_delay "
                             f"({self.initial_delay:g})")

    def delays(self, rng: random.Random | None = None) -> Iterator[float]:
        """The wait before each attempt, one per attempt: endless when
        `max_attempts` is None. `rng` draws the jitter (for repeatable tests).

        Args:
            rng: The random generator of the jitter; None: the `random`
                module's.

        Returns:
            An iterator of waits in seconds, one per attempt.
        """
        import random  # here: only a reconnect needs it, not `import mcp_sync`

        uniform = rng.uniform if rng is not None else random.uniform
        cap = self.initial_delay
        attempt = 0
        while self.max_attempts is None or attempt < self.max_attempts:
            yield uniform(0.0, cap) if self.jitter else cap
            attempt += 1
            # Doubled step by step rather than 2**n: n is unbounded, and the
            # cap stays a float that cannot overflow.
            cap = min(self.max_delay, cap * 2)

    @classmethod
    def coerce(cls, value: bool | Reconnect | None) -> Reconnect | None:
        """What `connect(reconnect=value)` means: True for the defaults,
        False or None for no reconnecting, or the `Reconnect` given.

        Example::

            assert Reconnect.coerce(True) == Reconnect()
            assert Reconnect.coerce(False) is None

        Args:
            value: What was passed as `reconnect=`.

        Returns:
            The policy, or None for no reconnecting.

        Raises:
            TypeError: `value` is none of True, False, None or a `Reconnect`.
        """
        if value is True:
            return cls()
        if value is False or value is None:
            return None
        if isinstance(value, Reconnect):
            return value
        raise TypeError(f"reconnect must be True, False or a mcp_sync.Reconnect, not {value!r}")


def _evolved(group: Any, flat: Mapping[str, Any]) -> Any:
    """`group` with the flat keywords that were given (not `UNSET`)."""
    given = {name: value for name, value in flat.items() if value is not UNSET}
    return attrs.evolve(group, **given) if given else group


@attrs.frozen(init=False)
class ClientOptions:
    """The options of a client, validated once: `connect()` and
    `Client()` take them as keyword arguments, `Client(target, options)`
    as this object. A bad value raises `TypeError` or `ValueError` here,
    before anything is sent.

    Related options come in groups, as httpx groups `Timeout` and
    `Limits`: `timeouts=Timeouts(...)`, `limits=Limits(...)`,
    `reconnect=Reconnect(...)`, `keepalive=Keepalive(...)`. Each grouped
    option is also taken as a flat keyword (`timeout=`, `probe_timeout=`,
    `max_total_timeout=`, `handler_timeout=`, `max_pages=`,
    `max_input_rounds=`, `max_server_requests=`, `max_in_flight=`,
    `max_queued=`, `keepalive_failures=`), which wins over its group.

    Example::

        >>> options = ClientOptions(timeout=10, protocol="2026-07-28")
        >>> options.timeouts.request, options.allowed_versions
        (10, ('2026-07-28',))

    Attributes:
        protocol: The protocol version to use (a string), the versions
            allowed (a tuple), or None for every one this client speaks
            (`SUPPORTED_VERSIONS`).
        timeouts: How long the client waits (`Timeouts`).
        limits: How much it does or holds at once (`Limits`).
        reconnect: How a failed connection is opened again (`Reconnect`;
            `True` at the call for the default backoff), or None (`False`)
            to stay failed. See [Resilience](../resilience.md).
        keepalive: Checks of an idle connection (`Keepalive`; a number at
            the call for its interval), or None for no checks.
        restart: False: never open a failed connection again, whatever
            `reconnect` says.
        client_info: The `clientInfo` to send, with string `name` and
            `version`; None sends `mcp_sync` and its version.
        client_capabilities: Capabilities to declare, over those the input
            handlers imply (these win); None declares only those.
        log_level: The level of log messages to ask of the server (`"debug"`
            to `"emergency"`), or None to leave the server's default.
        input_handlers: Handlers for the server's requests for input, by
            kind (`form`, `url`, `sampling`, `roots`; see
            `mcp_sync.handlers`), or None. They run on the calling thread,
            except for a request over a shared stream (stdio) that no call
            can be told apart for: on the one waiting caller's thread for a
            question to a person, else on a handler thread (see
            [When the server asks back](../input.md)).
        cache: True for a `ResultCache` of the client's own, a `ResultCache`
            to share one between clients, False for no caching (see
            `mcp_sync.cache`).
        stale_if_error: Let an expired cache entry answer when its refetch
            fails with a transport error (the result's `stale` is then True).
        era_cache: Remember the protocol era of each initialize-era server
            on disk too, so that other processes skip the `server/discover`
            probe for it (True; in the user's cache directory, or
            `$MCP_SYNC_CACHE_DIR`; see `mcp_sync.forget_eras`). False: in
            this process only.
        tasks: True to declare the tasks extension for every request (at
            `initialize` in the initialize era, where it cannot be declared
            per call): the server may then run any tool call as a task,
            which `call_tool()` waits for (see
            [Long-running tools](../tasks.md)).
        tracer_provider: The OpenTelemetry `TracerProvider` of the request
            spans; None: the global one, if one is set (see
            [Tracing](../tracing.md)).
        meter_provider: The OpenTelemetry `MeterProvider` of
            `mcp.client.operation.duration`; None: the global one.
        allowed_versions: `protocol` normalised: a tuple of versions, newest
            first (computed, not an argument).

    Args:
        protocol: One version, several, or None for all (see `protocol`
            above).
        timeouts: The `Timeouts`; None: the defaults.
        limits: The `Limits`; None: the defaults.
        reconnect: True (the default backoff), False or None (never), or a
            `Reconnect`.
        keepalive: Seconds of idleness before a check, a `Keepalive`, or
            None for no checks.
        restart: False never opens a failed connection again.
        client_info: The `clientInfo` to send.
        client_capabilities: Capabilities to declare.
        log_level: The level of log messages to ask of the server.
        input_handlers: Handlers for the server's requests for input.
        cache: True, False or a shared `ResultCache`.
        stale_if_error: Let an expired cache entry answer a failed refetch.
        era_cache: Remember initialize-era servers on disk too.
        tasks: Declare the tasks extension for every request.
        tracer_provider: The OpenTelemetry `TracerProvider`.
        meter_provider: The OpenTelemetry `MeterProvider`.
        timeout: `Timeouts.request`, over `timeouts`.
        probe_timeout: `Timeouts.probe`, over `timeouts`.
        max_total_timeout: `Timeouts.max_total`, over `timeouts`.
        handler_timeout: `Timeouts.handler`, over `timeouts`.
        max_pages: `Limits.max_pages`, over `limits`.
        max_input_rounds: `Limits.max_input_rounds`, over `limits`.
        max_server_requests: `Limits.max_server_requests`, over `limits`.
        max_in_flight: `Limits.max_in_flight`, over `limits`.
        max_queued: `Limits.max_queued`, over `limits`.
        keepalive_failures: `Keepalive.failures`, over `keepalive`
            (ignored when there is no keepalive).

    Raises:
        TypeError: An option of the wrong type (`timeouts` not a
            `Timeouts`, a timeout that is not a number, `restart` not a
            bool, a handler that is not callable, ...).
        ValueError: A value out of range (a timeout that is not a positive,
            finite number, an unknown protocol version or `log_level`, a
            `client_info` without string `name` and `version`, ...).
    """

    protocol: str | tuple[str, ...] | None
    timeouts: Timeouts
    limits: Limits
    reconnect: Reconnect | None
    keepalive: Keepalive | None
    restart: bool
    client_info: Mapping[str, Any] | None
    client_capabilities: Mapping[str, Any] | None
    log_level: str | None
    input_handlers: Mapping[str, InputHandler] | None
    cache: bool | ResultCache
    stale_if_error: bool
    era_cache: bool
    tasks: bool
    tracer_provider: Any
    meter_provider: Any
    allowed_versions: tuple[str, ...] = attrs.field(init=False)

    def __init__(
        self, *, protocol: str | Iterable[str] | None = None, timeouts: Timeouts | None = None,
        limits: Limits | None = None, reconnect: bool | Reconnect | None = True,
        keepalive: float | Keepalive | None = None, restart: bool = True,
        client_info: Mapping[str, Any] | None = None, client_capabilities: Mapping[str, Any] | None = None,
        log_level: str | None = None, input_handlers: Mapping[str, InputHandler] | None = None,
        cache: bool | ResultCache = False, stale_if_error: bool = False, era_cache: bool = True,
        tasks: bool = False,
        tracer_provider: Any = None, meter_provider: Any = None,
        timeout: float | None | _Unset = UNSET, probe_timeout: float | _Unset = UNSET,
        max_total_timeout: float | _Unset = UNSET, handler_timeout: float | None | _Unset = UNSET,
        max_pages: int | _Unset = UNSET, max_input_rounds: int | _Unset = UNSET,
        max_server_requests: int | _Unset = UNSET, max_in_flight: int | None | _Unset = UNSET,
        max_queued: int | None | _Unset = UNSET, keepalive_failures: int | _Unset = UNSET,
    ) -> None:
        if timeouts is not None and not isinstance(timeouts, Timeouts):
            raise TypeError("timeouts must be a mcp_sync.Timeouts")
        if limits is not None and not isinstance(limits, Limits):
            raise TypeError("limits must be a mcp_sync.Limits")
        for name, value, none_allowed in (("timeout", timeout, True), ("probe_timeout", probe_timeout, False),
                                          ("max_total_timeout", max_total_timeout, False),
                                          ("handler_timeout", handler_timeout, True)):
            if value is not UNSET:  # checked under the name given (`Timeouts` names them `request`, ...)
                check_timeout(name, value, allow_none=none_allowed)
        timeouts = _evolved(timeouts or Timeouts(), {
            "request": timeout, "probe": probe_timeout, "max_total": max_total_timeout, "handler": handler_timeout})
        limits = _evolved(limits or Limits(), {
            "max_pages": max_pages, "max_input_rounds": max_input_rounds, "max_server_requests": max_server_requests,
            "max_in_flight": max_in_flight, "max_queued": max_queued})
        if keepalive_failures is not UNSET:
            check_positive_int("keepalive_failures", keepalive_failures)
        checks: Keepalive | None
        if isinstance(keepalive, (int, float)) and not isinstance(keepalive, bool):
            check_timeout("keepalive", keepalive)
            checks = Keepalive(keepalive)
        elif keepalive is None or isinstance(keepalive, Keepalive):
            checks = keepalive
        else:
            raise TypeError("keepalive must be a number of seconds, a mcp_sync.Keepalive, or None")
        if checks is not None:
            checks = _evolved(checks, {"failures": keepalive_failures})
        self.__attrs_init__(
            _freeze_protocol(protocol), timeouts, limits, Reconnect.coerce(reconnect), checks, restart,
            client_info, client_capabilities, log_level, input_handlers, cache, stale_if_error, era_cache, tasks,
            tracer_provider, meter_provider)

    def __attrs_post_init__(self) -> None:
        for name in ("restart", "stale_if_error", "era_cache", "tasks"):
            check_flag(name, getattr(self, name))
        if self.log_level is not None and self.log_level not in versions.LOG_LEVELS:
            raise ValueError(f"log_level must be one of {', '.join(versions.LOG_LEVELS)}, not {self.log_level!r}")
        info = self.client_info
        if info is not None and not (isinstance(info, Mapping) and isinstance(info.get("name"), str)
                                     and isinstance(info.get("version"), str)):
            raise ValueError("client_info needs string 'name' and 'version'")
        if self.client_capabilities is not None and not isinstance(self.client_capabilities, Mapping):
            raise TypeError("client_capabilities must be a mapping")
        check_input_handlers(self.input_handlers)
        if not isinstance(self.cache, (bool, ResultCache)):
            raise TypeError("cache must be True, False or a ResultCache")
        # A one-shot iterable would be used up by the check: keep the tuple.
        object.__setattr__(self, "allowed_versions", versions.allowed_versions(self.protocol))


def check_flag(name: str, value: Any) -> None:
    """Refuse anything but True or False for the switch `name`: a string
    such as ``"false"`` is truthy, and `None` or ``0`` may stand for "not
    given", so a look-alike would silently turn the switch the wrong way."""
    if value is not True and value is not False:
        raise TypeError(f"{name} must be True or False, not {value!r}")


def check_timeout(name: str, value: Any, allow_none: bool = True) -> None:
    """A timeout: a positive number of seconds (`waiting.check_seconds`:
    TypeError for what is not a number, ValueError for 0, a negative, NaN,
    inf or more than a thread can wait), or None for no limit when
    `allow_none`."""
    check_seconds(name, value, allow_none=allow_none)


def check_request_options(options: Mapping[str, Any], *, tool: str | None = None) -> None:
    """What every request checks of its options before anything is sent:
    their names (`check_options`) and the timeout. The pipeline checks the
    other values where it reads them; a `ClientGroup` calls this before it
    connects a server for the request."""
    check_options(options, tool=tool)
    if "timeout" in options:
        check_timeout("timeout", options["timeout"])


def check_tool_arguments(arguments: Any) -> None:
    """A tool's `arguments`: None or a mapping (the spec's JSON object)."""
    if arguments is not None and type(arguments) is not dict and not isinstance(arguments, Mapping):
        raise TypeError("arguments must be a mapping")


def check_prompt_arguments(arguments: Any) -> None:
    """A prompt's `arguments`: None or a mapping of strings to strings, as
    `prompts/get` takes them."""
    if arguments is not None and not (isinstance(arguments, Mapping) and all(
            isinstance(key, str) and isinstance(value, str) for key, value in arguments.items())):
        raise TypeError("prompt arguments must be a mapping of strings to strings")


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
