"""Which protocol era each server answered with, for the life of the process.

Owns: the process-wide record of servers that settled on the initialize
era, keyed by what identifies a server to a user (a stdio command line, an
HTTP origin and path: `Target.server_key()`), and its lock.

Must not know: how the era is settled (the client's `_settle_era` and
`handshake`) or what a transport is.

Why. Some initialize-era servers neither answer nor refuse the
`server/discover` probe (the Python SDK 1.3 server's session dies on the
unknown method and stays silent), so settling the era with them costs the
whole `probe_timeout`, and over stdio a second server start. The answer does
not change while the process lives (a server is upgraded by restarting the
app in practice), so only the first `connect()` to such a server pays: later
ones go straight to `initialize`. A server that answered the probe is not
recorded: the probe is its first request anyway and costs one round trip.

Lock discipline: `_lock` guards `_eras`; nothing else is done under it. It
is replaced in a forked child (a parent thread may hold it at the fork); the
record itself is kept, since the child talks to the same servers.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Hashable

#: The most servers remembered; the least recently used is forgotten first.
MAX_SERVERS = 256

_lock = threading.Lock()
_eras: OrderedDict[Hashable, str] = OrderedDict()


def remember(key: Hashable | None, kind: str) -> None:
    """Record that the server `key` settled on `kind` ("initialize", or a
    transport such as "sse" that implies it). A `None` key (a target with no
    stable identity, such as a custom transport) is not recorded."""
    if key is None:
        return
    with _lock:
        _eras[key] = kind
        _eras.move_to_end(key)
        while len(_eras) > MAX_SERVERS:
            _eras.popitem(last=False)


def recall(key: Hashable | None) -> str | None:
    """What `remember` recorded for `key`, or None."""
    if key is None:
        return None
    with _lock:
        kind = _eras.get(key)
        if kind is not None:
            _eras.move_to_end(key)
        return kind


def forget(key: Hashable | None = None) -> None:
    """Forget one server (`key`), or every server when `key` is None."""
    with _lock:
        if key is None:
            _eras.clear()
        else:
            _eras.pop(key, None)


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
