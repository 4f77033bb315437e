"""Several servers as one: `ClientGroup`.

Owns: a `Client` per server, connected on first use (once, however many
threads need it at the same moment), and connected anew at its next use
once it failed for good (its reconnect policy gave up), at most once per
the policy's `max_delay`, so a server back after an outage serves again;
listings of tools, resources and prompts across every server at once, on
a small pool of threads the group owns, with each server's failure
reported beside the others' results; qualified names (`server.tool`) and
the routing of calls to the server a name belongs to. What each server
listed, and the listings that keep it so, are its `Catalog`'s
(`group_listing.py`), which knows the servers only by name.

Must not know: how a client talks to its server. It uses the public API of
`Client`, made first and opened after (`Client(...)` then `open()`), so
that `close()` can end a connect in progress, and every option and
guarantee of a single client (timeouts, reconnects, thread safety) holds
per server, until the client is failed for good and replaced.

Lock discipline: `_lock` guards `_closed` and each slot's `client` and
`connecting`; a slot's own `lock` is held for the whole of its connect, so
threads that need the same server connect it once, and guards its
`renew_at`. A caller that finds a member `failed` looks again under it,
taken without waiting (held: a connect runs, whose outcome it shares), so
none meets the old failure once a fresh connect began. `close()` takes
`_lock` first, closes the catalog under it (no listing starts once the
group is closed), and closes a connect in progress (which ends it at once)
before it waits for any slot's lock. The catalog's lock is taken under
`_lock`, the lanes' under the catalog's, never the reverse. After
`os.fork()` the child gets new locks and no pool (the parent's threads
were not copied); each client reconnects by itself.

Why a pool owned by the group and not a thread per listing: the threads are
bounded (`max_workers`) and `close()` joins them, so no thread outlives
the group; a listing waits for its own tasks only, each of which is bounded
by its server's connect and request timeouts. Each server's tasks run one
at a time (`_Lanes`): a server slow to connect or answer holds one of the
threads, never those the other servers' tasks need.
"""

from __future__ import annotations

import collections
import concurrent.futures
import inspect
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

import attrs

from . import forking
from .client import Client, RequestOptions, connect
from .errors import ConnectionClosed, InvalidParams, McpError, RequestTimeout, RoutingError
from .group_listing import LEAST_TIMEOUT, Catalog
from .options import (ClientOptions, Reconnect, check_prompt_arguments, check_request_options,
                      check_tool_arguments)
from .shared_attempt import SharedAttempt
from .transports import _http_options, resolve_target
from .types import CallToolResult, GetPromptResult, Prompt, ReadResourceResult, Resource, ResourceTemplate, Tool
from .waiting import deadline_in, expired, remaining

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["ClientGroup", "GroupItem", "Listing"]

T = TypeVar("T")
_T = TypeVar("_T")

log = logging.getLogger("mcp_sync.group")

#: The keyword arguments of `connect()` that configure a client (not a URL's HTTP options).
_CLIENT_OPTIONS = frozenset(p for p in inspect.signature(connect).parameters if p not in ("target", "http_options"))

#: Which server capability a listing needs: a server without it has nothing to list.
_CAPABILITY = {"tools": "tools", "prompts": "prompts", "resources": "resources", "resource_templates": "resources"}


@attrs.frozen
class GroupItem(Generic[T]):
    """One tool, prompt or resource of a group listing: `server` offers it,
    `item` is the definition as that server listed it, and `name` is what to
    give the group back: the qualified name (`"server.tool"`) of a tool or
    prompt, the URI (or URI template) of a resource.

    Example::

        for entry in group.list_tools():
            print(entry.name, "-", entry.item.description)
    """

    server: str
    """The name of the server that offers it."""
    name: str
    """What to give the group back: a qualified tool or prompt name, a URI or URI template."""
    item: T
    """The `Tool`, `Prompt`, `Resource` or `ResourceTemplate` as the server listed it."""


@attrs.frozen
class Listing(Generic[T]):
    """What a group listing found: `items` from every server that answered,
    and `errors`, the `McpError` of each server that did not (not raised,
    so one dead server costs only its own entries). Iterating goes over
    `items`.

    Example::

        listing = group.list_tools()
        for server, error in listing.errors.items():
            print(f"{server} is unavailable: {error}")
        names = [entry.name for entry in listing]
    """

    items: list[GroupItem[T]]
    """What every server that answered listed, server by server in the group's order."""
    errors: dict[str, McpError]
    """The error of each server that did not answer, by server name."""

    def __iter__(self) -> Iterator[GroupItem[T]]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    @property
    def names(self) -> list[str]:
        """The `name` of every item, in order."""
        return [entry.name for entry in self.items]


