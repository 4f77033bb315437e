"""Caching of cacheable results by the server's hints (`ttlMs`, `cacheScope`).

What it owns: a bounded, thread-safe store of complete results of
`server/discover`, the four list methods, `resources/read` and the Skills
extension's `skills/list` and `skills/get`, keyed by the
server, the method and the parameters that affect the result; and the table
of fetches in flight, so that identical requests from several threads at
once become one request on the wire.

Rules (2026-07-28 `server/utilities/caching.mdx`):

- fresh while `now < received + ttlMs`; an absent or negative `ttlMs` is 0,
  so such a result is stored (for `stale` lookups) but never served fresh;
- requests carrying `inputResponses` or `requestState` are never cached;
- a `"private"` result is served only to the same authorization context
  (another token, another cache); a `"public"` one to every client sharing
  the cache;
- a `list_changed` or `resources/updated` notification invalidates at once.

Results are stored as JSON text and decoded on every hit, so no caller can
change what another one gets. A follower of a fetch in flight keeps its own
deadline and never inherits what only concerned the leader (see `fetch`).
After `os.fork()` the child starts with a fresh lock and no fetches in
flight (their leaders are threads the child does not have).
"""

from __future__ import annotations

import collections
import hashlib
import itertools
import json
import threading
import time
import weakref
from collections.abc import Mapping
from typing import Any, Callable, NamedTuple

import attrs

from . import forking
from .errors import McpError, ProtocolError, RequestTimeout, ServerError, TransportError, copy_error
from .protocol.meta import META_PROTOCOL_VERSION
from .protocol.methods import CACHEABLE, INVALIDATES
from .waiting import deadline_in, remaining



def cache_key(method: str, params: Mapping[str, Any] | None) -> str | None:
    """The key of a request, or None when it must not be cached.

    The key is the method and every parameter but `_meta`, plus the
    protocol version (a result's shape depends on it).
    """
    if method not in CACHEABLE:
        return None
    params = dict(params or {})
    if "inputResponses" in params or "requestState" in params:
        return None
    meta = params.pop("_meta", None)
    version = meta.get(META_PROTOCOL_VERSION) if isinstance(meta, Mapping) else None
    return json.dumps([method, version, params], sort_keys=True, separators=(",", ":"))


def ttl_seconds(result: Mapping[str, Any]) -> float:
    ttl = result.get("ttlMs")
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or ttl < 0:
        return 0.0
    return float(ttl) / 1000.0


def server_identity(target: Any) -> str | None:
    """Which server a cached result came from, so that clients sharing a
    cache never mix two servers' results (None: no stable identity): the
    URL, the whole way a program is run (`Stdio.server_key()`, `env`
    included: one program may be one server per environment), or a
    number given to each in-process server object, never reused (an
    `id()` is, once the object is collected)."""
    url = getattr(target, "url", None)
    if isinstance(url, str):
        return f"http:{url}"
    server_key = getattr(target, "server_key", None)
    if getattr(target, "command", None) is not None and callable(server_key):
        # A digest: the environment may hold secrets, which the key must not show.
        return "stdio:" + hashlib.sha256(repr(server_key()).encode()).hexdigest()
    server = getattr(target, "server", None)
    if server is not None:
        with _numbers_lock:
            try:
                number = _servers.get(server)
                if number is None:
                    number = _servers[server] = next(_numbers)
            except TypeError:  # neither hashable nor weakly referable: nothing stable to go by
                return None
        return f"memory:{number}"
    return None


def client_identity() -> str:
    """An identity of one client's own, for a target with none to share."""
    with _numbers_lock:
        return f"client:{next(_numbers)}"


#: Numbers for in-process servers and clients, never reused in this process.
_numbers = itertools.count(1)
_numbers_lock = threading.Lock()
_servers: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()


class StaleResult(dict):  # type: ignore[type-arg]
    """A result served from the cache after its TTL ran out, because the
    refetch failed (`stale_if_error`). Typed results show it as `stale`."""

    stale = True
    """Always True: this result is past its TTL."""


@attrs.define
class _Entry:
    text: str
    expires: float
    private_to: str | None  # the authorization context of a private result
    method: str
    uri: str | None


