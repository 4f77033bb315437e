"""Raw answers instead of serving: a gate for `mcp_sync.testing.HTTPServer`.

`HTTPServer(server, gate=canned)` asks `canned` about every request first;
while it holds answers for the request's HTTP method it sends the oldest
(each `times` times) instead of serving, and the server records the request
as usual. It is how the client's tests meet 404 pages, 401 challenges, 5xx
answers and bodies that are not JSON-RPC from an otherwise real server.

Example::

    canned = Canned()
    httpd = HTTPServer(demo_server(), gate=canned).start()
    canned.add(404, b"<html>not here</html>")  # the next POST gets this
"""

from __future__ import annotations

import collections
import json
import threading
from collections.abc import Mapping

from mcp_sync.testing import GateAnswer, Gated


class Canned:
    """A gate with queues of raw answers, one queue per HTTP method (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: method -> [answer, times left] pairs, oldest first.
        self._queues: dict[str, collections.deque[list]] = {}

    def add(self, status: int, body: bytes | str = b"", headers: Mapping[str, str] | None = None, *,
            times: int = 1, method: str = "POST") -> None:
        """Answer the next `times` requests of HTTP `method` with this. Without
        a Content-Type in `headers`, a non-empty body is sent as
        application/json when it parses as a JSON object or array, else as
        text/plain."""
        if times < 1:
            raise ValueError("times must be at least 1")
        data = body.encode("utf-8") if isinstance(body, str) else bytes(body)
        sent = dict(headers or {})
        if data and not any(name.lower() == "content-type" for name in sent):
            sent["Content-Type"] = "application/json" if _is_json(data) else "text/plain; charset=utf-8"
        with self._lock:
            self._queues.setdefault(method.upper(), collections.deque()).append([GateAnswer(status, sent, data), times])

    def __call__(self, gated: Gated) -> GateAnswer | None:
        with self._lock:
            queue = self._queues.get(gated.method)
            if not queue:
                return None
            entry = queue[0]
            entry[1] -= 1
            if entry[1] == 0:
                queue.popleft()
            return entry[0]


def _is_json(data: bytes) -> bool:
    try:
        return isinstance(json.loads(data), (dict, list))
    except ValueError:
        return False
