"""Where the OAuth flow keeps what must outlive one call: a key-value store.

`TokenStorage` is deliberately small, so a web app can back it with its
session store, a database row per user, or a cache. Values are JSON
dictionaries; keys are short strings the flow chooses:

- `tokens <resource>`: the tokens for one MCP server;
- `client <issuer>`: the client registration at one authorization server
  (never used with another one);
- `pending <state>`: an authorization in progress, between `start()` and
  `finish()` (it holds the PKCE verifier, so keep the store private).

A store may also offer `pop(key)`: load and delete in one atomic step.
`finish()` then takes the pending entry with it, so two workers handling
the same callback at once cannot both use its code (without it, the two
steps are only serialized within one process).

Two stores come with the library: `MemoryStorage` (the default; gone with
the process) and `FileStorage` (one JSON file, private to the user).

Example, a store on Django's cache::

    class CacheStorage:
        def __init__(self, user_id):
            self.prefix = f"mcp-oauth:{user_id}:"
        def load(self, key):
            return cache.get(self.prefix + key)
        def save(self, key, value):
            cache.set(self.prefix + key, value, timeout=None)
        def delete(self, key):
            cache.delete(self.prefix + key)
"""

from __future__ import annotations

import copy
import json
import os
import tempfile
import threading
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from ..errors import AuthorizationError

__all__ = ["TokenStorage", "MemoryStorage", "FileStorage"]


@runtime_checkable
class TokenStorage(Protocol):
    """A key-value store of JSON dictionaries. Calls may come from many
    threads at once; an implementation makes each call atomic."""

    def load(self, key: str) -> dict[str, Any] | None: ...

    def save(self, key: str, value: Mapping[str, Any]) -> None: ...

    def delete(self, key: str) -> None: ...


class MemoryStorage:
    """Keeps everything in this process, behind one lock (the default).

    Example::

        storage = MemoryStorage()
        oauth = OAuth(redirect=LoopbackRedirect(), storage=storage)
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._data: dict[str, dict[str, Any]] = {}

    def load(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            value = self._data.get(key)
            # A copy, so a caller's edits never change what is stored.
            return copy.deepcopy(value) if value is not None else None

    def save(self, key: str, value: Mapping[str, Any]) -> None:
        with self._lock:
            self._data[key] = copy.deepcopy(dict(value))

    def delete(self, key: str) -> None:
        with self._lock:
            self._data.pop(key, None)

    def pop(self, key: str) -> dict[str, Any] | None:
        """Load and delete in one step."""
        with self._lock:
            return self._data.pop(key, None)

    def __repr__(self) -> str:
        return f"MemoryStorage(<{len(self._data)} entries>)"


class FileStorage:
    """Keeps everything in one JSON file, readable by its owner only (0600).

    Each change rewrites the file through a temporary file and an atomic
    rename, so a crash never leaves half a file. Within a process a lock
    serializes changes; across processes the last writer wins, which is
    safe (every value can be obtained again) but may cost a re-login.

    Example::

        oauth = OAuth(redirect=LoopbackRedirect(),
                      storage=FileStorage("~/.config/myapp/mcp-tokens.json"))
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.path.abspath(os.path.expanduser(os.fspath(path)))
        self._lock = threading.Lock()

    def _read(self) -> dict[str, Any]:
        try:
            with open(self.path, encoding="utf-8") as f:
                data = json.load(f)
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise AuthorizationError(f"the token file {self.path} cannot be read: {type(exc).__name__}") from None
        if not isinstance(data, dict):
            raise AuthorizationError(f"the token file {self.path} does not hold a JSON object")
        return data

    def _write(self, data: Mapping[str, Any]) -> None:
        folder = os.path.dirname(self.path)
        os.makedirs(folder, mode=0o700, exist_ok=True)
        fd, temp = tempfile.mkstemp(prefix=".tokens-", dir=folder)
        try:
            os.fchmod(fd, 0o600) if hasattr(os, "fchmod") else None
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, indent=1, sort_keys=True)
                f.flush()
                os.fsync(f.fileno())
            os.replace(temp, self.path)
        except BaseException:
            try:
                os.unlink(temp)
            except OSError:
                pass
            raise

    def load(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            value = self._read().get(key)
        return value if isinstance(value, dict) else None

    def save(self, key: str, value: Mapping[str, Any]) -> None:
        with self._lock:
            data = self._read()
            data[key] = dict(value)
            self._write(data)

    def delete(self, key: str) -> None:
        self.pop(key)

    def pop(self, key: str) -> dict[str, Any] | None:
        """Load and delete in one step (within this process)."""
        with self._lock:
            data = self._read()
            value = data.pop(key, None)
            if value is not None:
                self._write(data)
        return value if isinstance(value, dict) else None

    def __repr__(self) -> str:
        return f"FileStorage({self.path!r})"
