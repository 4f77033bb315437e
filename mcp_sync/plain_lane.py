"""The plain call's lane: the first attempt of a `tools/call` made with no
options, on a connection that is open and settled, without the general
path's per-call work.

Most calls are plain (`Pipeline.call_tool_plain`), and for them most of what
the retry loop works out on every call is the same from call to call: the
request's `_meta`, the answerer of the server's requests, whether the call
may be cancelled. A `PlainLane` holds those, made once per connection and
settled version. It makes the attempt the retry loop would make: the same
message, under the same admission slot, with the same keepalive marks and
the same metrics sample. Whatever is not a complete result (an error
response, a failure the retry loop mends, an `input_required` or `task`
answer) goes, with the attempt, to the one retry loop (`Resume`), inside
the same slot, which goes on from it as if it had made the attempt: the
mending stays in one place.

Threads. A lane is immutable once made; the pipeline swaps its lane whole,
and tells a stale one by the identity of its connection and settled terms.
The per-thread state (`calling`) is the pipeline's, kept here so that both
can read it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Union

from .admission import Slot
from .engine_threads import ENGINE_THREAD_PREFIX
from .errors import ConnectError, ConnectionClosed, Overloaded, RequestTimeout, SessionExpired

if TYPE_CHECKING:
    from .connection import Connection, Pending
    from .metrics import Metrics
    from .negotiation import Settled
    from .pipeline import Call
    from .protocol.versions import Dialect
    from .supervisor import Supervisor

#: Per thread: whether its call holds an admission slot (`held`, set around
#: a call's attempts), and whether its calls adopt a server request that
#: names no call (`adopts`: a thread not the engine's; worked out at its
#: first call, since an engine thread's name is given when it starts and
#: never changes).
calling = threading.local()

#: The failures the retry loop may mend (see `Pipeline._send_mending`).
MENDABLE = (SessionExpired, ConnectionClosed, ConnectError)


class Attempt(NamedTuple):
    """One sending of a request, as the retry loop goes on from it: where
    it was sent (`conn`, its session `generation`), its `pending` (None when
    it failed before it was registered), the `dialect` and wire `params` it
    was sent with, and its `outcome`: the response message, or the failure
    (one of `MENDABLE`)."""

    conn: Connection
    generation: int
    pending: Pending | None
    dialect: Dialect
    params: dict[str, Any]
    outcome: Union[dict[str, Any], BaseException]


#: The retry loop going on from an attempt: (call, attempt, deadline) ->
#: the round's result, whatever its resultType (or it raises).
Resume = Callable[["Call", Attempt, "float | None"], dict[str, Any]]


def adopts() -> bool:
    """Whether the calling thread's calls adopt a server request that names
    no call (not on the engine's own threads)."""
    adopting: bool | None = getattr(calling, "adopts", None)
    if adopting is None:
        adopting = calling.adopts = not threading.current_thread().name.startswith(ENGINE_THREAD_PREFIX)
    return adopting


#: A failed request's metrics outcome, by what it raised (the first match).
_FAILED_OUTCOMES = ((RequestTimeout, "timeout"), (Overloaded, "shed"), (KeyboardInterrupt, "interrupted"))


def outcome_of(failure: BaseException) -> str:
    """The metrics outcome of a request that ended with `failure`."""
    for kind, outcome in _FAILED_OUTCOMES:
        if isinstance(failure, kind):
            return outcome
    return "error"


def account(metrics: Metrics, supervisor: Supervisor, method: str, outcome: str, started: float) -> None:
    """A request's metrics sample, once its attempts are over (`outcome`:
    "ok", "error", "timeout", "interrupted" or "shed")."""
    if outcome == "shed":
        metrics.count("shed")  # refused before anything was sent: not a request
        return
    metrics.finished(method, outcome, time.monotonic() - started)
    if outcome in ("timeout", "interrupted"):
        settled = supervisor.settled
        if settled is not None and settled.dialect.may_cancel(method):
            metrics.count("cancellations")  # the engine told the server it gave up


class PlainLane:
    """The plain `tools/call` on one connection, with one settled version
    and the client's own input handlers (see the module docstring)."""

    __slots__ = ("conn", "settled", "_meta", "_answer", "_cancellable", "_supervisor", "_metrics",
                 "_timeout", "_max_total", "_on_log", "_resume")

    def __init__(self, conn: Connection, settled: Settled, meta: Mapping[str, Any],
                 answer: Callable[[dict[str, Any]], None], supervisor: Supervisor, metrics: Metrics,
                 timeout: float | None, max_total: float | None, on_log: Callable[[dict[str, Any]], None],
                 resume: Resume) -> None:
        self.conn = conn
        self.settled = settled
        self._meta = meta
        self._answer = answer
        self._cancellable = "tools/call" not in settled.dialect.uncancellable
        self._supervisor = supervisor
        self._metrics = metrics
        self._timeout = timeout
        self._max_total = max_total
        self._on_log = on_log
        self._resume = resume

    def call_tool(self, call: Call, started: float) -> dict[str, Any]:
        """The result of the plain `call` (a `tools/call` with no options
        and the client's own handlers) begun at `started`: complete from
        this attempt, else whatever the retry loop made of it. The caller
        checked that the lane is current and that its thread holds no
        slot."""
        wire = dict(call.params or ())
        if self._meta:
            wire["_meta"] = self._meta
        conn, supervisor, timeout = self.conn, self._supervisor, self._timeout
        deadline = None if timeout is None else started + timeout
        generation = supervisor.session_generation
        adopting = getattr(calling, "adopts", None)
        if adopting is None:
            adopting = adopts()
        keepalive = supervisor.keepalive
        if keepalive is not None:
            keepalive.busy()
        result: Any
        try:
            with Slot(supervisor.admission, deadline):
                calling.held = True
                try:
                    if timeout is not None:  # what waiting for the slot left of the call's time
                        left = deadline - time.monotonic()  # type: ignore[operator]
                        if left <= timeout - 0.01:
                            timeout = max(left, 0.001)
                    pending = None
                    try:
                        pending = conn.send_request("tools/call", wire, cancellable=self._cancellable,
                                                    adopts=adopting)
                        response = conn.wait(pending, timeout=timeout, max_total_timeout=self._max_total,
                                             on_log=self._on_log, on_server_request=self._answer)
                    except MENDABLE as failure:
                        attempt = Attempt(conn, generation, pending, self.settled.dialect, wire, failure)
                        result = self._resume(call, attempt, deadline)
                    else:
                        if supervisor.attempts:
                            supervisor.alive()
                        result = response.get("result")
                        if (response.get("error") is not None or type(result) is not dict
                                or result.get("resultType", "complete") != "complete"):
                            attempt = Attempt(conn, generation, pending, self.settled.dialect, wire, response)
                            result = self._resume(call, attempt, deadline)
                finally:
                    calling.held = False
        except BaseException as failure:
            if keepalive is not None:
                keepalive.idle()
            account(self._metrics, supervisor, "tools/call", outcome_of(failure), started)
            raise
        if keepalive is not None:
            keepalive.touch()
            keepalive.idle()
        self._metrics.finished("tools/call", "ok", time.monotonic() - started)  # `account()`'s "ok"
        return result  # type: ignore[no-any-return]


__all__ = ["Attempt", "MENDABLE", "PlainLane", "Resume", "account", "adopts", "calling", "outcome_of"]