@attrs.define
class _Slot:
    target: Any
    lock: threading.Lock = attrs.field(factory=threading.Lock)
    client: Client | None = None
    #: The client being connected right now (under `lock`), for `close()`.
    connecting: Client | None = None
    #: Threads that need the server while it connects wait for that connect's
    #: outcome, success or error, rather than each trying again after it.
    connects: SharedAttempt[Client] = attrs.field(factory=SharedAttempt)
    #: The group's clock time before which a `client` that failed for good is
    #: not connected anew (under `lock`): a dead server is not hammered.
    renew_at: float = 0.0


class ClientGroup:
    """Several MCP servers used as one.

    `targets` maps a server name to anything `connect()` takes (a command
    list, a URL, `Stdio(...)`, `HTTP(...)`, an in-process server), such as
    the result of `mcp_sync.load_config()`. Other keyword arguments are
    `connect()` options for every server (`timeout=`, `input_handlers=`...;
    HTTP options such as `headers=` apply to the URL strings among the
    targets). Each server is connected on first use.

    Tools and prompts are named `server` + `separator` + name (`"web.search"`);
    an unqualified name works when one server only offers it. Listings ask
    every server at once (at most `max_workers` at a time) and report each
    server's failure in `Listing.errors` instead of raising. `close()` (or
    the `with` block) closes every client and joins every thread. A group
    is shared freely between threads, like a `Client`.

    Args:
        targets: Server name to target: anything `connect()` takes, or a
            `ServerConfig` (each entry is read now, so a missing variable
            fails here, named).
        separator: Put between the server name and a tool or prompt name.
        max_workers: The most servers asked at once by a listing; None: one
            thread per server, up to 32. Each server's listings use at most
            its share (`max_workers // servers`, at least 1) at once, the
            rest waiting their turn, so a slow server never holds the
            threads the others need.
        **connect_options: `connect()` options for every server; HTTP
            options (`headers=`, `auth=`, ...) apply to the URL strings.

    Attributes:
        separator (str): Between the server name and the name in qualified names.
        max_workers (int): The most threads asking servers at once.

    Raises:
        TypeError: `targets` is not a mapping, a server name is not a
            non-empty string, a keyword is neither a `connect()` nor an
            `HTTP()` option, or HTTP options are given with no URL target.
        ValueError: An empty `separator`, or `max_workers` below 1.

    Example::

        with mcp_sync.ClientGroup({"local": ["python", "-m", "mcp_sync.testing"],
                                   "web": "https://example.com/mcp"}, timeout=10) as group:
            print(group.list_tools().names)         # ['local.echo', ..., 'web.search']
            print(group.call_tool("local.echo", {"text": "hi"}).text)
    """

    def __init__(self, targets: Mapping[str, Any], *, separator: str = ".", max_workers: int | None = None,
                 **connect_options: Any) -> None:
        if not isinstance(targets, Mapping):
            raise TypeError("ClientGroup() takes a mapping of server name to target")
        if not isinstance(separator, str) or not separator:
            raise ValueError("separator must be a non-empty string")
        # `HTTP()`'s options only when some option is not a client one: they
        # come from `HTTP` itself, and loading it loads the HTTP stack.
        http_names = _http_options() if set(connect_options) - _CLIENT_OPTIONS else frozenset()
        unknown = set(connect_options) - _CLIENT_OPTIONS - http_names
        if unknown:
            from .options import unknown_names

            known = _CLIENT_OPTIONS | (http_names or _http_options())
            raise TypeError(f"ClientGroup() got unexpected keyword argument(s): {unknown_names(unknown, known)}")
        http_options = {k: v for k, v in connect_options.items() if k in http_names}
        self._options = {k: v for k, v in connect_options.items() if k in _CLIENT_OPTIONS}
        # Checked now, as `connect()` would check them: a bad value fails
        # here, not at the first use of each server (in a listing's thread).
        # (The clients' request timeout: with no `timeout=` of its own, a
        # call that lists again and calls elsewhere is bounded by it.)
        options = ClientOptions(**self._options)
        self._request_timeout, self._max_total = options.timeouts.request, options.timeouts.max_total
        # A member failed for good (its policy gave up, or its connection died
        # with reconnecting off) is connected anew at most once per this
        # (None: never, as `restart=False` asks): see `_renewable`.
        self._renew_every = (options.reconnect or Reconnect()).max_delay if options.restart else None
        self._clock: Callable[[], float] = time.monotonic  # (`renew_at`'s: a test's steps past `_renew_every`)
        slots: dict[str, _Slot] = {}
        any_url = False
        for name in targets:  # a ServerConfig substitutes here: a missing variable fails now, named
            if not isinstance(name, str) or not name:
                raise TypeError(f"server names must be non-empty strings, not {name!r}")
            target = targets[name]
            is_url = isinstance(target, str) and target.startswith(("http://", "https://"))
            any_url = any_url or is_url
            # Resolved now, so a target connect() would refuse fails here, not in a listing's thread.
            slots[name] = _Slot(resolve_target(target, http_options if is_url else None))
        if http_options and not any_url:
            raise TypeError(f"{', '.join(sorted(http_options))} only apply to URL targets, and there are none")
        if max_workers is None:
            max_workers = min(32, max(1, len(slots)))
        if isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1:
            raise ValueError("max_workers must be a positive integer")
        self.separator = separator
        self.max_workers = max_workers
        self._slots = slots
        self._lock = threading.Lock()
        self._closed = False
        self._lanes = _Lanes(max_workers, len(slots))
        self._connectors = _Connectors()
        self._catalog = Catalog(list(slots), self._list_member, self._start)
        _live_groups.add(self)

    def _after_fork(self) -> None:
        """In a forked child: new locks (one held at the fork would never be
        let go here) and no pool (its threads were not copied: work queued
        to it would never run). The clients reconnect by themselves."""
        self._lock = threading.Lock()
        self._lanes = _Lanes(self.max_workers, len(self._slots))
        self._connectors = _Connectors()
        self._catalog.after_fork()
        for slot in self._slots.values():
            slot.lock = threading.Lock()
            slot.connecting = None
            slot.connects = SharedAttempt()  # (an attempt of the parent's would never end here)

    # -- servers -----------------------------------------------------------------------

    @property
    def servers(self) -> list[str]:
        """The names of the servers, in the order given."""
        return list(self._slots)

    def client(self, server: str) -> Client:
        """The `Client` of one server, connected now if it is not yet (once:
        threads asking at the same time wait for the same connection). A
        server that cannot be reached raises its `connect()` error, and the
        next use tries again. A client whose status is `failed` (its
        reconnect policy gave up) is replaced by a new connection, at most
        once per the policy's `max_delay`, and closed once that succeeds.

        Example::

            print(group.client("local").server_info.name)

        Args:
            server: The server's name in the group.

        Returns:
            The server's open client, shared by every caller.

        Raises:
            RoutingError: The group has no server of that name.
            ConnectionClosed: The group is closed.
            McpError: What `connect()` raises for that server, such as
                `ConnectError`.
        """
        return self._member(server, None)

    def _member(self, server: str, deadline: float | None) -> Client:
        """`client(server)`, waited for until `deadline` (a call's) at most:
        then the connect runs on a thread of its own and goes on past it,
        bounded by the group's timeouts, for the callers after this one."""
        forking.check()  # the slots' locks and clients are the parent's after a fork from C
        slot = self._slot(server)
        client = slot.client
        if client is not None and not self._replaced(slot, client):
            return client
        return slot.connects.run(lambda: self._connect(slot), deadline, start=self._connectors.start, late=lambda: (
            RequestTimeout(f"connecting to server {server!r} took longer than the call's timeout; the connect goes "
                           "on, bounded by the group's timeouts: try again later, or pass a larger timeout=")))

    def _ready(self, server: str, options: RequestOptions, bound: str, deadline: float | None,
               spent: bool = False) -> tuple[Client, RequestOptions]:
        """The server's client, connected within the call's `deadline`, and
        the call's options: cut to what is left when connecting it (or, if
        `spent`, routing) used some."""
        before = self._slot(server).client
        client = self._member(server, deadline)
        return client, (options if client is before and not spent else _within(options, bound, deadline))

    def _replaced(self, slot: _Slot, client: Client) -> bool:
        """Whether a caller that read `client` in the slot goes to `_connect`
        instead: it was closed by its user, or it failed for good and a
        fresh connect is due (`_renewable`), running, or done. A ready
        client costs one status read; a failed one not due yet is used,
        and its calls fail at once (the fresh connects are rate-limited)."""
        status = client.status
        if status == "closed":
            return True
        if status != "failed" or self._renew_every is None:
            return False
        if not slot.lock.acquire(blocking=False):
            return True  # a connect runs: its outcome is shared, not this client's failure
        try:
            return slot.client is not client or self._renewable(slot, client)
        finally:
            slot.lock.release()

    def _renewable(self, slot: _Slot, client: Client) -> bool:
        """(Under the slot's lock.) Whether its `client` is replaced by a
        fresh connect now: it is `failed` (reconnecting gave up, or was
        off: it never heals by itself, or only at a call, as a new connect
        does), and the group's last fresh connect of it was `_renew_every` ago."""
        return client.status == "failed" and self._renew_every is not None and self._clock() >= slot.renew_at

    def _connect(self, slot: _Slot) -> Client:
        """The slot's client, connected now unless another thread did; one
        failed for good replaced (see `_renewable`), and closed once its
        replacement is in the slot."""
        with slot.lock:  # one connect per server, however many threads need it
            if self._closed:
                raise ConnectionClosed("the client group is closed")
            old = slot.client
            if old is not None and old.status != "closed":
                if not self._renewable(slot, old):
                    return old
                # The next fresh connect waits its turn after this one fails
                # with the server's or the network's error; the failed client
                # stays (its calls fail at once) until one succeeds. An
                # interrupt or a bug is no attempt: the turn is given back.
                turn, slot.renew_at = slot.renew_at, self._clock() + (self._renew_every or 0.0)
            # Made first, opened after: close() meanwhile finds it in
            # `connecting` and ends its open() at once.
            client = Client(slot.target, **self._options)
            with self._lock:
                slot.connecting = client
                closed = self._closed
            try:
                if closed:  # close() ran just before: this connect ends at once
                    client.close()
                client.open()
            except BaseException as exc:
                if old is not None and not isinstance(exc, McpError):
                    slot.renew_at = turn
                raise
            finally:
                with self._lock:
                    slot.connecting = None
            try:
                with self._lock:
                    if self._closed:  # close() ran meanwhile: what was opened is closed too (and `old` by close())
                        client.close()
                        raise ConnectionClosed("the client group is closed")
                    slot.client = client
            except BaseException:
                if slot.client is not client:  # (an interrupt before it was in the slot: nobody else can close it)
                    client.close()
                raise
            if old is not None:
                # Out of the slot, so no caller gets it from now on (one that
                # has it meets its failure, as before). An interrupt here
                # leaves it to its finalizer.
                old.close()
            return client

    def qualify(self, server: str, name: str) -> str:
        """The group's name for `name` on `server`: ``"server.name"``.

        Args:
            server: The server's name in the group.
            name: The tool's or prompt's name on that server.

        Returns:
            `server`, the group's `separator`, then `name`.
        """
        return f"{server}{self.separator}{name}"

    def resolve(self, name: str, kind: str = "tool") -> tuple[str, str]:
        """Which server a tool (or, with ``kind="prompt"``, a prompt) name
        belongs to, and its name there: ``("web", "search")`` for
        ``"web.search"``, or for an unqualified ``"search"`` that one server
        only offers. Lists the servers when the group does not know yet.
        Raises `RoutingError` when no server offers the name, or several do
        (`candidates` lists their qualified names).

        Example::

            server, tool = group.resolve("add_note")   # ('notes', 'add_note')

        Args:
            name: A qualified (``"web.search"``) or unqualified name.
            kind: ``"tool"`` or ``"prompt"``: which listing decides.

        Returns:
            The server's name and the name on that server.

        Raises:
            RoutingError: No server offers the name, or several do.
            ValueError: `kind` is neither ``"tool"`` nor ``"prompt"``.
            TypeError: `name` is not a non-empty string.
        """
        return self._route(name, kind)[:2]

    def _route(self, name: str, kind: str, deadline: float | None = None) -> tuple[str, str, bool, bool]:
        """`resolve()`, whether the group's listing chose the server (an
        unqualified name): a name the caller qualified is never routed
        elsewhere, and whether the servers were listed for it. A listing
        gets half of what is left until `deadline` (a call's), so one
        member slow to connect or list holds no call past its timeout."""
        if kind not in ("tool", "prompt"):
            raise ValueError(f"kind must be 'tool' or 'prompt', not {kind!r}")
        if not isinstance(name, str) or not name:
            raise TypeError(f"a {kind} name must be a non-empty string")
        sep = self.separator
        qualified = [(s, name[len(s) + len(sep):]) for s in self._slots
                     if name.startswith(s + sep) and len(name) > len(s) + len(sep)]
        if len(qualified) == 1:
            return (*qualified[0], False, False)
        listing = kind + "s"
        if len(qualified) > 1:  # servers "a" and "a.b": what they listed decides
            offered = self._catalog.offered(listing, qualified)
            listed = len(offered) != 1
            if listed:  # not listed yet, or changed since: ask them
                self._catalog.relist(listing, _halfway(deadline))
                offered = self._catalog.offered(listing, qualified)
            if len(offered) == 1:
                return (*offered[0], False, listed)
            raise RoutingError(f"{kind} name {name!r} could belong to several servers "
                               f"({', '.join(s for s, _ in qualified)})",
                               candidates=[self.qualify(s, n) for s, n in qualified])
        owners = self._catalog.owners(listing, name)  # in the group's order
        failed: dict[str, McpError] = {}
        listed = not owners
        if listed:  # never listed, or the servers changed since: ask them
            failed = self._catalog.relist(listing, _halfway(deadline))
            owners = self._catalog.owners(listing, name)
        if len(owners) == 1:
            return owners[0], name, True, listed
        if owners:
            candidates = [self.qualify(s, name) for s in owners]
            raise RoutingError(f"{kind} name {name!r} is ambiguous: use one of {', '.join(candidates)}",
                               candidates=candidates)
        raise RoutingError(f"no server of the group offers a {kind} named {name!r}{_unlisted(failed)}")

    def _call_routed(self, name: str, kind: str, options: RequestOptions,
                     call: Callable[[Client, str, RequestOptions], _T]) -> _T:
        """`call(client, name_there, options)` on the server `name` routes
        to. The group's listing may be older than the server's offer: when
        the server it chose for an unqualified name refuses the request's
        params (-32602, `InvalidParams`: how the spec's examples answer a
        name the server does not know; servers that answer it with an
        `isError` result, as the TypeScript SDK's do, are not caught), the group lists again, and if one other
        server offers the name now (it moved), calls that one; else the
        error is raised (the server still offers it, or nobody does). Other
        errors are the tool's or the server's own: raised at once, with no
        listing. The call's `timeout` (or else the clients' request
        timeout; with `reset_timeout_on_progress`, its `max_total_timeout`)
        bounds the whole: the listing gets half of what is left (a server
        slow to list is left out), the second call the rest."""
        bound, deadline = _bound_of(options, self._request_timeout, self._max_total)
        server, there, by_listing, listed = self._route(name, kind, deadline)
        client, used = self._ready(server, options, bound, deadline, listed)
        try:
            return call(client, there, used)
        except InvalidParams:
            if not by_listing or expired(deadline):
                raise
            self._catalog.relist(kind + "s", _halfway(deadline))
            owners = self._catalog.owners(kind + "s", name)
            if len(owners) != 1 or owners[0] == server or expired(deadline):
                raise
            moved_to = owners[0]
        log.info("%s %r moved from server %r to %r since the group listed it: called there", kind, name, server,
                 moved_to)
        return call(self._member(moved_to, deadline), name, _within(options, bound, deadline))

    # -- listings ----------------------------------------------------------------------

    def list_tools(self, **options: Unpack[RequestOptions]) -> Listing[Tool]:
        """Every tool of every server, asked at once; `name` of each item is
        qualified. A server that fails is in `errors`, not raised.

        Example::

            listing = group.list_tools(timeout=5)
            print(listing.names, list(listing.errors))

        Returns:
            Every server's tools, and the error of each server that failed.

        Raises:
            ConnectionClosed: The group is closed.
        """
        check_request_options(options)
        return self._gather("tools", options, lambda t: self.qualify(t.server, t.item.name))

    def list_prompts(self, **options: Unpack[RequestOptions]) -> Listing[Prompt]:
        """Every prompt of every server, like `list_tools()`.

        Example::

            names = group.list_prompts().names      # ['local.greet', ...]

        Returns:
            Every server's prompts, and the error of each server that failed.

        Raises:
            ConnectionClosed: The group is closed.
        """
        check_request_options(options)
        return self._gather("prompts", options, lambda t: self.qualify(t.server, t.item.name))

    def list_resources(self, **options: Unpack[RequestOptions]) -> Listing[Resource]:
        """Every direct resource of every server; `name` is the URI.

        Example::

            for entry in group.list_resources():
                print(entry.server, entry.name)

        Returns:
            Every server's resources, and the error of each server that failed.

        Raises:
            ConnectionClosed: The group is closed.
        """
        check_request_options(options)
        return self._gather("resources", options, lambda t: t.item.uri)

    def list_resource_templates(self, **options: Unpack[RequestOptions]) -> Listing[ResourceTemplate]:
        """Every resource template of every server; `name` is the template.

        Example::

            templates = group.list_resource_templates().names

        Returns:
            Every server's resource templates, and the error of each server
            that failed.

        Raises:
            ConnectionClosed: The group is closed.
        """
        check_request_options(options)
        return self._gather("resource_templates", options, lambda t: t.item.uri_template)

    # -- calls -------------------------------------------------------------------------

    def call_tool(self, tool: str | GroupItem[Tool], arguments: Mapping[str, Any] | None = None,
                  **options: Unpack[RequestOptions]) -> CallToolResult:
        """Call a tool by its qualified name (``"web.search"``), an unqualified
        name one server only offers, or an item of `list_tools()`.

        Example::

            result = group.call_tool("local.echo", {"text": "hi"})
            print(result.text)

        Args:
            tool: A qualified name, an unqualified name one server only
                offers, or a `GroupItem` from `list_tools()`.
            arguments: The tool's arguments.

        Returns:
            The result, as `Client.call_tool()` returns it.

        Raises:
            RoutingError: No server, or several, offer the name.
            McpError: What `Client.call_tool()` or `client()` raises.
        """
        check_request_options(options)
        check_tool_arguments(arguments)  # (before any server is connected)
        if isinstance(tool, GroupItem):
            client, used = self._ready(tool.server, options,
                                       *_bound_of(options, self._request_timeout, self._max_total))
            return client.call_tool(tool.item, arguments, **used)
        return self._call_routed(tool, "tool", options,
                                 lambda client, name, used: client.call_tool(name, arguments, **used))

    def get_prompt(self, prompt: str | GroupItem[Prompt], arguments: Mapping[str, str] | None = None,
                   **options: Unpack[RequestOptions]) -> GetPromptResult:
        """Render a prompt named like a tool: qualified, unique, or an item.

        Example::

            print(group.get_prompt("local.greet", {"name": "Ada"}).messages[0].content)

        Args:
            prompt: A qualified name, an unqualified name one server only
                offers, or a `GroupItem` from `list_prompts()`.
            arguments: The prompt's arguments, all strings.

        Returns:
            The rendered prompt, as `Client.get_prompt()` returns it.

        Raises:
            RoutingError: No server, or several, offer the name.
            McpError: What `Client.get_prompt()` or `client()` raises.
        """
        check_request_options(options)
        check_prompt_arguments(arguments)
        if isinstance(prompt, GroupItem):
            client, used = self._ready(prompt.server, options,
                                       *_bound_of(options, self._request_timeout, self._max_total))
            return client.get_prompt(prompt.item.name, arguments, **used)
        return self._call_routed(prompt, "prompt", options,
                                 lambda client, name, used: client.get_prompt(name, arguments, **used))

    def read_resource(self, uri: str | GroupItem[Resource], *, server: str | None = None,
                      **options: Unpack[RequestOptions]) -> ReadResourceResult:
        """Read a resource from `server`, or from the one server that lists
        the URI (or, failing that, a template it matches). A URI several
        servers offer raises `RoutingError`: pass `server=`.

        Example::

            print(group.read_resource("demo://readme", server="local").text)

        Args:
            uri: The resource's URI, or a `GroupItem` from `list_resources()`.
            server: The server to read it from; None: the one server that
                lists the URI or a template matching it.

        Returns:
            The contents, as `Client.read_resource()` returns them.

        Raises:
            RoutingError: No server, or several, offer the URI (pass
                `server=`), or `server` is not in the group.
            TypeError: `uri` is not a non-empty string.
            McpError: What `Client.read_resource()` or `client()` raises.
        """
        check_request_options(options)
        bound, deadline = _bound_of(options, self._request_timeout, self._max_total)
        if isinstance(uri, GroupItem):
            client, used = self._ready(uri.server, options, bound, deadline)
            return client.read_resource(uri.item.uri, **used)
        if not isinstance(uri, str) or not uri:
            raise TypeError("read_resource() needs a URI string")
        listed = False
        if server is None:  # found by listing, within the read's timeout
            server, listed = _resource_owner(self._catalog, uri, deadline)
        client, used = self._ready(server, options, bound, deadline, listed)
        return client.read_resource(uri, **used)

    # -- lifecycle ---------------------------------------------------------------------

    def close(self) -> None:
        """Close every client and join every thread the group started. A
        connect in progress is waited for (it is bounded by its timeout) and
        closed. Safe to call twice and from any thread; calls after it raise
        `ConnectionClosed`."""
        forking.check()  # a child forked from C lets go of the parent's pool and clients first
        with self._lock:
            self._closed = True
            self._catalog.close()  # no listing starts once the group is closed
            connecting = [slot.connecting for slot in self._slots.values() if slot.connecting is not None]
        for starting in connecting:
            starting.close()  # a connect in progress fails at once, and its slot's lock is let go
        for slot in self._slots.values():
            with slot.lock:  # waits for a connect in progress, which then sees the group closed
                client, slot.client = slot.client, None
            if client is not None:
                client.close()
        self._connectors.close()  # (the connects they ran end at once: their clients are closed)
        self._lanes.close()  # clients closed: the tasks still running end at once

    def __enter__(self) -> ClientGroup:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<ClientGroup {state}: {', '.join(self._slots)}>"

    # -- internals ---------------------------------------------------------------------

    def _slot(self, server: str) -> _Slot:
        slot = self._slots.get(server) if isinstance(server, str) else None
        if slot is None:
            raise RoutingError(f"no server named {server!r} in the group (servers: {', '.join(self._slots) or 'none'})")
        return slot

    def _gather(self, kind: str, options: RequestOptions, name_of: Callable[[GroupItem[Any]], str]) -> Listing[Any]:
        """Every server's listing of `kind`, by the call's timeout when it
        gives one (a server not done by then is reported as a timeout, its
        listing going on); each item named by `name_of`."""
        found, errors = self._catalog.gather(kind, options, _listing_deadline(options))
        items: list[GroupItem[Any]] = []
        for server, listed in found.items():
            for item in listed:
                entry = GroupItem(server, "", item)
                items.append(attrs.evolve(entry, name=name_of(entry)))
        return Listing(items, errors)

    def _list_member(self, server: str, kind: str, options: Mapping[str, Any]) -> list[Any]:
        """What `server` lists of `kind` now (connected first): the catalog's
        `list_member`, run on the group's threads."""
        client = self.client(server)
        capabilities = client.server_capabilities
        if isinstance(capabilities, Mapping) and _CAPABILITY[kind] not in capabilities:
            return []  # a server without the capability offers nothing of the kind
        found: list[Any] = getattr(client, f"list_{kind}")(**options)
        return found

    def _start(self, server: str, task: Callable[[], list[Any]]) -> concurrent.futures.Future[list[Any]]:
        """`task` on the server's lane: the catalog's `start` (`_lanes` read at each call: a fork child has new ones)."""
        return self._lanes.submit(server, task)


