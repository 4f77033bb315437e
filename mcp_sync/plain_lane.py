"""The plain call's lane: the first attempt of a `tools/call` made with no
options, on a connection that is open and settled, without the retry
loop's per-call work.

Most calls are plain (`Pipeline.call_tool_plain`), and for them most of what
the retry loop works out on every call is the same from call to call: the
request's `_meta`, the answerer of the server's requests, whether the call
may be cancelled. A `PlainLane` holds those, made once per connection and
settled version. `Pipeline.send()` runs it in place of the retry loop,
inside the same admission slot, keepalive marks and metrics sample (one
wrapper for every request). It makes the attempt the retry loop would make,
with the same message; whatever is not a complete result (an error
answer, a failure the retry loop mends, an `input_required` or `task`
answer) goes, with the attempt, to the one retry loop (`Resume`), which
goes on from it as if it had made the attempt: the mending stays in one
place. A lane found stale once its call holds the slot (a reconnect or a
re-discovery while it waited) hands the call to the retry loop whole.

Threads. A lane is immutable once made; the pipeline swaps its lane whole,
and tells a stale one by the identity of its connection and settled terms.
The per-thread state (`calling`) is the pipeline's, kept here so that both
can read it.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Union

from .connection import State
from .engine_threads import ENGINE_THREAD_PREFIX
from .errors import ConnectError, ConnectionClosed, SessionExpired

if TYPE_CHECKING:
    from .connection import Connection, Pending
    from .negotiation import Settled
    from .pipeline import Call, Plan
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


#: The retry loop, going on from an attempt (or from scratch with None):
#: (call, plan, attempt) -> the round's result, whatever its resultType.
Resume = Callable[["Call", "Plan", "Attempt | None"], dict[str, Any]]

_OPEN = State.OPEN


def adopts() -> bool:
    """Whether the calling thread's calls adopt a server request that names
    no call (not on the engine's own threads)."""
    adopting: bool | None = getattr(calling, "adopts", None)
    if adopting is None:
        adopting = calling.adopts = not threading.current_thread().name.startswith(ENGINE_THREAD_PREFIX)
    return adopting


class PlainLane:
    """The plain `tools/call` on one connection, with one settled version
    and the client's own input handlers (see the module docstring)."""

    __slots__ = ("conn", "settled", "_meta", "_answer", "_cancellable", "_supervisor", "_on_log", "_resume")

    def __init__(self, conn: Connection, settled: Settled, meta: Mapping[str, Any],
                 answer: Callable[[dict[str, Any]], None], supervisor: Supervisor,
                 on_log: Callable[[dict[str, Any]], None], resume: Resume) -> None:
        self.conn = conn
        self.settled = settled
        self._meta = meta
        self._answer = answer
        self._cancellable = "tools/call" not in settled.dialect.uncancellable
        self._supervisor = supervisor
        self._on_log = on_log
        self._resume = resume

    def send(self, call: Call, plan: Plan) -> dict[str, Any]:
        """One round's result for the plain `call` (a `tools/call` with no
        options and the client's own handlers) under `plan`, its thread
        holding the call's admission slot (`Pipeline.send()`): complete
        from this attempt, else whatever the retry loop made of it."""
        conn, supervisor = self.conn, self._supervisor
        if (conn is not supervisor.conn or self.settled is not supervisor.settled or conn.state is not _OPEN
                or supervisor.closed):
            # Stale since the caller looked (a reconnect, a re-discovery or
            # a close() begun while the call waited for its slot): the retry
            # loop, whole, which knows what to do about it.
            return self._resume(call, plan, None)
        generation = supervisor.session_generation
        wire = dict(call.params or ())
        if self._meta:
            wire["_meta"] = self._meta
        adopting = getattr(calling, "adopts", None)
        if adopting is None:
            adopting = adopts()
        pending = None
        try:
            pending = conn.send_request("tools/call", wire, cancellable=self._cancellable, adopts=adopting)
            response = conn.wait(pending, timeout=plan.timeout, until=plan.deadline, max_total_timeout=plan.max_total,
                                 on_log=self._on_log, on_server_request=self._answer)
        except MENDABLE as failure:
            attempt = Attempt(conn, generation, pending, self.settled.dialect, wire, failure)
        except BaseException:
            # Invariant: a call registered here is forgotten (and cancelled)
            # whatever ends it but a failure the retry loop goes on from.
            # `wait()` abandons it on anything raised inside its `try`; an
            # interrupt landing as `wait()` starts, before that `try`, is
            # this one's (a second `abandon()` does nothing).
            conn.abandon_any(pending)
            raise
        else:
            if supervisor.attempts:
                supervisor.alive()
            result = response.get("result")
            if (response.get("error") is None and type(result) is dict
                    and result.get("resultType", "complete") == "complete"):
                return result
            attempt = Attempt(conn, generation, pending, self.settled.dialect, wire, response)
        # Out of the `except`: what the retry loop raises or calls on does
        # not run "during the handling" of this attempt's failure.
        try:
            return self._resume(call, plan, attempt)
        finally:
            del attempt  # a failure raised again holds this frame: no cycle through it


__all__ = ["Attempt", "MENDABLE", "PlainLane", "Resume", "adopts", "calling"]
