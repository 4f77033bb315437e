r"""A ready progress display for the `progress=` option: `progress_bar()`.

Owns drawing a call's `Progress` updates: with `tqdm.auto` when tqdm is
installed (a widget in a notebook, a bar in a terminal), else a plain bar of
its own on `sys.stderr`. It knows nothing of calls or connections: it is a
callable taking `Progress`, run on the calling thread like any `progress=`
callback. The `mcp-sync` command draws with the plain bar too.

The plain bar redraws one line in place (a carriage return) on a terminal
and in a Jupyter notebook, at most ten times a second. On anything else (a
log file, a pipe, a captured stream) it writes whole lines, no carriage
returns, and at most one a second (the first update and the last always show): a log
gets a few lines for a fast countdown of thousands of steps, and a steady
heartbeat for a slow one. A server's message is shown with its control
characters as visible escapes (`\x1b`), so it cannot recolour, clear or
retitle the terminal; the tqdm bar gets it the same way.

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
import os
import sys
import threading
import time
from types import TracebackType
from typing import IO, Any

from .control_chars import VISIBLE
from .types import Progress

__all__ = ["ProgressBar", "progress_bar"]

#: The plain bar redraws at most this often on a terminal (the last update always shows)...
_REDRAW_EVERY = 0.1
#: ...and writes a new line at most this often elsewhere (a log must not get a line per step).
_LINE_EVERY = 1.0
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
        description (str | None): The label drawn before the bar, or None.

    Example::

        with mcp_sync.progress_bar("countdown") as bar:
            client.call_tool("countdown", {"steps": 10}, progress=bar)
    """

    def __init__(self, description: str | None = None, *, plain: bool | None = None,
                 file: IO[str] | None = None) -> None:
        if plain is not None and not isinstance(plain, bool):
            raise TypeError(f"plain must be True, False or None, not {plain!r}")
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
        self._lines = False  # drawn as whole lines (not a terminal): nothing to end at close

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
                if not self._lines:  # end the line redrawn in place (whole lines end themselves)
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
            bar.set_postfix_str(_message(progress.message), refresh=False)
        step = progress.progress - bar.n
        if step >= 0:
            bar.update(step)
        else:  # a server whose progress went back (the spec forbids it): show it anyway
            bar.n = progress.progress
            bar.refresh()

    # -- the plain bar -------------------------------------------------------------

    def _draw(self, progress: Progress, *, force: bool) -> None:
        stream = self._stream()
        terminal = _is_terminal(stream)
        now = time.monotonic()
        every = _REDRAW_EVERY if terminal else _LINE_EVERY
        if not force and self._drawn is not None and now - self._drawn_at < every:
            return
        self._drawn, self._drawn_at = progress, now
        line = _plain_line(progress, self.description)
        if not terminal:
            self._lines = True
            self._write(line + "\n")
            return
        columns = _columns(stream)
        if columns:  # a line that wraps cannot be redrawn in place
            line = line[:columns - 1]
        padding = " " * max(0, self._drawn_width - len(line))  # erase what a longer line left
        self._drawn_width = len(line)
        self._write("\r" + line + padding)

    def _stream(self) -> IO[str] | None:
        return self._file if self._file is not None else sys.stderr  # looked up now: a cell may swap it

    def _write(self, text: str) -> None:
        stream = self._stream()
        if stream is None:
            return
        try:
            stream.write(text)
            stream.flush()
        except (OSError, ValueError):
            pass


def _is_terminal(stream: IO[str] | None) -> bool:
    """Whether a carriage return redraws the line: a terminal, or a Jupyter
    kernel's output stream (not a terminal, but its output area draws a
    carriage return as one; a saved notebook keeps only the last state)."""
    if stream is not None and type(stream).__module__.startswith("ipykernel."):
        return True
    try:
        return bool(stream is not None and stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def _columns(stream: IO[str] | None) -> int:
    """The terminal's width, or 0 when it cannot be told."""
    try:
        return os.get_terminal_size(stream.fileno()).columns if stream is not None else 0
    except (AttributeError, ValueError, OSError):
        return 0


def _message(text: str) -> str:
    """A server's message on one line (its own line breaks would defeat the
    carriage return), at most 200 characters, with control characters shown
    as escapes: it comes from the server, and must not drive the terminal."""
    return " ".join(text.split())[:200].translate(VISIBLE)


def _number(value: float) -> str:
    """A count as drawn: a whole number in full up to 15 digits, anything
    else in 3 significant digits (1.8e+308, nan, inf), so a server's huge
    number cannot make a huge line. Never raises: `Progress.from_wire`
    keeps numbers finite, but a hand-made `Progress` may hold any."""
    number = Progress._float(value)
    return str(int(number)) if number.is_integer() and abs(number) < 1e15 else f"{number:.3g}"


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
        parts.append(_message(progress.message))
    return " ".join(parts)


def progress_bar(description: str | None = None, *, plain: bool | None = None,
                 file: IO[str] | None = None) -> ProgressBar:
    """A progress display to pass as ``progress=``: a `tqdm.auto` bar when
    tqdm is installed (a widget in Jupyter, a text bar in a terminal), else
    a plain text bar on `sys.stderr`.

    It closes when the progress reaches its total, when the call returns
    (the call held the only reference to it), or, deterministically, at
    the end of a ``with`` block.

    Args:
        description: A label drawn before the bar.
        plain: True always uses the plain bar; False insists on tqdm
            (`ValueError` when it is not installed); None takes tqdm when
            it is installed.
        file: Where the bar draws (None: `sys.stderr`).

    Returns:
        The bar, a callable taking each `Progress`.

    Example::

        result = client.call_tool("countdown", {"steps": 10}, progress=mcp_sync.progress_bar())

        with mcp_sync.progress_bar("indexing") as bar:
            client.call_tool("index", {"path": "."}, progress=bar)
    """
    return ProgressBar(description, plain=plain, file=file)
