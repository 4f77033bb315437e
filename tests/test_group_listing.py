"""`Catalog`, a group's listing knowledge, on plain data: members whose
listings are lists of plain items, each task on a thread of its own, no
server. Where a listing must still be running, it waits for an event the
test sets, and a test waits for what it needs by a condition, never by
sleeping; a short deadline bounds only a listing held that way, which
cannot answer by it.

Last, the group built on it: a group dropped unclosed is collected by
reference counting alone (the catalog holds its group's functions weakly).
"""

from __future__ import annotations

import collections
import concurrent.futures
import gc
import threading
import warnings
import weakref
from collections.abc import Callable, Mapping
from types import SimpleNamespace
from typing import Any

import pytest

import mcp_sync
from mcp_sync.group_listing import Catalog
from mcp_sync.testing import demo_server
from mcp_sync.waiting import deadline_in

WAIT = 10  # seconds: only a failing test waits this long


def tools(*names: str) -> list[Any]:
    return [SimpleNamespace(name=name) for name in names]


class Members:
    """The group's side of a catalog: `answers[member, kind]` is what each
    listing of it returns, one entry per listing in the order asked (the
    last repeats), or an exception to raise; the listings numbered (from 1)
    in `held[member]` wait for `release(member, number)` first."""

    def __init__(self, answers: Mapping[tuple[str, str], list[Any]], held: Mapping[str, set[int]] | None = None):
        self.answers = answers
        self.gates = {(member, number): threading.Event() for member, numbers in (held or {}).items()
                      for number in numbers}
        self.lock = threading.Condition()
        self.asked: collections.Counter[tuple[str, str]] = collections.Counter()
        self.started: collections.Counter[str] = collections.Counter()
        self.ended: collections.Counter[str] = collections.Counter()
        self.threads: list[threading.Thread] = []

    def list_member(self, member: str, kind: str, options: Mapping[str, Any]) -> list[Any]:
        with self.lock:
            self.asked[member, kind] += 1
            number = self.asked[member, kind]
            self.lock.notify_all()
        gate = self.gates.get((member, number))
        if gate is not None:
            assert gate.wait(WAIT), f"listing {number} of {member} was never released"
        given = self.answers[member, kind]
        answer = given[min(number, len(given)) - 1]
        if isinstance(answer, BaseException):
            raise answer
        return list(answer)

    def start(self, member: str, task: Callable[[], list[Any]]) -> concurrent.futures.Future[list[Any]]:
        future: concurrent.futures.Future[list[Any]] = concurrent.futures.Future()

        def run() -> None:
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(task())
                except BaseException as exc:
                    future.set_exception(exc)
                with self.lock:
                    self.ended[member] += 1
                    self.lock.notify_all()

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        with self.lock:
            self.threads.append(thread)
            self.started[member] += 1
            self.lock.notify_all()
        return future

    def release(self, member: str, number: int) -> None:
        self.gates[member, number].set()

    def wait_for(self, predicate: Callable[[], bool]) -> None:
        with self.lock:
            assert self.lock.wait_for(predicate, WAIT), "never happened"

    def join(self) -> None:
        for gate in self.gates.values():
            gate.set()
        for thread in list(self.threads):
            thread.join(WAIT)


def test_owners_are_the_members_that_listed_the_name_last_in_the_members_order():
    members = Members({("b", "tools"): [tools("x")], ("a", "tools"): [tools("y", "x")],
                       ("c", "tools"): [tools("x")], ("d", "tools"): [mcp_sync.ConnectError("down")]})
    catalog = Catalog(["b", "a", "c", "d"], members.list_member, members.start)
    assert catalog.owners("tools", "x") == [] and catalog.known("tools") == {}  # nothing listed yet

    found, errors = catalog.gather("tools", {})
    assert list(found) == ["b", "a", "c"] and [t.name for t in found["a"]] == ["y", "x"]
    assert list(errors) == ["d"] and isinstance(errors["d"], mcp_sync.ConnectError)
    assert catalog.owners("tools", "x") == ["b", "a", "c"]
    assert catalog.owners("tools", "y") == ["a"]
    assert catalog.owners("tools", "z") == [] and catalog.owners("prompts", "x") == []
    assert catalog.offered("tools", [("c", "y"), ("c", "x"), ("a", "y"), ("d", "x")]) == [("c", "x"), ("a", "y")]
    assert "d" not in catalog.known("tools")  # a member that failed is not taken to offer nothing
    members.join()