class _Fetch:
    """One fetch in flight; followers wait for its outcome.

    The outcome is the result's text, or an error about the server that
    every follower would have met too (`shared`). A leader that failed for
    reasons of its own (its timeout, an interrupt, its own callback) leaves
    neither, and each follower then fetches for itself.
    """

    def __init__(self, method: str, uri: str | None) -> None:
        self.done = threading.Event()
        self.text: str | None = None
        self.stale = False
        self.shared: McpError | None = None
        # What it fetches, to tell whether an invalidation covers it.
        self.method = method
        self.uri = uri


#: Errors that say something about the server, not about the caller that
#: met them: a follower would have met them too, so it gets a copy.
_SHARED_ERRORS = (ServerError, TransportError, ProtocolError)

#: How many invalidations a cache remembers, to tell whether one came while
#: a result was being fetched (`mark`); a fetch older than all of them is
#: not stored (of any server: so, generous).
CHANGES_KEPT = 4096


class ResultCache:
    """A result cache; pass it to `connect(cache=...)`, share it between clients.

    Example::

        shared = mcp_sync.ResultCache(max_entries=1000)
        a = mcp_sync.connect(url, cache=shared)
        b = mcp_sync.connect(url, cache=shared, auth="other-token")  # public entries shared

    Bounded by `max_entries` and `max_bytes` (of stored JSON); the least
    recently used entries go first. Raises `ValueError` when either is not a
    positive integer.

    Args:
        max_entries: The most results kept.
        max_bytes: The most JSON text kept, in bytes.

    Attributes:
        max_entries (int): The most results kept (default 256).
        max_bytes (int): The most JSON text kept, in bytes (default 16 MiB);
            a single result larger than this is not stored.
        hits (int): Lookups answered with a fresh cached result, since the
            cache was made.
        misses (int): Lookups that found no fresh result they may use (each
            then fetched, or waited for an identical fetch in flight).
    """

    def __init__(self, max_entries: int = 256, max_bytes: int = 16 * 1024 * 1024) -> None:
        for name, value in (("max_entries", max_entries), ("max_bytes", max_bytes)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer")
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._entries: collections.OrderedDict[tuple[str, str], _Entry] = collections.OrderedDict()
        self._bytes = 0
        self._inflight: dict[tuple[str, str, str], _Fetch] = {}
        # The invalidations so far (`_changes` numbers them, the last
        # `CHANGES_KEPT` kept): a result fetched across one that covers it
        # is the answer of before the change, and is not stored.
        self._changes: collections.deque[_Change] = collections.deque(maxlen=CHANGES_KEPT)
        self._changed = 0
        self.hits = 0
        self.misses = 0
        _caches.add(self)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    @property
    def size_bytes(self) -> int:
        """The size of the results stored now, in bytes of JSON text (at
        most `max_bytes`)."""
        with self._lock:
            return self._bytes

    def fetch(self, server: str, key: str, context: str, load: Callable[[], dict[str, Any]],
              *, stale_if_error: bool = False, timeout: float | None = None,
              method: str | None = None) -> dict[str, Any]:
        """A fresh cached result, or `load()`'s (stored when it is complete).

        Identical fetches in flight at once share one `load()`: the first
        caller leads, the others follow. Each follower keeps its own
        options: it waits at most its own `timeout` (then `RequestTimeout`
        naming `method`), it gets its own copy of an error about the server
        (a `ServerError`, `TransportError` or `ProtocolError`), and when the
        leader failed for reasons of its own (its timeout, an interrupt,
        an exception from its callback) it fetches again itself.

        With `stale_if_error`, a `load()` that fails with a `TransportError`
        is answered with the expired entry, if there is one, as a
        `StaleResult`.

        Args:
            server: The client's identity for the server (entries of
                different servers never mix).
            key: The request's key (`cache_key()`: method, params and
                protocol version).
            context: Who the request is made as (`credential_scope()`):
                a private result answers only the same context.
            load: Fetches the result from the server.
            stale_if_error: Answer a failed `load()` with an expired entry.
            timeout: The most seconds a follower waits for the leader.
            method: The request's method, for a `RequestTimeout`'s message.

        Returns:
            The result: cached, loaded, or (with `stale_if_error`) stale.

        Raises:
            RequestTimeout: A follower waited `timeout` seconds.
            McpError: What `load()` raised (a follower gets its own copy).
        """
        slot = (server, key)
        flight_key = (server, key, context)
        deadline = deadline_in(timeout)
        counted = False
        while True:
            with self._lock:
                entry = self._entries.get(slot)
                if entry is not None and time.monotonic() < entry.expires and entry.private_to in (None, context):
                    self._entries.move_to_end(slot)
                    self.hits += 1
                    return dict(json.loads(entry.text))
                if not counted:
                    self.misses += 1
                    counted = True
                fetch = self._inflight.get(flight_key)
                if fetch is None:
                    fetch = self._inflight[flight_key] = _Fetch(*_what(key))
                    since = self._changed
                    break  # this caller leads
            if not fetch.done.wait(remaining(deadline)):
                assert timeout is not None
                raise RequestTimeout(f"{method or 'the request'} timed out after {timeout:g} s",
                                     method=method, timeout=timeout)
            if fetch.shared is not None:
                raise copy_error(fetch.shared)
            if fetch.text is not None:
                found = json.loads(fetch.text)
                return StaleResult(found) if fetch.stale else dict(found)
            # The leader failed for reasons of its own: go round, and
            # lead if nobody else does by now.
        return self._lead(fetch, flight_key, slot, context, load, stale_if_error, since)

    def _lead(self, fetch: _Fetch, flight_key: tuple[str, str, str], slot: tuple[str, str], context: str,
              load: Callable[[], dict[str, Any]], stale_if_error: bool, since: int) -> dict[str, Any]:
        try:
            result = load()
            text = json.dumps(result, separators=(",", ":"))
            fetch.text = text
            self._store(slot, result, text, context, since)
            return result
        except TransportError as exc:
            stale = self._stale(slot, context) if stale_if_error else None
            if stale is None:
                fetch.shared = exc
                raise
            fetch.text = stale
            fetch.stale = True
            return StaleResult(json.loads(stale))
        except _SHARED_ERRORS as exc:
            fetch.shared = exc
            raise
        finally:
            with self._lock:
                if self._inflight.get(flight_key) is fetch:  # (not a newer one, see `_note_change`)
                    del self._inflight[flight_key]
            fetch.done.set()

    def _after_fork(self) -> None:
        """In a child process after `os.fork()`: the lock may have been held
        by a thread that was not copied, and the fetches in flight belong to
        such threads (nobody would ever finish them here)."""
        self._lock = threading.Lock()
        self._inflight = {}

    def _stale(self, slot: tuple[str, str], context: str) -> str | None:
        with self._lock:
            entry = self._entries.get(slot)
            if entry is None or entry.private_to not in (None, context):
                return None
            return entry.text

    def mark(self) -> int:
        """Where the cache's invalidations stand now: taken before a request
        whose result goes to `put(since=...)`.

        Example::

            since = cache.mark()
            result = ...  # the request, made without the cache
            cache.put(server, key, context, result, since=since)

        Returns:
            An opaque number for `put()`.
        """
        with self._lock:
            return self._changed

    def put(self, server: str, key: str, context: str, result: Mapping[str, Any], *,
            since: int | None = None) -> None:
        """Store a result fetched without the cache (`bypass_cache`).

        Args:
            server: The client's identity for the server.
            key: The request's key (`cache_key()`).
            context: Who the request was made as.
            result: The result as received; one that is not complete
                (``resultType`` other than ``"complete"``) or larger than
                `max_bytes` is not stored.
            since: `mark()` taken before the request: a result that an
                invalidation received meanwhile covers is not stored (it
                is the answer of before the change).
        """
        self._store((server, key), result, json.dumps(result, separators=(",", ":")), context, since)

    def _store(self, slot: tuple[str, str], result: Mapping[str, Any], text: str, context: str,
               since: int | None) -> None:
        if result.get("resultType", "complete") != "complete":
            return
        size = len(text)
        if size > self.max_bytes:
            return
        method, uri = _what(slot[1])
        entry = _Entry(
            text=text,
            expires=time.monotonic() + ttl_seconds(result),
            private_to=context if result.get("cacheScope") == "private" else None,
            method=method,
            uri=uri,
        )
        with self._lock:
            if since is not None and self._changed_since(since, slot[0], entry):
                return
            old = self._entries.pop(slot, None)
            if old is not None:
                self._bytes -= len(old.text)
            self._entries[slot] = entry
            self._bytes += size
            while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
                _, evicted = self._entries.popitem(last=False)
                self._bytes -= len(evicted.text)

    def invalidate(self, server: str, notification: Mapping[str, Any]) -> int:
        """Apply a server notification: drop what it says has changed.
        Returns how many entries were dropped.

        Args:
            server: The client's identity for the server that sent it.
            notification: The JSON-RPC notification (a `list_changed`, or
                `notifications/resources/updated` for one URI).

        Returns:
            How many entries were dropped.
        """
        method = notification.get("method")
        raw_params = notification.get("params")
        params: Mapping[str, Any] = raw_params if isinstance(raw_params, Mapping) else {}
        methods = INVALIDATES.get(str(method), ())
        uri = params.get("uri") if method == "notifications/resources/updated" else None
        if not methods and uri is None:
            return 0
        with self._lock:
            self._note_change(server, methods, uri)
            doomed = [
                slot for slot, entry in self._entries.items()
                if slot[0] == server and (entry.method in methods or (uri is not None and entry.uri == uri
                                                                      and entry.method == "resources/read"))
            ]
            for slot in doomed:
                self._bytes -= len(self._entries.pop(slot).text)
        return len(doomed)

    def clear(self) -> None:
        """Drop every entry, of every server. `hits` and `misses` are kept;
        fetches in flight still finish (and store their result)."""
        with self._lock:
            self._note_change(None, None, None)
            self._entries.clear()
            self._bytes = 0

    def clear_server(self, server: str) -> int:
        """Drop every entry of one server (after a reconnect: the server may
        have changed while it was away). Returns how many were dropped.

        Args:
            server: The client's identity for the server.

        Returns:
            How many entries were dropped.
        """
        with self._lock:
            self._note_change(server, None, None)
            doomed = [slot for slot in self._entries if slot[0] == server]
            for slot in doomed:
                self._bytes -= len(self._entries.pop(slot).text)
        return len(doomed)


    def _note_change(self, server: str | None, methods: tuple[str, ...] | None, uri: str | None) -> None:
        """(Under the lock.) An invalidation: of `server` (None: every
        server), of the results of `methods` (None: all) or of the reads
        of `uri`."""
        self._changed += 1
        change = _Change(self._changed, server, methods, uri)
        self._changes.append(change)
        # A fetch it covers brings the answer of before the change: whoever
        # asks from now on fetches afresh instead of joining it (its own
        # followers, who asked before the change, still get its answer).
        for flight_key, fetch in list(self._inflight.items()):
            if change.covers(flight_key[0], fetch.method, fetch.uri):
                del self._inflight[flight_key]

    def _changed_since(self, since: int, server: str, entry: _Entry) -> bool:
        """(Under the lock.) Whether an invalidation after `since` covers
        `entry` of `server`; True when those changes are no longer kept."""
        if since >= self._changed:
            return False
        if not self._changes or self._changes[0].number > since + 1:
            return True  # some were forgotten: it cannot tell
        for change in reversed(self._changes):
            if change.number <= since:
                return False
            if change.covers(server, entry.method, entry.uri):
                return True
        return False


class _Change(NamedTuple):
    number: int
    server: str | None  # None: every server
    methods: tuple[str, ...] | None  # None: every method
    uri: str | None

    def covers(self, server: str, method: str, uri: str | None) -> bool:
        """Whether this change makes a result of `server`'s `method` (of `uri`) stale."""
        return self.server in (None, server) and (
            self.methods is None or method in self.methods
            or (self.uri is not None and self.uri == uri and method == "resources/read"))


def _what(key: str) -> tuple[str, str | None]:
    """The method and URI of a request, from its `cache_key()`."""
    method, _, params = json.loads(key)[:3]
    return method, params.get("uri") if isinstance(params, dict) else None


#: Every cache alive in this process, for `_after_fork_in_child` (weakly:
#: a cache nobody uses any more is not kept for it).
_caches: weakref.WeakSet[ResultCache] = weakref.WeakSet()


@forking.in_child
def _after_fork_in_child() -> None:
    global _numbers_lock
    _numbers_lock = threading.Lock()  # (one held by a parent's thread at the fork would never be let go)
    for cache in forking.members(_caches):
        cache._after_fork()
