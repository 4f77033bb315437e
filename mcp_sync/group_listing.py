"""What a group's members listed: `Catalog`, the listing knowledge of a
`ClientGroup`.

What it owns: a listing of one kind (tools, prompts, resources, resource
templates) across every member at once, one task per member handed to the
group's lanes; the names (tool and prompt names, URIs, URI templates) each
member listed last, kept from the listing asked last; the listings again
still running, shared, so that a member slow to answer holds one thread per
kind, not one per caller; and the questions routing asks of them: which
members offer this name, this URI.

What it must not know: clients and connects, how a task is run (the
lanes and their threads are the group's), qualified names, or the group
itself. It is given the members' names in order and two functions:
`list_member(member, kind, options)`, what one member lists now (the
group connects it and asks), and `start(member, task)`, which runs `task`
on that member's lane and gives its future. The group decides what a name
routes to and what it raises; this module only says who offered what.
"""

from __future__ import annotations

import concurrent.futures
import functools
import re
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from . import forking
from .errors import ConnectionClosed, McpError, RequestTimeout
from .waiting import remaining

__all__ = ["Catalog", "LEAST_TIMEOUT", "ListMember", "Start"]

#: The least timeout a request made with what is left of a deadline gets.
LEAST_TIMEOUT = 1e-3

#: `list_member(member, kind, options)`: what `member` lists of `kind` now, asked with `options`.
ListMember = Callable[[str, str, Mapping[str, Any]], list[Any]]
#: `start(member, task)`: `task` run on `member`'s lane; its future.
Start = Callable[[str, Callable[[], list[Any]]], concurrent.futures.Future[list[Any]]]