def test_resource_owners_prefer_the_members_listing_the_uri_to_those_with_a_matching_template():
    resources = {("a", "resources"): [[SimpleNamespace(uri="notes://1")]], ("b", "resources"): [[]],
                 ("c", "resources"): [[]]}
    templates = {("a", "resource_templates"): [[]],
                 ("b", "resource_templates"): [[SimpleNamespace(uri_template="notes://{id}")]],
                 ("c", "resource_templates"): [[SimpleNamespace(uri_template="files://{+path}"),
                                                SimpleNamespace(uri_template="notes://{id}")]]}
    members = Members({**resources, **templates})
    catalog = Catalog(["a", "b", "c"], members.list_member, members.start)
    assert catalog.relist("resources") == {} and catalog.relist("resource_templates") == {}
    assert catalog.resource_owners("notes://1") == ["a"]  # listed: the templates that match it too are not asked
    assert catalog.resource_owners("notes://2") == ["b", "c"]
    assert catalog.resource_owners("notes://2/x") == []  # a simple {var} is one path segment
    assert catalog.resource_owners("files://a/b") == ["c"]
    members.join()


def test_a_listing_again_still_running_is_shared_by_the_callers_that_need_it():
    # Two routing callers need the same member's listing at once: one
    # listing, both waiting for it. Member "b" answers at once, so each
    # caller starts a listing of it (after "a", in the members' order): its
    # second start says the second caller has passed "a".
    members = Members({("a", "tools"): [tools("x")], ("b", "tools"): [tools("y")]}, held={"a": {1, 2}})
    catalog = Catalog(["a", "b"], members.list_member, members.start)
    results: list[dict[str, mcp_sync.McpError]] = []
    callers = [threading.Thread(target=lambda: results.append(catalog.relist("tools", deadline_in(WAIT))))
               for _ in range(2)]
    callers[0].start()
    members.wait_for(lambda: members.asked["a", "tools"] == 1 and members.ended["b"] == 1)
    callers[1].start()
    members.wait_for(lambda: members.started["b"] == 2)
    members.release("a", 1)
    for caller in callers:
        caller.join(WAIT)
    assert results == [{}, {}]
    assert members.asked["a", "tools"] == 1, "the second caller listed the member again"
    assert members.started["a"] == 1 and members.asked["b", "tools"] == 2
    assert catalog.owners("tools", "x") == ["a"]

    # Once it has ended, the next caller lists again (the second listing,
    # held: still running after the call) ...
    errors = catalog.relist("tools", deadline_in(0.05))
    assert members.started["a"] == 2 and isinstance(errors["a"], mcp_sync.RequestTimeout)
    members.wait_for(lambda: members.asked["a", "tools"] == 2)
    # ... and a listing for a caller of its own (a public listing) is
    # never shared: it answers while the one above still runs.
    found, errors = catalog.gather("tools", {})
    assert errors == {} and members.asked["a", "tools"] == 3
    members.join()


