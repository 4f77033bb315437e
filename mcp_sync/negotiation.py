"""The negotiation step: settling the protocol era of a new connection.

What it owns: the two handshake exchanges (the `server/discover` probe of
the stateless era, whose answer `protocol.versions.read_probe_answer`
reads, and the `initialize` handshake of the initialize era), the order in
which they are tried, the HTTP to HTTP+SSE fallback (asked of the target:
`Target.fallback()`), what the client declares at `initialize` for the
extensions it implements (and, in 2025-11-25, for running the server's
questions as client tasks), and the process-wide memory of servers that
settled on the initialize era. Its outcome is a value, `Settled`: the
target, the dialect, the session or discovery result, and what was
declared. It never mutates a client.

What it must not know: the client, the request pipeline, reconnecting
(the supervisor calls `settle()` for a new connection and `resume()` for a
connection in an era already settled), or how a transport does IO.

How it works. `settle()` is handed a started connection and a `Starter`
(the supervisor) to start or abandon others. It tries, in order: the era
remembered for the server (straight to `initialize`, no probe); the probe
when both eras are allowed; the probe again when only the stateless era is
(an answer of the initialize era refuses the pin); `initialize` when only
that era is; and on a
Streamable HTTP URL that refuses the POST the way a server without it does,
`initialize` again over the target's fallback. A server in a process of
our own (stdio) is started once per connect: silence on the probe sends
`initialize` after it into the same pipe, and the first answer that
settles the era wins (`_settle_own_process`, `_race`); only a process that
failed after reading a request is started again. Every connection it opens
and does not return is abandoned through the starter, so `close()` of the
client can reach it while it starts.

Era memory. Some initialize-era servers neither answer nor refuse the probe
(the Python SDK 1.3 server's session dies on the unknown method and stays
silent), so settling with them costs the whole `probe_timeout`. Only the
first `connect()` to such a server pays: later ones go straight to
`initialize`, in this process and, unless `era_cache=False`, in every other
one (`era_file` keeps the record on disk). A stateless-era server is not
recorded: the probe is its first request anyway. A remembered era that
fails is forgotten (here and on disk) and settled afresh. `_memory_lock`
guards `_eras` and nothing else is done under it; a fork child gets a fresh
lock and keeps the record.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Hashable, Mapping, Sequence
from contextlib import AbstractContextManager
from types import MappingProxyType
from typing import Any, Callable, NamedTuple, Protocol

import attrs

from . import client_tasks, forking
from .connection import Connection, Pending, poll
from .errors import (
    AuthenticationError,
    AuthorizationError,
    ConnectError,
    HTTPStatusError,
    InvalidResult,
    McpError,
    RequestTimeout,
    ServerError,
    TransportError,
    UnsupportedProtocolVersion,
    VersionNegotiationError,
    copy_error,
    server_error_from_wire,
)
from .protocol import versions
from .protocol.inputs import merge_capabilities
from .protocol.versions import Dialect, FallBack, Reprobe, UseStateless
from .transports.base import Target, Transport
from .types import DiscoverResult, Implementation, InitializeResult
from .waiting import deadline_in, expired, remaining

__all__ = [
    "SKILLS_EXTENSION", "TASKS_EXTENSION", "Identity", "Settled", "Starter", "Terms",
    "forget", "initialize", "initialize_capabilities", "probe", "recall", "remember", "reprobe", "resume", "settle",
]

log = logging.getLogger("mcp_sync.client")

#: How often the start-up race (`_race`) looks at the probe while it waits
#: for `initialize`'s answer (the one expected last).
_RACE_SLICE = 0.1
#: How long an `initialize` answered in that race waits for the probe's answer.
_RACE_GRACE = 1.0

Callback = Callable[[dict[str, Any]], None]

# -- what the client declares at initialize ------------------------------------------

#: The Skills extension's identifier, as declared in capabilities.
SKILLS_EXTENSION = "io.modelcontextprotocol/skills"
#: The Tasks extension's identifier (here, not in `tasks`, which loads on first use).
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
#: The capabilities that declare the extensions this client implements.
DECLARATION: Mapping[str, Any] = {"extensions": {SKILLS_EXTENSION: {}}}


def offers_core_tasks(dialect: Dialect, capabilities: Mapping[str, Any] | None) -> bool:
    """Whether a server runs `tools/call` as a task of the core protocol:
    a 2025-11-25 server whose capabilities list `tasks.requests.tools.call`
    (here, not in `tasks`, for the same reason as `TASKS_EXTENSION`)."""
    if not dialect.core_tasks or not isinstance(capabilities, Mapping):
        return False
    tasks = capabilities.get("tasks")
    requests = tasks.get("requests") if isinstance(tasks, Mapping) else None
    tools = requests.get("tools") if isinstance(requests, Mapping) else None
    return isinstance(tools, Mapping) and isinstance(tools.get("call"), Mapping)


def initialize_capabilities(capabilities: Mapping[str, Any], version: str) -> dict[str, Any]:
    """The capabilities an `initialize` for `version` sends: `capabilities`
    with the extensions this client implements declared, in the revisions
    whose handshake has extensions, and in those with core tasks the
    `tasks` capability that runs the elicitation and sampling requests it
    declares as client tasks (see `client_tasks`; an explicit `tasks` in
    `capabilities` wins, key by key). The dialect says which revision has what.

    Example::

        >>> initialize_capabilities({}, "2025-11-25")
        {'extensions': {'io.modelcontextprotocol/skills': {}}}
        >>> initialize_capabilities({"sampling": {}}, "2025-11-25")["tasks"]
        {'list': {}, 'cancel': {}, 'requests': {'sampling': {'createMessage': {}}}}
    """
    dialect = versions.dialect_for(version)
    # Only what the revision defines (no elicitation before 2025-06-18):
    # this is what is sent and what the session is known to have declared,
    # so the two never differ (a request of a kind never declared is refused).
    declared = dialect.declarable_capabilities(capabilities)
    tasks = client_tasks.capability(declared) if dialect.core_tasks else None
    if tasks is not None:
        declared = merge_capabilities({"tasks": tasks}, declared)
    if not dialect.initialize_extensions:
        return declared
    return merge_capabilities(declared, DECLARATION)


# -- era memory ------------------------------------------------------------------------

#: The most servers remembered; the least recently used is forgotten first.
MAX_SERVERS = 256

_memory_lock = threading.Lock()
_eras: OrderedDict[Hashable, str] = OrderedDict()


def remember(key: Hashable | None, kind: str, *, persist: bool = False) -> None:
    """Record that the server `key` settled on `kind` ("initialize", or a
    transport kind such as "sse" that implies it), in this process and,
    with `persist`, on disk (`era_file`). A None key (a target with no
    stable identity, such as a custom transport) is not recorded."""
    if key is None:
        return
    if persist:
        from . import era_file

        era_file.remember(key, kind)
    with _memory_lock:
        _eras[key] = kind
        _eras.move_to_end(key)
        while len(_eras) > MAX_SERVERS:
            _eras.popitem(last=False)


def recall(key: Hashable | None, *, persist: bool = False) -> str | None:
    """What `remember` recorded for `key` (in this process, else, with
    `persist`, on disk), or None."""
    if key is None:
        return None
    with _memory_lock:
        kind = _eras.get(key)
        if kind is not None:
            _eras.move_to_end(key)
            return kind
    if not persist:
        return None
    from . import era_file

    kind = era_file.recall(key)
    if kind is not None:
        remember(key, kind)
    return kind


def forget(key: Hashable | None = None) -> None:
    """Forget one server (`key`), or every server when `key` is None, in
    this process and on disk."""
    with _memory_lock:
        if key is None:
            _eras.clear()
        else:
            _eras.pop(key, None)
    from . import era_file

    era_file.forget(key)


@forking.in_child
def _after_fork_in_child() -> None:
    global _memory_lock
    _memory_lock = threading.Lock()


# -- the two exchanges -----------------------------------------------------------------


@attrs.frozen
class Identity:
    """What the client says about itself in every handshake."""

    capabilities: Mapping[str, Any]
    client_info: Mapping[str, Any]
    log_level: str | None


def _discover_params(version: str, identity: Identity) -> dict[str, Any]:
    """The params of `server/discover` in `version`: the per-request `_meta`
    a stateless request carries."""
    dialect = versions.dialect_for(version)
    return {"_meta": dialect.request_meta(identity.capabilities, identity.client_info, identity.log_level)}


def probe(
    conn: Connection,
    version: str,
    allowed: Sequence[str],
    identity: Identity,
    *,
    timeout: float,
    on_log: Callback,
    failure_means_initialize_era: bool,
    until: float | None = None,
) -> UseStateless | FallBack:
    """Send `server/discover` until the answer settles the era.

    Silence within `timeout` means an initialize-era server. A transport failure
    during the probe (an initialize-era server that dies on an unknown method) means
    one too when the caller can restart the server (`failure_means_initialize_era`).
    `until` (a `time.monotonic()` deadline: a waiting call's) ends every
    wait, the re-probes' too, when it comes first.
    """
    for _attempt in range(3):
        response: dict[str, Any] | None
        try:
            pending = conn.send_request("server/discover", _discover_params(version, identity))
            response = conn.wait(pending, timeout=timeout, until=until, on_log=on_log)
        except RequestTimeout:
            response = None
        except AuthenticationError:
            raise  # 401/403 say nothing about the era
        except HTTPStatusError as exc:
            # A 4xx with no stateless-era JSON-RPC error in it is an
            # initialize-era server's answer (the JSON-RPC ones arrive as
            # error responses). 5xx is an error, not evidence.
            if 400 <= exc.status < 500:
                return FallBack(f"server/discover answered HTTP {exc.status}", http_status=exc.status)
            raise
        except TransportError as exc:
            if not failure_means_initialize_era:
                raise
            return FallBack(f"the server failed on server/discover: {exc}")
        verdict = versions.read_probe_answer(response, allowed)
        if not isinstance(verdict, Reprobe):
            return verdict
        # Even the version we just sent may be listed: a server may refuse a
        # first request on purpose. Retry (a few times at most) as told.
        version = verdict.version
    raise VersionNegotiationError(
        "the server kept refusing the protocol versions it said it supports", requested=list(allowed),
    )


def initialize(
    conn: Connection,
    version: str,
    allowed: Sequence[str],
    identity: Identity,
    *,
    timeout: float | None,
    on_log: Callback,
    on_server_request: Callback,
    on_declared: Callable[[Mapping[str, Any], str], None] | None = None,
    response: Mapping[str, Any] | None = None,
) -> tuple[InitializeResult, str]:
    """The initialize handshake: `initialize`, a check of the negotiated
    version, then `notifications/initialized`. Returns the session and the
    version the `initialize` it accepted asked for (what was declared
    follows from it). `on_declared` is told the capabilities declared once
    the server accepted them, and the version it settled on, before
    `notifications/initialized`.
    `response` is the answer to an `initialize` for `version` sent already.

    A refusal that lists the versions the server supports (the lifecycle
    page's own example: -32602 with `data.supported`) is answered with one
    more `initialize`, in the newest of them the client allows, within the
    same `timeout`; a second refusal is raised."""
    deadline = deadline_in(timeout)
    if response is None:
        response = conn.wait(send_initialize(conn, version, identity), timeout=timeout, on_log=on_log,
                             on_server_request=on_server_request)
    offered = _offered_instead(response, version, allowed)
    if offered is not None:
        log.info("the server refused initialize for %s and supports %s: asking for that", version, offered)
        version = offered
        response = conn.wait(send_initialize(conn, version, identity), timeout=timeout, until=deadline,
                             on_log=on_log, on_server_request=on_server_request)
    return complete_initialize(conn, response, version, allowed, identity, on_declared), version


def _offered_instead(response: Mapping[str, Any], requested: str, allowed: Sequence[str]) -> str | None:
    """The initialize-era version to ask for instead, when `response`
    refused `requested` and its `data.supported` lists one `allowed`."""
    error = response.get("error")
    data = error.get("data") if isinstance(error, Mapping) else None
    supported = data.get("supported") if isinstance(data, Mapping) else None
    if not isinstance(supported, list):
        return None
    return next((v for v in allowed if v != requested and v in supported and v in versions.INITIALIZE_VERSIONS),
                None)


def send_initialize(conn: Connection, version: str, identity: Identity) -> Pending:
    """Send `initialize` (the first half of `initialize()`)."""
    dialect = versions.dialect_for(version)
    params = {
        "protocolVersion": version,
        # A capability the revision lacks is not declared (elicitation
        # before 2025-06-18, see `initialize_capabilities`), nor a
        # clientInfo field (title). When negotiating down, `version` is the
        # newest asked for, so nothing is dropped then.
        "capabilities": initialize_capabilities(identity.capabilities, version),
        "clientInfo": dialect.client_info(identity.client_info),
    }
    return conn.send_request("initialize", params, cancellable=False)


def complete_initialize(conn: Connection, response: Mapping[str, Any], version: str, allowed: Sequence[str],
                        identity: Identity, on_declared: Callable[[Mapping[str, Any], str], None] | None,
                        ) -> InitializeResult:
    """The second half of `initialize()`, given the server's answer."""
    if "error" in response:
        raise server_error_from_wire(response["error"], method="initialize")
    result = response.get("result")
    if not isinstance(result, Mapping):
        raise InvalidResult("initialize answered without a result object")
    negotiated = versions.check_negotiated(result, version, allowed)
    session = InitializeResult.from_wire(result)
    # The transport frames everything after initialize for this version
    # (HTTP: the session id and MCP-Protocol-Version headers).
    conn.transport.negotiated(negotiated, False)
    if on_declared is not None:
        on_declared(initialize_capabilities(identity.capabilities, version), negotiated)
    conn.notify("notifications/initialized")
    return session


# -- the outcome, and what settling needs ------------------------------------------------

#: Nothing declared (the stateless era declares per request): read only.
_NOTHING: Mapping[str, Any] = MappingProxyType({})


class Settled(NamedTuple):
    """What a negotiation settled: immutable, replaced whole (`_replace`).

    Attributes:
        target: The target the connection was opened on (the fallback's
            when the server chose HTTP+SSE).
        dialect: The protocol revision in use.
        session: What `initialize` returned (initialize era), else None.
        discovered: The last `server/discover` result (stateless era), or None.
        declared: The capabilities sent with `initialize` (empty in the
            stateless era, which declares them per request).
    """

    target: Target | Transport
    dialect: Dialect
    session: InitializeResult | None = None
    discovered: DiscoverResult | None = None
    declared: Mapping[str, Any] = _NOTHING

    @property
    def capabilities(self) -> dict[str, Any] | None:
        """The server's capabilities, from `initialize` or `server/discover`."""
        said = self.said
        return said.capabilities if said is not None else None

    @property
    def server_info(self) -> Implementation | None:
        """The server's name and version, when it has said them."""
        said = self.said
        return said.server_info if said is not None else None

    @property
    def instructions(self) -> str | None:
        """How to use the server, in prose, when it said."""
        said = self.said
        return said.instructions if said is not None else None

    @property
    def said(self) -> InitializeResult | DiscoverResult | None:
        """What the server said of itself: the session, else the last discovery."""
        return self.session if self.session is not None else self.discovered


class Starter(Protocol):
    """How `settle()` opens and lets go of connections: the supervisor's."""

    def start(self, target: Target | Transport) -> Connection:
        """A started connection to `target`, reachable by `close()` while it settles."""

    def abandon(self, conn: Connection, reason: str) -> None:
        """Close a connection that will not be used."""


class Terms(NamedTuple):
    """What the client brings to every negotiation."""

    allowed: tuple[str, ...]
    probe_timeout: float
    timeout: float | None
    #: The capabilities, client info and log level the client declares.
    identity: Callable[[], Identity]
    on_log: Callback
    #: The answerer of server requests during `initialize` on a connection.
    answerer: Callable[[Connection], Callback]
    #: A span around a handshake exchange: (method, version) -> context manager.
    traced: Callable[[str, str], AbstractContextManager[Any]]
    #: Told what `initialize` declared and the version the server settled
    #: on, before `notifications/initialized` goes out (the server may ask
    #: for roots right after it, and is answered in its revision's shapes).
    on_declared: Callable[[Mapping[str, Any], str], None] = lambda capabilities, version: None
    #: Whether the era memory is kept on disk too (`era_file`).
    persist: bool = False


class _Changed(Exception):
    """A server no longer serves the transport remembered for it (never
    leaves this module: `settle()` then settles afresh)."""


def _refused_post(exc: HTTPStatusError) -> bool:
    """Whether a POST was refused the way a server without Streamable HTTP
    refuses it (400, 404, 405: the 2025-03-26 backwards-compatibility rule),
    not for authentication (a subclass) or trouble (5xx)."""
    return type(exc) is HTTPStatusError and exc.status in (400, 404, 405)


def _key(target: Target | Transport) -> Hashable | None:
    return target.server_key() if isinstance(target, Target) else None


def _restarts_server(target: Target | Transport, conn: Connection) -> bool:
    return isinstance(target, Target) and conn.transport.restarts_server


def _explained_by_a_change(exc: BaseException, conn: Connection) -> bool:
    """Whether the remembered era's `initialize` on `conn` failed in a way
    a server changed since (upgraded in place to the stateless era)
    explains: it refused it, answered something else, exited on it or
    closed the connection, or never answered it. Not: credentials or a
    server in trouble (an HTTP status other than a refused POST), nothing
    to connect to, or a stdio server that failed without reading a byte
    (it failed on its own; a fresh settle would fail the same way). A
    client closed meanwhile is told by `settle()`."""
    if isinstance(exc, (_Changed, ServerError, VersionNegotiationError)):
        return True
    if isinstance(exc, HTTPStatusError):
        return _refused_post(exc)
    if isinstance(exc, (ConnectError, AuthorizationError)) or not isinstance(exc, (TransportError, RequestTimeout)):
        return False
    return not conn.transport.read_nothing()


def settle(conn: Connection, target: Target | Transport, terms: Terms, starter: Starter, *,
           use_memory: bool = True) -> tuple[Connection, Settled]:
    """Settle the era on `conn` (started on `target`); returns the connection
    to keep (another one when the server was restarted or the fallback
    chosen) and what was settled. Connections it does not return are
    abandoned through `starter`; `conn` too when it raises. `use_memory`
    False ignores the era remembered for the server (a fresh settle)."""
    allowed = terms.allowed
    stateless = [v for v in allowed if versions.dialect_for(v).stateless]
    initialize_era = [v for v in allowed if not versions.dialect_for(v).stateless]
    if target.kind == "sse":
        if not initialize_era:
            raise VersionNegotiationError(
                "the HTTP+SSE transport carries only initialize-era protocol versions (2025-11-25 and older), "
                "and none of them is allowed", requested=list(allowed))
        # The transport carries only the initialize era: no probe, which
        # some of its servers never answer.
        stateless = []
    key = _key(target)
    remembered = recall(key, persist=terms.persist) if use_memory else None
    if stateless and initialize_era and remembered is not None:
        # Settled on the initialize era before, in this process or another:
        # no probe (a server that swallows it would cost `probe_timeout` again).
        try:
            return _initialize_remembered(conn, target, remembered, initialize_era[0], terms, starter)
        except (_Changed, McpError) as exc:
            if not _explained_by_a_change(exc, conn):
                raise
            # The server may have changed since (upgraded in place): the
            # spec's "re-probing if the cached assumption later fails". The
            # record is forgotten before the fresh settle, so a server that
            # is simply dead is not tried on it again; the fresh settle
            # ignores the memory (another thread may write it back
            # meanwhile), so it costs at most one fresh settle, whose error
            # is the one raised. The fresh connection is started first: it
            # raises when the client was closed meanwhile (how `initialize`
            # failed then, which says nothing of the server), and nothing
            # is forgotten.
            log.info("%s failed on initialize in its remembered protocol era (%s); settling its era again",
                     target, exc)
            starter.abandon(conn, "settling the protocol era again")
            fresh = starter.start(target)
            try:
                forget(key)
                return settle(fresh, target, terms, starter, use_memory=False)
            except BaseException:
                starter.abandon(fresh, "the connection could not be set up")
                raise
    if stateless and initialize_era and _restarts_server(target, conn):
        return _settle_own_process(conn, target, stateless[0], initialize_era[0], terms, starter)
    if stateless and initialize_era:
        verdict = _probe(conn, stateless[0], terms, False)
        if isinstance(verdict, UseStateless):
            return conn, _stateless(conn, target, verdict)
        if verdict.silent:
            # The whole probe_timeout went by: say so where a user looks,
            # once per server and process (the era is remembered below).
            log.warning("%s did not answer server/discover within %.3g s (probe_timeout); treating it as an "
                        "initialize-era server from now on (remembered; mcp_sync.forget_eras() forgets)", target,
                        terms.probe_timeout)
        else:
            log.info("falling back to initialize: %s", verdict.reason)
        conn, settled = _initialize_or_fall_back(conn, target, initialize_era[0], terms, starter)
        remember(key, "sse" if settled.target.kind == "sse" else "initialize", persist=terms.persist)
        return conn, settled
    if stateless:
        return conn, _confirm_pin(conn, target, stateless[0], terms)
    return _initialize_or_fall_back(conn, target, initialize_era[0], terms, starter)


def _confirm_pin(conn: Connection, target: Target | Transport, version: str, terms: Terms) -> Settled:
    """Only the stateless era allowed: probe all the same. An initialize-era
    server may serve requests without `initialize`, under its own semantics
    (the reference `everything` server does): the probe is what tells, and
    a definite answer of that era refuses the pin here rather than letting
    every later answer be misread. Silence proves nothing: the pin is
    trusted, as it was asked for. A server that fails on the probe raises
    what it failed with (a process that exits, say, on an unknown method or
    at start-up: its exit code and stderr say more than a guess at its era)."""
    verdict = _probe(conn, version, terms, False)
    if isinstance(verdict, UseStateless):
        return _stateless(conn, target, verdict)
    if not verdict.silent:
        allowed = list(terms.allowed)
        check_url = ""
        if verdict.http_status is not None:
            check_url = ", or check the URL"
            if verdict.http_status == 404:
                from .transports.http_target import usual_streamable_endpoint  # (an HTTP target: loaded)

                usual = usual_streamable_endpoint(target)
                if usual is not None:
                    check_url += (f": nothing may serve MCP at that path (servers usually serve Streamable HTTP "
                                  f"at {usual})")
        raise VersionNegotiationError(
            f"{target} does not speak the pinned protocol version{'s' if len(allowed) > 1 else ''} "
            f"{', '.join(allowed)}: {verdict.reason}, which is how an initialize-era server answers. "
            f"Allow its revision (protocol=None negotiates, or pin '2025-11-25' or older){check_url}",
            requested=allowed)
    log.warning("%s did not answer server/discover within %.3g s (probe_timeout); trusting the pinned protocol "
                "version %s", target, terms.probe_timeout, version)
    conn.transport.negotiated(version, True)
    return Settled(target, versions.dialect_for(version))


def _settle_own_process(conn: Connection, target: Target | Transport, modern: str, version: str, terms: Terms,
                        starter: Starter) -> tuple[Connection, Settled]:
    """Settle the era of a server in a process of our own (stdio), one
    process per connect. The probe first; a JSON-RPC answer settles it
    (an error: `initialize` on the same process). Silence within
    `probe_timeout` is not taken for an answer: the server may still be
    starting (a first `npx -y` downloads its package), so `initialize`
    joins the probe in its pipe and the first answer that settles the era
    wins (`_race`). Another process is started only when this one died or
    wrote something that is not JSON-RPC after reading a request (some
    initialize-era servers exit on the probe), and then for `initialize`
    alone; one that failed without reading anything failed on its own and
    is reported at once, with its stderr."""
    identity = terms.identity()
    params = _discover_params(modern, identity)
    try:
        with terms.traced("server/discover", modern):
            discover = conn.send_request("server/discover", params, cancellable=False)
            answer = poll(conn, discover, terms.probe_timeout, on_log=terms.on_log)
        if answer is None:
            log.info("%s has not answered server/discover within %.3g s (probe_timeout); sending initialize "
                     "to the same process: the first answer settles the era", target, terms.probe_timeout)
            with terms.traced("initialize", version):
                answer, settled = _race(conn, discover, target, version, terms, identity)
            if settled is not None:
                # The whole probe_timeout went by: say so where a user looks,
                # once per server configuration (remembered below).
                log.warning("%s did not answer server/discover within %.3g s (probe_timeout) and answered "
                            "initialize: treating it as an initialize-era server from now on (remembered; "
                            "mcp_sync.forget_eras() forgets)", target, terms.probe_timeout)
                remember(_key(target), "initialize", persist=terms.persist)
                return conn, settled
        verdict = versions.read_probe_answer(answer, terms.allowed)
        if isinstance(verdict, Reprobe):  # a stateless-era server that refused our version
            verdict = _probe(conn, verdict.version, terms, True)
        if isinstance(verdict, UseStateless):
            return conn, _stateless(conn, target, verdict)
        if conn.failure is not None:
            raise copy_error(conn.failure)
        log.info("falling back to initialize on the same process: %s", verdict.reason)
        settled = _initialize(conn, target, version, terms)
    except TransportError as exc:
        if conn.transport.read_nothing():
            raise  # it failed before reading a request: a second start would fail the same way
        log.info("%s failed after the server/discover probe (%s); starting it again for initialize", target, exc)
        starter.abandon(conn, "restarting the server after the server/discover probe")
        conn = starter.start(target)
        try:
            settled = _initialize(conn, target, version, terms)
        except BaseException:
            starter.abandon(conn, "the connection could not be set up")
            raise
    remember(_key(target), "initialize", persist=terms.persist)
    return conn, settled


def _race(conn: Connection, discover: Pending, target: Target | Transport, version: str, terms: Terms,
          identity: Identity) -> tuple[dict[str, Any] | None, Settled | None]:
    """`initialize` sent behind a probe not answered yet: wait, within
    `terms.timeout`, for the first answer that settles the era. Returns
    (the probe's answer, None) when the probe was answered first, or with
    a `server/discover` result even after `initialize` was (it proves the
    stateless era, whatever `initialize` got); else (None, the settled
    initialize era). Whichever is not used is forgotten, never cancelled:
    a late answer to it is dropped."""
    init = send_initialize(conn, version, identity)
    answerer = terms.answerer(conn)
    deadline = deadline_in(terms.timeout)
    probing: Pending | None = discover
    while True:
        if probing is not None:
            answer = poll(conn, probing, 0, on_log=terms.on_log)
            if answer is not None:
                if _settles_era(answer, terms.allowed):
                    conn.abandon(init, "the server answered server/discover")
                    return answer, None
                probing = None  # an initialize-era server's refusal: initialize settles it
        left = remaining(deadline)
        if left is not None and left <= 0:
            conn.abandon(init, "initialize timed out")
            if probing is not None:
                conn.abandon(probing, "server/discover timed out")
            raise RequestTimeout(
                f"{conn.transport.describe()} answered neither server/discover within probe_timeout "
                f"({terms.probe_timeout:g} s) nor initialize in the {terms.timeout:g} s after it (timeout)",
                method="initialize", timeout=terms.timeout)
        response = poll(conn, init, _RACE_SLICE if left is None else min(_RACE_SLICE, left), on_log=terms.on_log,
                        on_server_request=answerer)
        if response is None:
            continue
        if probing is not None:
            # A server that takes requests at once may answer initialize
            # before the probe it read first (a refusal, or a session when it
            # speaks both eras): the probe gets a moment, and its answer
            # settles the era if it proves the stateless one. Only a server
            # that swallowed the probe pays the whole moment, once (its era
            # is remembered).
            grace = _RACE_GRACE if deadline is None else min(_RACE_GRACE, remaining(deadline))
            answer = poll(conn, probing, grace, on_log=terms.on_log)
            conn.abandon(probing, "the server answered initialize")
            if answer is not None and _settles_era(answer, terms.allowed):
                return answer, None
        session, asked = initialize(conn, version, terms.allowed, identity, timeout=remaining(deadline),
                                    on_log=terms.on_log, on_server_request=answerer,
                                    on_declared=terms.on_declared, response=response)
        return None, Settled(target, versions.dialect_for(session.protocol_version), session=session,
                             declared=initialize_capabilities(identity.capabilities, asked))


def _settles_era(answer: Mapping[str, Any], allowed: Sequence[str]) -> bool:
    """Whether a probe's answer settles the era by itself: anything but an
    initialize-era server's refusal (then `initialize` settles it)."""
    try:
        return not isinstance(versions.read_probe_answer(answer, allowed), FallBack)
    except VersionNegotiationError:
        return True  # raised again where the answer is read


def resume(conn: Connection, settled: Settled, terms: Terms, timeout: float | None) -> Settled:
    """Set up a new connection in the era already settled (a reconnect, a
    fork child): a stateless one only frames its messages, an
    initialize-era one gets a new session (within `timeout`)."""
    if settled.dialect.stateless:
        conn.transport.negotiated(settled.dialect.version, True)
        return settled
    return _initialize(conn, settled.target, settled.dialect.version, terms, timeout=timeout,
                       discovered=settled.discovered)


def renew(conn: Connection, settled: Settled, terms: Terms, deadline: float | None = None) -> Settled:
    """A new initialize-era session on `conn` (the server ended the last
    one), by `deadline` (a call's) at the latest."""
    timeout = terms.timeout
    if deadline is not None:
        left = remaining(deadline, at_least=0.001)
        timeout = left if timeout is None else min(timeout, left)
    return _initialize(conn, settled.target, settled.dialect.version, terms, timeout=timeout,
                       discovered=settled.discovered)


def check(conn: Connection, settled: Settled, terms: Terms, timeout: float) -> None:
    """Whether a stateless-era server answers on a new `conn` (opening one
    sends nothing): `server/discover` in the settled version; any answer
    will do. Raises what went wrong (`RequestTimeout`, a `TransportError`)."""
    version = settled.dialect.version
    with terms.traced("server/discover", version):
        conn.wait(conn.send_request("server/discover", _discover_params(version, terms.identity())),
                  timeout=timeout, on_log=terms.on_log)


def reprobe(conn: Connection, settled: Settled, refusal: UnsupportedProtocolVersion, terms: Terms,
            deadline: float | None = None) -> Settled:
    """After a -32022 on a ready stateless connection: settle the version
    again among those the server offered; raises `refusal` when none fits.
    `deadline` is the refused call's: the probe is made for that call, so
    it waits until then at the most (`probe_timeout` is the bound of a
    probe nobody waits on), and none is made once it has passed."""
    choice = next((v for v in terms.allowed if versions.dialect_for(v).stateless and v in refusal.supported), None)
    if expired(deadline):
        choice = None
    if choice is not None:
        verdict = _probe(conn, choice, terms, _restarts_server(settled.target, conn), until=deadline)
    if choice is None or not isinstance(verdict, UseStateless):
        # A copy: the frames its traceback will hold (this one and the
        # callers') hold `refusal`, which must not hold them in turn.
        raise copy_error(refusal)
    fresh = _stateless(conn, settled.target, verdict)
    return fresh if fresh.discovered is not None else fresh._replace(discovered=settled.discovered)


def _probe(conn: Connection, version: str, terms: Terms, restarts: bool,
           until: float | None = None) -> UseStateless | FallBack:
    with terms.traced("server/discover", version):
        return probe(conn, version, terms.allowed, terms.identity(), timeout=terms.probe_timeout,
                     on_log=terms.on_log, failure_means_initialize_era=restarts, until=until)


def _stateless(conn: Connection, target: Target | Transport, verdict: UseStateless) -> Settled:
    conn.transport.negotiated(verdict.version, True)
    discovered = DiscoverResult.from_wire(verdict.discover_result) if verdict.discover_result is not None else None
    return Settled(target, versions.dialect_for(verdict.version), discovered=discovered)


def _initialize(conn: Connection, target: Target | Transport, version: str, terms: Terms, *,
                timeout: float | None = None, discovered: DiscoverResult | None = None) -> Settled:
    identity = terms.identity()
    with terms.traced("initialize", version):
        session, asked = initialize(conn, version, terms.allowed, identity,
                                    timeout=terms.timeout if timeout is None else timeout,
                                    on_log=terms.on_log, on_server_request=terms.answerer(conn),
                                    on_declared=terms.on_declared)
    return Settled(target, versions.dialect_for(session.protocol_version), session=session,
                   discovered=discovered, declared=initialize_capabilities(identity.capabilities, asked))


def _initialize_remembered(conn: Connection, target: Target | Transport, remembered: str, version: str,
                           terms: Terms, starter: Starter) -> tuple[Connection, Settled]:
    """`initialize` straight away, over the transport the server chose
    before. Raises `_Changed` when that transport is not served any more."""
    fallback = target.fallback() if remembered == "sse" and isinstance(target, Target) else None
    if fallback is not None:
        # It chose the HTTP+SSE transport before: no refused POSTs this time.
        starter.abandon(conn, "using the HTTP+SSE transport the server chose before")
        try:
            conn = starter.start(fallback)
        except (ConnectError, HTTPStatusError) as exc:
            raise _Changed(str(exc)) from exc  # no event stream with an endpoint there any more
        try:
            settled = _initialize(conn, fallback, version, terms)
        except BaseException:
            starter.abandon(conn, "the connection could not be set up")
            raise
    else:
        conn, settled = _initialize_or_fall_back(conn, target, version, terms, starter)
    remember(_key(target), "sse" if settled.target.kind == "sse" else "initialize", persist=terms.persist)
    return conn, settled


def _initialize_or_fall_back(conn: Connection, target: Target | Transport, version: str, terms: Terms,
                             starter: Starter) -> tuple[Connection, Settled]:
    """`initialize` on `conn`; when the target refuses its POST the way a
    server without Streamable HTTP does, try the target's fallback (the old
    HTTP+SSE transport at the same URL), as the 2025-03-26 revision's
    backwards-compatibility rules say, and keep it (reconnects use it too).
    `conn` is the caller's to abandon when this raises."""
    try:
        return conn, _initialize(conn, target, version, terms)
    except HTTPStatusError as exc:
        fallback = target.fallback(exc) if isinstance(target, Target) and _refused_post(exc) else None
        if fallback is None:
            raise
        refusal = exc
    starter.abandon(conn, "trying the HTTP+SSE transport")
    try:
        new = starter.start(fallback)
    except McpError as exc:
        raise HTTPStatusError(f"{refusal} (the HTTP+SSE fallback failed too: {exc})", status=refusal.status,
                              body=refusal.body, headers=refusal.headers) from exc
    log.info("%s refused the Streamable HTTP POST (HTTP %d) and serves the HTTP+SSE transport: using it",
             getattr(target, "url", target), refusal.status)
    try:
        return new, _initialize(new, fallback, version, terms)
    except BaseException:
        starter.abandon(new, "the connection could not be set up")
        raise