class Catalog:
    """The listings of a group's members, and who offered what.

    `gather()` lists one kind on every member at once; `relist()` does it
    again for routing, sharing a member's listing still running. Every
    listing that ends records the names its member offered, unless a
    listing of that member and kind asked later ended first (so a moved
    name is never routed back). `owners()` and `offered()` answer from one
    look at what is recorded, `resource_owners()` from one look per kind,
    in the members' order.

    Lock discipline: `_lock` guards `_names` (replaced whole, never changed
    in place, so a look at it is a snapshot), `_listed`, `_listings`,
    `_relisting` and `_closed`. Tasks are handed to `start` under it, so a
    shared listing is looked up, started and recorded at once, and none
    starts once `close()` returned; `start` takes the lanes' lock under it.
    The group takes it under its own lock (in `close()`), never the
    reverse. `list_member` runs without it, on the lanes' threads.

    Interrupts: a Ctrl-C in `start` records no shared listing for that
    member (the next caller starts one; the lanes undo their own count),
    and one while a caller waits leaves the tasks running, bounded by the
    members' timeouts.

    Lifetime: the two functions are bound methods (the group's), held
    weakly (`weakref.WeakMethod`), and strongly only by the tasks handed
    to the lanes: nothing the group owns refers back to it, so a group
    dropped unclosed is still collected at once (its clients' finalizers
    close them), and a task queued or running keeps it until that task
    ends. Once their owner is gone, `gather()` raises `ConnectionClosed`.

    After `os.fork()` the group calls `after_fork()`: a new lock (one held
    at the fork would never be let go) and no shared listings (the
    parent's futures would never end here); what was recorded stays.
    """

    def __init__(self, members: Sequence[str], list_member: ListMember, start: Start) -> None:
        self._members = tuple(members)
        self._list_member = weakref.WeakMethod(list_member)
        self._start = weakref.WeakMethod(start)
        self._lock = threading.Lock()
        self._closed = False
        #: kind -> member -> the names (or URIs, templates) it listed last.
        self._names: dict[str, dict[str, frozenset[str]]] = {}
        #: (member, kind) -> the number of the listing `_names` holds (the latest asked).
        self._listed: dict[tuple[str, str], int] = {}
        self._listings = 0
        #: The listings again still running, by (member, kind): one each at
        #: most (`gather(shared=True)`).
        self._relisting: dict[tuple[str, str], concurrent.futures.Future[list[Any]]] = {}

    def after_fork(self) -> None:
        """In a forked child: a new lock, and no shared listings."""
        self._lock = threading.Lock()
        self._relisting = {}

    def close(self) -> None:
        """No listing starts after this: `gather()` raises `ConnectionClosed`."""
        with self._lock:
            self._closed = True

    # -- listings ----------------------------------------------------------------------

    def gather(self, kind: str, options: Mapping[str, Any], until: float | None = None,
               shared: bool = False) -> tuple[dict[str, list[Any]], dict[str, McpError]]:
        """Each member's listing of `kind`, asked with `options`, on the
        lanes: what each member that answered listed, and the error of each
        that did not, both in the members' order. By `until` (a deadline), a
        member not done yet is reported as a timeout (its listing goes on,
        bounded by its own timeouts). `shared`: a listing of the same member
        and kind still running (one that outlived its caller's deadline) is
        waited for instead of a new one, so that a member slow to answer
        never holds more than one of the threads."""
        forking.check()  # the lock, the lanes and the shared listings are the parent's after a fork from C
        list_member, start = self._list_member(), self._start()
        with self._lock:
            if self._closed or list_member is None or start is None:
                raise ConnectionClosed("the client group is closed")
            futures = {}
            for member in self._members:
                running = self._relisting.get((member, kind)) if shared else None
                if running is None or running.done():
                    running = start(member, functools.partial(self._list_one, member, kind, options, list_member))
                    if shared:
                        self._relisting[(member, kind)] = running
                futures[member] = running
        found: dict[str, list[Any]] = {}
        errors: dict[str, McpError] = {}
        for member, future in futures.items():
            try:
                found[member] = future.result(timeout=remaining(until))
            except concurrent.futures.TimeoutError:
                if not shared:  # not started yet: dropped, so a lane holds only what someone waits for
                    future.cancel()
                errors[member] = RequestTimeout(f"listing the {kind} of {member!r} took longer than the call's "
                                                f"timeout", method=f"{kind}/list", timeout=None)
            except concurrent.futures.CancelledError:
                errors[member] = ConnectionClosed("the client group is closed")
            except McpError as exc:
                errors[member] = exc
        return found, errors

    def relist(self, kind: str, until: float | None = None) -> dict[str, McpError]:
        """List `kind` again on every member, for routing (by `until`, when
        given: each request, and the wait for all of them, a listing still
        running shared); the error of each member that could not be asked.
        What the others listed is recorded: ask `owners()` after."""
        options = {} if until is None else {"timeout": remaining(until, at_least=LEAST_TIMEOUT)}
        return self.gather(kind, options, until, shared=until is not None)[1]

    def _list_one(self, member: str, kind: str, options: Mapping[str, Any], list_member: ListMember) -> list[Any]:
        with self._lock:
            self._listings += 1
            number = self._listings
        found = list_member(member, kind, options)
        names = _names_of(kind, found)
        with self._lock:
            if number > self._listed.get((member, kind), 0):  # else a listing asked later ended first
                self._listed[member, kind] = number
                self._names = {**self._names, kind: {**self._names.get(kind, {}), member: names}}
        return found

    # -- who offers what ---------------------------------------------------------------

    def known(self, kind: str) -> dict[str, frozenset[str]]:
        """Member -> the names (URIs, templates) of `kind` it listed last;
        a member never listed is absent."""
        with self._lock:
            return dict(self._names.get(kind, {}))

    def owners(self, kind: str, name: str) -> list[str]:
        """The members whose last listing of `kind` has `name`, in order."""
        return [member for member, _ in self.offered(kind, ((member, name) for member in self._members))]

    def offered(self, kind: str, candidates: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        """Of the (member, name) `candidates`, those whose member's last
        listing of `kind` has that name, in the order given."""
        known = self.known(kind)
        return [(member, name) for member, name in candidates if name in known.get(member, ())]

    def resource_owners(self, uri: str) -> list[str]:
        """The members that listed `uri` last, or else, when none did, those
        with a URI template it matches; in order."""
        exact = self.owners("resources", uri)
        if exact:
            return exact
        templates = self.known("resource_templates")
        return [member for member in self._members if any(_template_matches(t, uri) for t in templates.get(member, ()))]


def _names_of(kind: str, found: list[Any]) -> frozenset[str]:
    """What routing knows items of `kind` by: tool and prompt names, resource URIs, URI templates."""
    if kind == "tools" or kind == "prompts":
        return frozenset(item.name for item in found)
    if kind == "resources":
        return frozenset(item.uri for item in found)
    return frozenset(item.uri_template for item in found)


def _template_matches(template: str, uri: str) -> bool:
    """Whether `uri` could come from an RFC 6570 `template`. Only for routing,
    so it is lenient: a simple `{var}` stands for one path segment, every
    other expression for anything."""
    pattern = ""
    for literal, expression in re.findall(r"([^{]*)(\{[^}]*\})?", template):
        pattern += re.escape(literal)
        if expression:
            pattern += "[^/?#]*" if re.fullmatch(r"\{[A-Za-z0-9_.,%]+\}", expression) else ".*"
    return re.fullmatch(pattern, uri) is not None
