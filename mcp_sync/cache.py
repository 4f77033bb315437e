"""Caching of cacheable results by the server's hints (`ttlMs`, `cacheScope`).

What it owns: a bounded, thread-safe store of complete results of
`server/discover`, the four list methods and `resources/read`, keyed by the
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
change what another one gets.
"""

from __future__ import annotations

import collections
import json
import threading
import time
from collections.abc import Mapping
from typing import Any, Callable

import attrs

from .errors import TransportError

CACHEABLE = frozenset({
    "server/discover", "tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read",
})
_INVALIDATES: dict[str, tuple[str, ...]] = {
    "notifications/tools/list_changed": ("tools/list",),
    "notifications/prompts/list_changed": ("prompts/list",),
    "notifications/resources/list_changed": ("resources/list", "resources/templates/list"),
}
_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"


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
    version = meta.get(_VERSION_KEY) if isinstance(meta, Mapping) else None
    return json.dumps([method, version, params], sort_keys=True, separators=(",", ":"))


def ttl_seconds(result: Mapping[str, Any]) -> float:
    ttl = result.get("ttlMs")
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or ttl < 0:
        return 0.0
    return float(ttl) / 1000.0


class StaleResult(dict):  # type: ignore[type-arg]
    """A result served from the cache after its TTL ran out, because the
    refetch failed (`stale_if_error`). Typed results show it as `stale`."""

    stale = True


@attrs.define
class _Entry:
    text: str
    expires: float
    private_to: str | None  # the authorization context of a private result
    method: str
    uri: str | None


class _Fetch:
    """One fetch in flight; followers wait for its outcome."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.text: str | None = None
        self.error: BaseException | None = None


class ResultCache:
    """A result cache; pass it to `connect(cache=...)`, share it between clients.

    Example::

        shared = mcp_sync.ResultCache(max_entries=1000)
        a = mcp_sync.connect(url, cache=shared)
        b = mcp_sync.connect(url, cache=shared, auth="other-token")  # public entries shared

    Bounded by `max_entries` and `max_bytes` (of stored JSON); the least
    recently used entries go first.
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
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    @property
    def size_bytes(self) -> int:
        with self._lock:
            return self._bytes

    def fetch(self, server: str, key: str, context: str, load: Callable[[], dict[str, Any]],
              *, stale_if_error: bool = False) -> dict[str, Any]:
        """A fresh cached result, or `load()`'s (stored when it is complete).

        Identical fetches in flight at once share one `load()`. With
        `stale_if_error`, a `load()` that fails with a `TransportError` is
        answered with the expired entry, if there is one, as a `StaleResult`.
        """
        slot = (server, key)
        flight_key = (server, key, context)
        with self._lock:
            entry = self._entries.get(slot)
            if entry is not None and time.monotonic() < entry.expires and entry.private_to in (None, context):
                self._entries.move_to_end(slot)
                self.hits += 1
                return dict(json.loads(entry.text))
            self.misses += 1
            fetch = self._inflight.get(flight_key)
            leader = fetch is None
            if leader:
                fetch = self._inflight[flight_key] = _Fetch()
        assert fetch is not None
        if not leader:
            fetch.done.wait()
            if fetch.error is not None:
                raise fetch.error
            assert fetch.text is not None
            return dict(json.loads(fetch.text))
        try:
            result = load()
            text = json.dumps(result, separators=(",", ":"))
            fetch.text = text
            self._store(slot, result, text, context)
            return result
        except TransportError as exc:
            stale = self._stale(slot, context) if stale_if_error else None
            if stale is None:
                fetch.error = exc
                raise
            fetch.text = stale
            return StaleResult(json.loads(stale))
        except BaseException as exc:
            fetch.error = exc
            raise
        finally:
            with self._lock:
                self._inflight.pop(flight_key, None)
            fetch.done.set()

    def _stale(self, slot: tuple[str, str], context: str) -> str | None:
        with self._lock:
            entry = self._entries.get(slot)
            if entry is None or entry.private_to not in (None, context):
                return None
            return entry.text

    def put(self, server: str, key: str, context: str, result: Mapping[str, Any]) -> None:
        """Store a result fetched without the cache (`bypass_cache`)."""
        self._store((server, key), result, json.dumps(result, separators=(",", ":")), context)

    def _store(self, slot: tuple[str, str], result: Mapping[str, Any], text: str, context: str) -> None:
        if result.get("resultType", "complete") != "complete":
            return
        size = len(text)
        if size > self.max_bytes:
            return
        method = json.loads(slot[1])[0]
        params = json.loads(slot[1])[2]
        entry = _Entry(
            text=text,
            expires=time.monotonic() + ttl_seconds(result),
            private_to=context if result.get("cacheScope") == "private" else None,
            method=method,
            uri=params.get("uri") if isinstance(params, dict) else None,
        )
        with self._lock:
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
        Returns how many entries were dropped."""
        method = notification.get("method")
        raw_params = notification.get("params")
        params: Mapping[str, Any] = raw_params if isinstance(raw_params, Mapping) else {}
        methods = _INVALIDATES.get(str(method), ())
        uri = params.get("uri") if method == "notifications/resources/updated" else None
        if not methods and uri is None:
            return 0
        with self._lock:
            doomed = [
                slot for slot, entry in self._entries.items()
                if slot[0] == server and (entry.method in methods or (uri is not None and entry.uri == uri
                                                                      and entry.method == "resources/read"))
            ]
            for slot in doomed:
                self._bytes -= len(self._entries.pop(slot).text)
        return len(doomed)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0
