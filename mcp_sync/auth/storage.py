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
steps are only serialized within one process). And it may offer `keys()`,
the keys it holds: `start()` then deletes the pending entries of
authorizations started over 10 minutes ago and never finished. A store
without `keys()` should expire `pending` entries itself (as a cache's
timeout does), or it keeps one per abandoned authorization.

Two stores come with the library: `MemoryStorage` (the default; gone with
the process) and `FileStorage` (one JSON file, private to the user).

Example, a store on Django's cache::

    class CacheStorage:
        def __init__(self, user_id):
            self.prefix = f"mcp-oauth:{user_id}:"
        def load(self, key):
            return cache.get(self.prefix + key)
        def save(self, key, value):
            # An abandoned authorization's entry goes after 10 minutes.
            cache.set(self.prefix + key, value, timeout=600 if key.startswith("pending ") else None)
        def delete(self, key):
            cache.delete(self.prefix + key)
"""

from __future__ import annotations

import copy
import errno
import json
import os
import stat
import tempfile
import threading
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from ..errors import AuthorizationError

__all__ = ["TokenStorage", "MemoryStorage", "FileStorage"]

#: Open the file itself, never what a symbolic link points to (0 where the platform lacks it).
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


@runtime_checkable
class TokenStorage(Protocol):
    """A key-value store of JSON dictionaries. Calls may come from many
    threads at once; an implementation makes each call atomic."""

    def load(self, key: str) -> dict[str, Any] | None:
        """The value saved under `key`, or None when there is none. The
        caller may change what it gets without changing what is stored.

        Args:
            key: The entry's key.

        Returns:
            The value, or None.
        """
        ...

    def save(self, key: str, value: Mapping[str, Any]) -> None:
        """Keep `value` (a JSON-ready dict) under `key`, replacing what was
        there.

        Args:
            key: The entry's key.
            value: What to keep.
        """
        ...

    def delete(self, key: str) -> None:
        """Forget `key`; nothing happens when it is not there.

        Args:
            key: The entry's key.
        """
        ...


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
        """A copy of the value under `key`, or None.

        Args:
            key: The entry's key.

        Returns:
            A copy of the value, or None.
        """
        with self._lock:
            value = self._data.get(key)
            # A copy, so a caller's edits never change what is stored.
            return copy.deepcopy(value) if value is not None else None

    def save(self, key: str, value: Mapping[str, Any]) -> None:
        """Keep a copy of `value` under `key`.

        Args:
            key: The entry's key.
            value: What to keep (copied).
        """
        with self._lock:
            self._data[key] = copy.deepcopy(dict(value))

    def delete(self, key: str) -> None:
        """Forget `key` (if it is there).

        Args:
            key: The entry's key.
        """
        with self._lock:
            self._data.pop(key, None)

    def pop(self, key: str) -> dict[str, Any] | None:
        """Load and delete in one step.

        Args:
            key: The entry's key.

        Returns:
            The value it held, or None.
        """
        with self._lock:
            return self._data.pop(key, None)

    def keys(self) -> list[str]:
        """The keys held now.

        Returns:
            A list of the keys (a copy).
        """
        with self._lock:
            return list(self._data)

    def __repr__(self) -> str:
        return f"MemoryStorage(<{len(self._data)} entries>)"


class FileStorage:
    """Keeps everything in one JSON file, readable by its owner only (0600).

    Each change rewrites the file through a temporary file and an atomic
    rename, so a crash never leaves half a file. Within a process a lock
    serializes changes; across processes the last writer wins, which is
    safe (every value can be obtained again) but may cost a re-login.

    Like ssh with keys, it refuses (with `AuthorizationError`) a file owned
    by another user, one its group or other users may write, and a
    symbolic link (never followed, for reading or writing).

    Example::

        oauth = OAuth(redirect=LoopbackRedirect(),
                      storage=FileStorage("~/.config/myapp/mcp-tokens.json"))

    Args:
        path: The file, `~` allowed; it need not exist yet.

    Attributes:
        path (str): The file's absolute path (``~`` expanded). It and its
            folder (mode 0700) are created on the first save.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.path.abspath(os.path.expanduser(os.fspath(path)))
        self._lock = threading.Lock()

    def _read(self) -> dict[str, Any]:
        try:
            if not _NOFOLLOW and os.path.islink(self.path):
                raise OSError(errno.ELOOP, "a symbolic link")  # no O_NOFOLLOW here: look first
            # O_NONBLOCK: opening a named pipe put at the path would wait
            # for a writer, for ever; so opened, it is refused below as not
            # a regular file. (For a regular file the flag changes nothing.)
            fd = os.open(self.path, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            return {}
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise AuthorizationError(
                    f"the token file {self.path} is a symbolic link; refusing to follow it (it could lead the "
                    "tokens anywhere): give the path of the file itself"
                ) from None
            raise AuthorizationError(f"the token file {self.path} cannot be read: {type(exc).__name__}") from None
        try:
            self._check_safe(os.fstat(fd))
            os.set_blocking(fd, True)
        except BaseException as exc:
            os.close(fd)
            if isinstance(exc, OSError):
                raise AuthorizationError(f"the token file {self.path} cannot be read: {type(exc).__name__}") from None
            raise
        try:
            with os.fdopen(fd, encoding="utf-8") as f:
                data = json.load(f)
        except OSError as exc:
            raise AuthorizationError(f"the token file {self.path} cannot be read: {type(exc).__name__}") from None
        except (ValueError, RecursionError) as exc:
            # RecursionError: nested past the parser's depth ("[[[[...").
            raise AuthorizationError(f"the token file {self.path} cannot be read: {type(exc).__name__}; it is not "
                                     f"what this library writes: remove it (the tokens are obtained again)") from None
        if not isinstance(data, dict):
            raise AuthorizationError(f"the token file {self.path} does not hold a JSON object; it is not what this "
                                     "library writes: remove it (the tokens are obtained again)")
        return data

    def _check_safe(self, info: os.stat_result) -> None:
        """Refuse a file another user could have written (as ssh does for
        keys): it could hold tokens or a client registration of theirs."""
        if not stat.S_ISREG(info.st_mode):
            raise AuthorizationError(f"the token file {self.path} is not a regular file; refusing it")
        if os.name == "nt":
            return  # owners and modes are not POSIX ones there
        if hasattr(os, "geteuid") and info.st_uid != os.geteuid():
            raise AuthorizationError(
                f"the token file {self.path} is owned by another user (uid {info.st_uid}); refusing it, as ssh "
                "refuses such keys: remove it, or use a file of your own"
            )
        writers = "other users" if info.st_mode & stat.S_IWOTH else "its group" if info.st_mode & stat.S_IWGRP else None
        if writers is not None:
            raise AuthorizationError(
                f"the token file {self.path} is writable by {writers} (mode {stat.S_IMODE(info.st_mode):04o}); "
                f"refusing it, as ssh refuses such keys: chmod 600 {self.path}"
            )

    def _write(self, data: Mapping[str, Any]) -> None:
        try:
            self._replace(data)
        except OSError as exc:
            raise AuthorizationError(f"the token file {self.path} cannot be written: {type(exc).__name__}") from None

    def _replace(self, data: Mapping[str, Any]) -> None:
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
        """The value under `key` as the file holds it now, or None (also
        when there is no file yet). Raises `AuthorizationError` for a file
        that cannot be read or is refused (see above).

        Args:
            key: The entry's key.

        Returns:
            The value, or None.

        Raises:
            AuthorizationError: The file cannot be read, or is refused.
        """
        with self._lock:
            value = self._read().get(key)
        return value if isinstance(value, dict) else None

    def save(self, key: str, value: Mapping[str, Any]) -> None:
        """Keep `value` under `key`, rewriting the file atomically. Raises
        `AuthorizationError` when the file cannot be read or written.

        Args:
            key: The entry's key.
            value: What to keep (a JSON-ready dict).

        Raises:
            AuthorizationError: The file cannot be read or written, or is
                refused.
        """
        with self._lock:
            data = self._read()
            data[key] = dict(value)
            self._write(data)

    def delete(self, key: str) -> None:
        """Forget `key`; the file is rewritten only when it held it.

        Args:
            key: The entry's key.

        Raises:
            AuthorizationError: The file cannot be read or written, or is
                refused.
        """
        self.pop(key)

    def pop(self, key: str) -> dict[str, Any] | None:
        """Load and delete in one step (within this process).

        Args:
            key: The entry's key.

        Returns:
            The value it held, or None.

        Raises:
            AuthorizationError: The file cannot be read or written, or is
                refused.
        """
        with self._lock:
            data = self._read()
            value = data.pop(key, None)
            if value is not None:
                self._write(data)
        return value if isinstance(value, dict) else None

    def keys(self) -> list[str]:
        """The keys the file holds now (none when there is no file yet).

        Returns:
            A list of the keys.

        Raises:
            AuthorizationError: The file cannot be read, or is refused.
        """
        with self._lock:
            return list(self._read())

    def __repr__(self) -> str:
        return f"FileStorage({self.path!r})"