def test_a_listing_that_outlived_its_callers_deadline_is_shared_with_the_next_caller():
    # The case sharing is for: a member slow to answer, reported as a
    # timeout, its listing going on; the next caller waits for that one
    # rather than holding another of the group's threads.
    members = Members({("slow", "tools"): [tools("x")]}, held={"slow": {1}})
    catalog = Catalog(["slow"], members.list_member, members.start)
    for _ in range(2):
        errors = catalog.relist("tools", deadline_in(0.05))  # the held listing cannot answer by then
        assert list(errors) == ["slow"] and isinstance(errors["slow"], mcp_sync.RequestTimeout)
    assert members.started["slow"] == 1 and catalog.owners("tools", "x") == []
    members.release("slow", 1)
    members.wait_for(lambda: members.ended["slow"] == 1)
    assert catalog.owners("tools", "x") == ["slow"]  # what it found, though its callers had gone
    members.join()


def test_the_listing_asked_last_is_kept_when_an_earlier_one_ends_after_it():
    # A name moved from "x" to "y": the listing asked before the move
    # answers last, and must not bring "x" back.
    members = Members({("a", "tools"): [tools("x"), tools("y")]}, held={"a": {1}})
    catalog = Catalog(["a"], members.list_member, members.start)
    earlier: list[dict[str, list[Any]]] = []
    caller = threading.Thread(target=lambda: earlier.append(catalog.gather("tools", {})[0]))
    caller.start()
    members.wait_for(lambda: members.asked["a", "tools"] == 1)
    later, _ = catalog.gather("tools", {})
    assert [t.name for t in later["a"]] == ["y"]
    members.release("a", 1)
    caller.join(WAIT)
    assert [t.name for t in earlier[0]["a"]] == ["x"]  # its caller gets what it asked for
    assert catalog.known("tools") == {"a": frozenset({"y"})}
    members.join()


def test_a_closed_catalog_starts_no_listing():
    members = Members({("a", "tools"): [tools("x")]})
    catalog = Catalog(["a"], members.list_member, members.start)
    catalog.close()
    with pytest.raises(mcp_sync.ConnectionClosed):
        catalog.gather("tools", {})
    with pytest.raises(mcp_sync.ConnectionClosed):
        catalog.relist("tools", deadline_in(WAIT))
    assert members.started == {}


def test_after_a_fork_the_parents_listings_are_not_shared_and_what_was_listed_stays():
    members = Members({("a", "tools"): [tools("x")]}, held={"a": {2}})
    catalog = Catalog(["a"], members.list_member, members.start)
    assert catalog.relist("tools") == {}
    assert list(catalog.relist("tools", deadline_in(0.05))) == ["a"]  # held: still running, shared
    members.wait_for(lambda: members.asked["a", "tools"] == 2)
    catalog.after_fork()  # (as the fork hook calls it: in a child, the parent's listing would never end)
    assert catalog.known("tools") == {"a": frozenset({"x"})}
    assert catalog.relist("tools", deadline_in(WAIT)) == {}  # a listing of its own, the held one still running
    assert members.started["a"] == 3
    members.join()


def test_the_catalog_holds_its_members_side_weakly():
    members = Members({("a", "tools"): [tools("x")]})
    catalog = Catalog(["a"], members.list_member, members.start)
    gone = weakref.ref(members)
    del members
    assert gone() is None, "the catalog kept its members' side alive"
    with pytest.raises(mcp_sync.ConnectionClosed):
        catalog.gather("tools", {})


def test_a_group_dropped_unclosed_after_routing_is_collected_by_reference_counting_alone():
    # The catalog calls back into its group: held strongly, that would be a
    # cycle, and a dropped group (with its clients, whose finalizers close
    # them) would wait for the cycle collector.
    group = mcp_sync.ClientGroup({"a": demo_server(), "b": demo_server()}, timeout=WAIT)
    assert group.list_tools().errors == {}
    with pytest.raises(mcp_sync.RoutingError):
        group.call_tool("no_such_tool")  # routed by a listing again: nobody offers it
    with pytest.raises(mcp_sync.RoutingError):
        group.read_resource("nothing://here")
    gone, client = weakref.ref(group), weakref.ref(group.client("a"))
    gc.disable()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            del group
            assert gone() is None, "the group was not collected"
            assert client() is None, "its client was not collected"
    finally:
        gc.enable()