def _resource_owner(catalog: Catalog, uri: str, deadline: float | None) -> tuple[str, bool]:
    """The one server that lists `uri` (or else a template it matches),
    listing them again, by half of what is left until `deadline`, when none
    does; and whether it listed."""
    found = catalog.resource_owners(uri)
    failed: dict[str, McpError] = {}
    listed = not found
    if listed:
        until = _halfway(deadline)
        failed = {**catalog.relist("resources", until), **catalog.relist("resource_templates", until)}
        found = catalog.resource_owners(uri)
    if len(found) == 1:
        return found[0], listed
    if found:
        raise RoutingError(f"resource {uri!r} is offered by several servers ({', '.join(found)}): "
                           "pass server=", candidates=found)
    raise RoutingError(f"no server of the group offers resource {uri!r}{_unlisted(failed)}: pass server=")


def _unlisted(failed: Mapping[str, McpError]) -> str:
    """What a routing error adds about the servers that could not be listed."""
    return f" (could not list {', '.join(f'{s}: {e}' for s, e in failed.items())})" if failed else ""


class _Lanes:
    """The group's threads (at most `max_workers`, made on first use), with
    one lane per server that runs at most its share of the threads' tasks
    at once (`max_workers // lanes`, at least 1), the others waiting in order: a server
    slow to connect or answer holds its share, never the threads the other
    servers' tasks need (a listing of a healthy server ends in time while a
    hanging one connects). A task cancelled before it started is skipped.
    Lock discipline: `_lock` guards all but the tasks, which run without
    it; it is taken under the catalog's lock, never the reverse."""

    def __init__(self, max_workers: int, lanes: int) -> None:
        self._max_workers, self._per_lane = max_workers, max(1, max_workers // max(1, lanes))
        self._lock = threading.Lock()
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        #: lane -> its tasks not started yet, and how many of its tasks run
        self._queued: dict[str, collections.deque[tuple[concurrent.futures.Future[Any], Callable[[], Any]]]] = {}
        self._running: collections.Counter[str] = collections.Counter()
        self._closed = False

    def submit(self, lane: str, task: Callable[[], _T]) -> concurrent.futures.Future[_T]:
        """Run `task` once the lane has a free share; its future."""
        future: concurrent.futures.Future[_T] = concurrent.futures.Future()
        with self._lock:
            if self._closed:
                raise ConnectionClosed("the client group is closed")
            queue = self._queued.setdefault(lane, collections.deque())
            if any(waiting.cancelled() for waiting, _ in queue):
                # Given up on by their callers (behind a task that hangs): no
                # longer held, so a lane holds only what someone waits for.
                self._queued[lane] = queue = collections.deque(e for e in queue if not e[0].cancelled())
            queue.append((future, task))
            if self._running[lane] < self._per_lane:
                if self._pool is None:
                    self._pool = concurrent.futures.ThreadPoolExecutor(self._max_workers, "mcp-sync-group")
                self._running[lane] += 1
                try:
                    self._pool.submit(self._run, lane)
                except BaseException:  # (a Ctrl-C as it submits: no thread runs the lane)
                    self._running[lane] -= 1
                    raise
        return future

    def _run(self, lane: str) -> None:
        while True:
            with self._lock:
                queue = self._queued[lane]
                if not queue:
                    self._running[lane] -= 1
                    return
                future, task = queue.popleft()
            if not future.set_running_or_notify_cancel():
                continue  # its caller stopped waiting before it started
            try:
                result = task()
            except BaseException as exc:  # the caller's, as a pool's task would give it
                future.set_exception(exc)
            else:
                future.set_result(result)

    def close(self) -> None:
        """Cancel the tasks not started, join the threads. From one of them
        (a handler during a listing) it cannot join itself: the others end
        as their tasks do."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
            queued = [future for queue in self._queued.values() for future, _ in queue]
            for queue in self._queued.values():
                queue.clear()
        for future in queued:
            future.cancel()
        if pool is not None:
            own = threading.current_thread() in getattr(pool, "_threads", ())
            pool.shutdown(wait=not own, cancel_futures=True)


class _Connectors:
    """The threads that connect a server for a call with a deadline (one
    per server at most: its `SharedAttempt` starts one per attempt), joined
    by `close()`. Lock discipline: `_lock` guards `_threads` and `_closed`;
    a thread is started under it, so `close()` joins every one started."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._threads: set[threading.Thread] = set()
        self._closed = False

    def start(self, connect: Callable[[], None]) -> None:
        """Run `connect` on a thread of its own; here when the group is
        closed (it then fails at once) or no thread can be had."""

        def run() -> None:
            try:
                connect()
            finally:
                with self._lock:
                    self._threads.discard(thread)

        thread = threading.Thread(target=run, name="mcp-sync-group-connect", daemon=True)
        with self._lock:
            if not self._closed:
                try:
                    thread.start()
                except RuntimeError:  # no thread to be had: connected on the caller's, past its deadline
                    pass
                else:
                    self._threads.add(thread)
                    return
        connect()

    def close(self) -> None:
        """Join the threads (each ends once the group closed the client it connects)."""
        with self._lock:
            self._closed = True
            threads = list(self._threads)
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join()


def _bound_of(options: RequestOptions, request_timeout: float | None,
              max_total: float | None) -> tuple[str, float | None]:
    """Which option bounds a call made with `options` (`max_total_timeout`
    when progress resets `timeout`), and the call's deadline by it (the
    clients' own when the call gives none)."""
    if options.get("reset_timeout_on_progress"):
        return "max_total_timeout", deadline_in(options.get("max_total_timeout", max_total))
    return "timeout", deadline_in(options.get("timeout", request_timeout))


def _listing_deadline(options: RequestOptions) -> float | None:
    """The deadline of a listing call that gives a timeout (None: each
    server's own timeouts bound it): a member slow to connect is reported
    in `errors` by then, and its listing goes on on the group's thread."""
    bound = "max_total_timeout" if options.get("reset_timeout_on_progress") else "timeout"
    seconds = options.get(bound)
    return None if seconds is None else deadline_in(cast(float, seconds))


def _halfway(deadline: float | None) -> float | None:
    """Half of what is left until `deadline`: a listing's share, leaving the rest to the call."""
    left = remaining(deadline)
    return None if left is None else time.monotonic() + left / 2


def _within(options: RequestOptions, bound: str, deadline: float | None) -> RequestOptions:
    """`options`, with `bound` cut to what is left until `deadline`."""
    if deadline is None:
        return options
    return cast(RequestOptions, {**options, bound: remaining(deadline, at_least=LEAST_TIMEOUT)})


#: Every group not yet collected, for the fork hook.
_live_groups: weakref.WeakSet[ClientGroup] = weakref.WeakSet()


@forking.in_child
def _after_fork_in_child() -> None:
    for group in forking.members(_live_groups):
        group._after_fork()

