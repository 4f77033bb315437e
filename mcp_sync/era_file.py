"""The protocol era of each server, remembered on disk across processes.

What it owns: one small JSON file in the user's cache directory that maps a
server configuration to the era it settled on, so that every `mcp-sync`
command, notebook kernel and short script does not pay the `server/discover`
probe again (a server that swallows it costs the whole `probe_timeout`).
The spec allows it: a client "MAY persist it across restarts of the same
server configuration, re-probing if the cached assumption later fails".

What it must not know: how the era is settled (`negotiation`), or what a
target is: it is handed a key and stores only its digest, so no command
line, environment or URL is ever written.

Where: `$MCP_SYNC_CACHE_DIR/eras.json`, else `$XDG_CACHE_HOME/mcp-sync/`,
else `~/.cache/mcp-sync/`; `MCP_SYNC_CACHE_DIR=""` turns it off for the
process, `connect(era_cache=False)` for a client.

Rules: at most `MAX_SERVERS` entries (the least recently written dropped);
written atomically (a temporary file in the same directory, then a rename)
with owner-only permissions (0600, directory 0700); a file that cannot be
read or decoded, whatever it holds (or not a regular file: a named pipe is
never waited on), is taken as empty and a failed write is logged at DEBUG:
neither is ever an error. Across processes the last writer wins; an entry
lost that way costs one probe. `_lock` serialises this process's
read-modify-write cycles; nothing else is done under it.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import threading
from collections.abc import Hashable
from pathlib import Path

from . import forking

__all__ = ["MAX_SERVERS", "forget", "location", "recall", "remember"]

log = logging.getLogger("mcp_sync.client")

#: The most servers kept in the file.
MAX_SERVERS = 256
#: Bytes read at most: a file grown past this (by hand) is ignored.
MAX_FILE_BYTES = 64 * 1024
_FORMAT = 1

_lock = threading.Lock()


def location() -> Path | None:
    """The file, or None when remembering on disk is turned off."""
    configured = os.environ.get("MCP_SYNC_CACHE_DIR")
    if configured is not None:
        return Path(configured) / "eras.json" if configured else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "mcp-sync" / "eras.json"


def _digest(key: Hashable) -> str:
    import hashlib  # here: it loads OpenSSL, a cost at import for every program

    return hashlib.sha256(repr(key).encode("utf-8", "backslashreplace")).hexdigest()


def _load(path: Path) -> dict[str, str]:
    data = _read(path)
    if data is None:
        return {}
    try:
        content = json.loads(data)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested past the parser's depth
        return {}
    eras = content.get("eras") if isinstance(content, dict) and content.get("format") == _FORMAT else None
    if not isinstance(eras, dict):
        return {}
    return {k: v for k, v in eras.items() if isinstance(k, str) and isinstance(v, str)}


def _read(path: Path) -> bytes | None:
    """The file's bytes, or None when it is missing, unreadable, larger than
    `MAX_FILE_BYTES` or not a regular file. Never blocks: opened with
    `O_NONBLOCK`, so a named pipe put at the path (which an ordinary open
    waits on until something writes to it) is refused by `fstat` at once;
    on a regular file the flag changes nothing."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        handle = os.open(path, flags)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(handle).st_mode):
            return None
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_FILE_BYTES:
            chunk = os.read(handle, MAX_FILE_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError:
        return None
    finally:
        os.close(handle)
    return None if size > MAX_FILE_BYTES else b"".join(chunks)


def _store(path: Path, eras: dict[str, str]) -> None:
    # A temporary name of this process and thread (no `tempfile`: it loads
    # `random`, which a plain connect never needs), created owner-only and
    # never through a symbolic link, then renamed over the file.
    temporary = path.with_name(f".eras-{os.getpid()}-{threading.get_ident()}.tmp")
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
        handle = os.open(temporary, flags, 0o600)
        try:
            with os.fdopen(handle, "w") as file:
                os.fchmod(file.fileno(), 0o600)  # a crashed writer's leftover may have had other bits
                json.dump({"format": _FORMAT, "eras": eras}, file, separators=(",", ":"))
            os.replace(temporary, path)
        except BaseException:
            try:
                os.unlink(temporary)
            except OSError:
                pass
            raise
    except OSError as exc:
        log.debug("could not remember protocol eras in %s: %s", path, exc)


def recall(key: Hashable) -> str | None:
    """The era kind remembered for `key` on disk, or None."""
    path = location()
    if path is None:
        return None
    with _lock:
        return _load(path).get(_digest(key))


def remember(key: Hashable, kind: str) -> None:
    """Record `kind` for `key` (the most recent last; the oldest beyond
    `MAX_SERVERS` dropped)."""
    path = location()
    if path is None:
        return
    digest = _digest(key)
    with _lock:
        eras = _load(path)
        if eras.get(digest) == kind:
            return
        eras.pop(digest, None)
        eras[digest] = kind
        while len(eras) > MAX_SERVERS:
            del eras[next(iter(eras))]
        _store(path, eras)


def forget(key: Hashable | None = None) -> None:
    """Forget `key`, or every server when it is None."""
    path = location()
    if path is None:
        return
    with _lock:
        if key is None:
            if path.exists():
                _store(path, {})
            return
        eras = _load(path)
        if eras.pop(_digest(key), None) is not None:
            _store(path, eras)


@forking.in_child
def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.Lock()
