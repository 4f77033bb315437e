"""Transports: IO only. `stdio` (a server subprocess), `memory` (in-process),
and the `Transport`/`Target` interface for custom ones."""

from .base import Custom, MessageSink, Target, Transport
from .memory import Memory
from .stdio import Stdio

__all__ = ["Custom", "Memory", "MessageSink", "Stdio", "Target", "Transport"]
