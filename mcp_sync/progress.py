"""A ready progress display for the `progress=` option: `progress_bar()`.

Owns drawing a call's `Progress` updates: with `tqdm.auto` when tqdm is
installed (a widget in a notebook, a bar in a terminal), else a plain bar of
its own on `sys.stderr`. It knows nothing of calls or connections: it is a
callable taking `Progress`, run on the calling thread like any `progress=`
callback.

A callback is never told that its call ended (the client has no such
signal), so a bar closes at whichever comes first: the progress reaching
its total; the end of a ``with`` block; `close()`; or the bar being
garbage-collected, which for ``progress=mcp_sync.progress_bar()`` happens
as the call returns (the call held the only reference). When the call
raises, the traceback keeps it alive a while: use ``with`` to close it at
once.
"""

from __future__ import annotations

import importlib
import sys
import threading
import time
from types import TracebackType
from typing import IO, Any

from .types import Progress

__all__ = ["ProgressBar", "progress_bar"]

#: The plain bar redraws at most this often (the last update always shows).
_REDRAW_EVERY = 0.1
_WIDTH = 24


def _tqdm_class() -> Any:
    """`tqdm.auto.tqdm`, or None without tqdm (an optional extra: never required)."""
    try:
        module = importlib.import_module("tqdm.auto")
    except ImportError:
        return None
    return getattr(module, "tqdm", None)


class ProgressBar:
    """A progress display for one call: pass it as ``progress=``.

    Made by `progress_bar()`; see there. It is the callback (call it with
    each `Progress`) and a context manager that closes it on exit. Updates
    after it closed are ignored: use a new bar for each call.

    Attributes:
        description: The label drawn before the bar, or None.

    Example::

        with mcp_sync.progress_bar("countdown") as bar:
            client.call_tool("countdown", {"steps": 10}, progress=bar)
    """

    def __init__(self, description: str | None = None, *, plain: bool | None = None,
                 file: IO[str] | None = None) -> None:
        self.description = description
        self._file = file
        self._tqdm: Any = None if plain else _tqdm_class()
        if plain is False and self._tqdm is None:
            raise ValueError("progress_bar(plain=False) needs tqdm, which is not installed")
        # A garbage collection may close the bar from another thread.
        self._lock = threading.RLock()
        self._bar: Any = None  # the tqdm bar, made on the first update
        self._closed = False
        self._last: Progress | None = None
        self._drawn: Progress | None = None
        self._drawn_at = 0.0
        self._drawn_width = 0

    @property
    def uses_tqdm(self) -> bool:
        """True when this bar draws with `tqdm.auto`."""
        return self._tqdm is not None

    @property
    def closed(self) -> bool:
        """True once the display is finished (see the module docstring for when)."""
        return self._closed

    def __call__(self, progress: Progress) -> None:
        with self._lock:
            if self._closed:
                return
            self._last = progress
            if self._tqdm is not None:
                self._update_tqdm(progress)
            else:
                self._draw(progress, force=False)
            if progress.total and progress.progress >= progress.total:
                self.close()

    def close(self) -> None:
        """Finish the display (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._bar is not None:
                self._bar.close()
            elif self._tqdm is None and self._last is not None:
                if self._drawn is not self._last:
                    self._draw(self._last, force=True)
                self._write("\n")

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    def __del__(self) -> None:
        # The one-liner `progress=progress_bar()`: the call held the only
        # reference, so this runs as the call returns. Never raise from here.
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<ProgressBar {self.description or ''!s} {state} ({'tqdm' if self._tqdm else 'plain'})>"

    # -- tqdm ------------------------------------------------------------------

    def _update_tqdm(self, progress: Progress) -> None:
        bar = self._bar
        if bar is None:
            try:
                bar = self._bar = self._tqdm(total=progress.total, desc=self.description, file=self._file)
            except Exception:
                # tqdm.auto in a notebook without ipywidgets raises here: draw plainly instead.
                self._tqdm = None
                self._draw(progress, force=True)
                return
        elif progress.total is not None and progress.total != bar.total:
            bar.reset(total=progress.total)  # also resizes the notebook widget
        if progress.message:
            bar.set_postfix_str(progress.message, refresh=False)
        step = progress.progress - bar.n
        if step >= 0:
            bar.update(step)
        else:  # a server whose progress went back (the spec forbids it): show it anyway
            bar.n = progress.progress
            bar.refresh()

    # -- the plain bar -------------------------------------------------------------

    def _draw(self, progress: Progress, *, force: bool) -> None:
        now = time.monotonic()
        if not force and self._drawn is not None and now - self._drawn_at < _REDRAW_EVERY:
            return
        self._drawn, self._drawn_at = progress, now
        line = _plain_line(progress, self.description)
        padding = " " * max(0, self._drawn_width - len(line))  # erase what a longer line left
        self._drawn_width = len(line)
        self._write("\r" + line + padding)

    def _write(self, text: str) -> None:
        stream = self._file if self._file is not None else sys.stderr  # looked up now: a cell may swap it
        if stream is None:
            return
        try:
            stream.write(text)
            stream.flush()
        except (OSError, ValueError):
            pass


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.3g}"


def _plain_line(progress: Progress, description: str | None) -> str:
    parts = [f"{description}:"] if description else []
    fraction = progress.fraction
    if fraction is not None and progress.total is not None:
        filled = int(_WIDTH * fraction)
        parts.append(f"[{'#' * filled}{'.' * (_WIDTH - filled)}] {_number(progress.progress)}/"
                     f"{_number(progress.total)} {fraction:4.0%}")
    else:
        parts.append(_number(progress.progress))
    if progress.message:
        # One line: a message's own line breaks would defeat the carriage return.
        parts.append(" ".join(progress.message.split())[:200])
    return " ".join(parts)


def progress_bar(description: str | None = None, *, plain: bool | None = None,
                 file: IO[str] | None = None) -> ProgressBar:
    """A progress display to pass as ``progress=``: a `tqdm.auto` bar when
    tqdm is installed (a widget in Jupyter, a text bar in a terminal), else
    a plain text bar on `sys.stderr`. `plain=True` always uses the plain
    bar; `plain=False` insists on tqdm. `file` is where either draws
    (default: `sys.stderr`).

    It closes when the progress reaches its total, when the call returns
    (the call held the only reference to it), or, deterministically, at
    the end of a ``with`` block.

    Example::

        result = client.call_tool("countdown", {"steps": 10}, progress=mcp_sync.progress_bar())

        with mcp_sync.progress_bar("indexing") as bar:
            client.call_tool("index", {"path": "."}, progress=bar)
    """
    return ProgressBar(description, plain=plain, file=file)
