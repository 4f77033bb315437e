"""A minimal, fast MCP server for benchmarking MCP *clients*.

    python benchmarks/server.py stdio [--stats PATH]
    python benchmarks/server.py http [--port 0] [--stats PATH]
        (prints one line, http://127.0.0.1:PORT/mcp, once listening)

It speaks both protocol eras (the stateless 2026-07-28 revision with
`server/discover`, and the `initialize` handshake of 2025-11-25, 2025-06-18
and 2025-03-26) and offers two tools: `echo` {text}, and `blob` {n}, which
returns n ASCII bytes as both text and structured content. A third, not
listed, `flood` {n, kind}, sends n progress notifications (kind
"progress", for the request's progress token), n log messages (kind
"log") or n `notifications/resources/updated` on the open
`subscriptions/listen` stream (kind "updates"; stdio, 2026-07-28: the
listen is acknowledged and never answered) before its result.

The clients are what a benchmark measures, so this server must cost as
little as possible per call: standard library only, fixed answers encoded
once, responses spliced from string templates instead of serialising dicts,
blob answers cached per n, and a raw-socket HTTP/1.1 server instead of
`http.server` (whose email-based header parsing would dominate). It checks
almost nothing (sessions, headers, argument schemas): benchmark clients are
trusted. Most of what a call still costs it is the kernel waking it up.

With --gzip (HTTP) it answers in gzip a client that accepts it, for
bodies over 1 KiB: the body's parts as gzip members (RFC 1952 allows a
series), the large blob part compressed once and cached, so the server's
cost stays out of what is measured.

With --stats PATH (or BENCH_SERVER_STATS=PATH) it writes {"requests",
"tool_calls", "cpu_s", "wall_s"} there on exit (stdin EOF, SIGTERM or
SIGINT), so a harness can tell the server's own CPU from the client's.

With --get-stream (HTTP) it answers the initialize era's GET with an
event stream it holds open and never writes to, rather than a 405.

With --tools N it lists N tools (`echo`, `blob`, then generated ones, each
with a described input schema and annotations, one in ten with an
`outputSchema`), in pages of --page-size (default: all in one page; the
cursor is the offset). The pages are encoded once, at start. With
--vary as well, three listings' worth are encoded, each with other
descriptions, and each listing (a first page asked for) is the next
one's: a client listing in turn with another on the same server never
gets the tools of its own last listing again.

With --sse (HTTP) it answers every request that has a 200 answer with an
SSE stream instead of JSON, as the official SDK's server does by default:
chunked, one `message` event, then the terminating chunk in a write of
its own (the official server's end comes after its event generator ends).
The stats then also count the connections accepted (`connections`), which
tells whether a client reuses them.
"""

from __future__ import annotations

import argparse
import functools
import gzip
import itertools
import json
import os
import signal
import socket
import stat
import sys
import threading
import time
from json.encoder import encode_basestring_ascii
from typing import Any

MODERN = "2026-07-28"
LEGACY = ("2025-11-25", "2025-06-18", "2025-03-26")
SUPPORTED = [MODERN, "2025-11-25", "2025-06-18"]
VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
SERVER_INFO = {"name": "bench-server", "version": "1.0"}
MAX_BLOB = 1 << 26  # a cached blob answer holds n bytes twice

Reply = tuple[int, list[bytes], bool]  # HTTP status, body parts, new session?
_dumps = json.JSONEncoder(separators=(",", ":")).encode
_scan = json.JSONDecoder().scan_once  # type: ignore[attr-defined]

_TOOLS = [
    {"name": "echo", "description": "Return the text it is given.",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
    {"name": "blob", "description": "Return n bytes of ASCII text (text and structured content).",
     "inputSchema": {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}, "required": ["n"]},
     "outputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
]
# 2026-07-28 requires resultType on every result, and ttlMs and cacheScope on
# discover and lists; ttlMs 0 keeps caching clients honest (a list is a call).
_HINTS = {"resultType": "complete", "ttlMs": 0, "cacheScope": "public"}
_DISCOVER = _dumps({"supportedVersions": SUPPORTED, "capabilities": {"tools": {}},
                    "_meta": {"io.modelcontextprotocol/serverInfo": SERVER_INFO}, **_HINTS})
# Answers that never change, by method, then by `modern` (False/True).
_FIXED = {
    "tools/list": (_dumps({"tools": _TOOLS}), _dumps({"tools": _TOOLS, **_HINTS})),
    "server/discover": (_DISCOVER, _DISCOVER),
    "ping": ("{}", '{"resultType":"complete"}'),
}
_OPEN = ("{", '{"resultType":"complete",')  # a result's opening, by `modern`
_ECHO = tuple('{"jsonrpc":"2.0","id":%s,"result":' + o + '"content":[{"type":"text","text":%s}],"isError":false}}\n'
              for o in _OPEN)
_RESULT = '{"jsonrpc":"2.0","id":%s,"result":%s}\n'
_PARSE_ERROR = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}\n'
_INVALID = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request"}}\n'

# next() on a C counter is atomic under the GIL: no lock on the hot path, and
# none that the signal handler could interrupt while it is held.
_requests = itertools.count()
_tool_calls = itertools.count()


def _error(rid: str, code: int, message: str, data: Any = None, status: int = 200) -> Reply:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return status, [f'{{"jsonrpc":"2.0","id":{rid},"error":{_dumps(error)}}}\n'.encode()], False


def _tool_error(rid: str, modern: bool, text: str) -> Reply:
    content = f'"content":[{{"type":"text","text":{encode_basestring_ascii(text)}}}],"isError":true}}'
    return 200, [(_RESULT % (rid, _OPEN[modern] + content)).encode()], False


@functools.lru_cache(maxsize=4)
def _blob_body(n: int) -> bytes:
    """The CallToolResult after its opening brace; letters need no JSON
    escaping, so the text is spliced in as is."""
    text = (b"abcdefghijklmnopqrstuvwxyz" * (n // 26 + 1))[:n]
    return b'"content":[{"type":"text","text":"%s"}],"structuredContent":{"text":"%s"},"isError":false}' % (
        text, text)


#: --tools: tools/list pages by cursor ("" for the first), then by `modern`.
_PAGES: dict[str, tuple[str, str]] = {}
#: --vary: the listings served in turn (`_PAGES` is the current one).
_LISTINGS: list[dict[str, tuple[str, str]]] = []
_listings_served = itertools.count()


def _generated_tool(i: int, listing: int = 0) -> dict[str, Any]:
    changed = f" (listing {listing})" if listing else ""
    tool: dict[str, Any] = {
        "name": f"tool_{i:05d}", "title": f"Tool {i}",
        "description": f"Generated tool number {i}: does nothing, described at a realistic length{changed}.",
        "inputSchema": {"type": "object", "properties": {
            "text": {"type": "string", "description": "what to work on"},
            "count": {"type": "integer", "minimum": 0, "description": "how many times"}},
            "required": ["text"]},
        "annotations": {"readOnlyHint": True, "openWorldHint": False},
    }
    if i % 10 == 0:
        tool["outputSchema"] = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    return tool


def _build_pages(count: int, page_size: int, listing: int = 0) -> dict[str, tuple[str, str]]:
    tools = (_TOOLS + [_generated_tool(i, listing) for i in range(count)])[:count]
    pages = {}
    for offset in range(0, max(count, 1), page_size):
        result: dict[str, Any] = {"tools": tools[offset:offset + page_size]}
        if offset + page_size < count:
            result["nextCursor"] = str(offset + page_size)
        pages["" if offset == 0 else str(offset)] = (_dumps(result), _dumps({**result, **_HINTS}))
    return pages


def _tools_call(rid: str, params: dict[str, Any], modern: bool) -> Reply:
    next(_tool_calls)
    name = params.get("name")
    args = params.get("arguments") or {}
    if name == "echo":
        text = args.get("text") if type(args) is dict else None
        if type(text) is not str:
            return _tool_error(rid, modern, "echo needs a string 'text'")
        return 200, [(_ECHO[modern] % (rid, encode_basestring_ascii(text))).encode()], False
    if name == "blob":
        n = args.get("n") if type(args) is dict else None
        if type(n) is not int or not 0 <= n <= MAX_BLOB:
            return _tool_error(rid, modern, f"blob needs an integer 'n' from 0 to {MAX_BLOB}")
        head = f'{{"jsonrpc":"2.0","id":{rid},"result":{_OPEN[modern]}'.encode()
        return 200, [head, _blob_body(n), b"}\n"], False
    if name == "flood":
        return _flood(rid, params, args if type(args) is dict else {}, modern)
    return _error(rid, -32602, f"Unknown tool: {name}")


_FLOOD_KINDS = {
    "progress": '{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":TOKEN,"progress":%d}}\n',
    "log": '{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","logger":"flood",'
           '"data":%d}}\n',
    "updates": '{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"bench://%d",'
               '"_meta":{"io.modelcontextprotocol/subscriptionId":LISTEN}}}\n',
}
_SUBSCRIPTION_KEY = "io.modelcontextprotocol/subscriptionId"
_listening: list[str] = []  # the id of the open `subscriptions/listen` (stdio; one at a time)


def _listen(rid: str, params: dict[str, Any]) -> Reply:
    """`subscriptions/listen`: acknowledged with the filter as asked, then
    left open (never answered): `flood` kind "updates" sends on it."""
    _listening[:] = [rid]
    wanted = params.get("notifications") if type(params.get("notifications")) is dict else {}
    ack = {"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
           "params": {"notifications": wanted, "_meta": {_SUBSCRIPTION_KEY: json.loads(rid)}}}
    return 200, [(_dumps(ack) + "\n").encode()], False


def _flood(rid: str, params: dict[str, Any], args: dict[str, Any], modern: bool) -> Reply:
    """`flood` {n, kind}: n progress notifications (for the request's
    progress token) or n log messages, then a short result: what a client's
    notification path can take, one call's worth."""
    n, kind = args.get("n"), args.get("kind", "progress")
    if type(n) is not int or not 0 <= n <= 10_000_000 or kind not in _FLOOD_KINDS:
        return _tool_error(rid, modern, "flood needs an integer 'n' and a 'kind' of progress, log or updates")
    meta = params.get("_meta")
    token = meta.get("progressToken") if type(meta) is dict else None
    template = _FLOOD_KINDS[kind]
    if kind == "progress":
        if token is None:
            return _tool_error(rid, modern, "flood of progress needs a progress token")
        template = template.replace("TOKEN", _dumps(token))
    elif kind == "updates":
        if not _listening:
            return _tool_error(rid, modern, "flood of updates needs an open subscriptions/listen")
        template = template.replace("LISTEN", _listening[0])
    lines = [(template % i).encode() for i in range(1, n + 1)]
    # Written in pieces of about 64 KiB, as a server writing as it goes does.
    parts = [b"".join(lines[i:i + 500]) for i in range(0, n, 500)]
    parts.append((_ECHO[modern] % (rid, encode_basestring_ascii(f"flooded {n}"))).encode())
    return 200, parts, False


def _loads(data: bytes) -> Any:
    # The C scanner straight away: json.loads(bytes) spends about half its
    # time sniffing the encoding and matching whitespace around the value.
    text = data.decode()
    try:
        msg, end = _scan(text, 0)
    except StopIteration:  # leading whitespace, or not JSON: loads decides
        return json.loads(text)
    if end != len(text) and not text[end:].isspace():
        raise ValueError("extra data after the JSON value")
    return msg


def handle(data: bytes) -> Reply | None:
    """Answer one JSON-RPC message; the reply's parts end with a newline.
    None for notifications and client responses: they get no answer."""
    global _PAGES  # --vary: each listing is the next one's
    try:
        msg = _loads(data)
    except (ValueError, RecursionError):
        return 400, [_PARSE_ERROR], False
    if type(msg) is not dict:
        return 400, [_INVALID], False
    method = msg.get("method")
    if "id" not in msg or method is None:
        return None
    next(_requests)
    rid = msg["id"]
    rid = str(rid) if type(rid) is int else _dumps(rid)
    params = msg.get("params")
    if params is None:
        params = {}
    elif type(params) is not dict:
        return _error(rid, -32602, "Invalid params: params must be an object")
    meta = params.get("_meta")
    version = meta.get(VERSION_KEY) if type(meta) is dict else None
    modern = version == MODERN
    if version is not None and not modern:
        versions = {"supported": SUPPORTED, "requested": version}
        return _error(rid, -32022, "Unsupported protocol version", versions, status=400)
    if method == "tools/call":
        return _tools_call(rid, params, modern)
    if method == "subscriptions/listen" and modern:
        return _listen(rid, params)
    if method == "tools/list" and _PAGES:
        if _LISTINGS and not params.get("cursor"):
            _PAGES = _LISTINGS[next(_listings_served) % len(_LISTINGS)]
        page = _PAGES.get(params.get("cursor") or "")
        if page is None:
            return _error(rid, -32602, "Invalid params: unknown cursor")
        return 200, [(_RESULT % (rid, page[modern])).encode()], False
    if type(method) is str and method in _FIXED:
        return 200, [(_RESULT % (rid, _FIXED[method][modern])).encode()], False
    if method == "initialize":
        requested = params.get("protocolVersion")
        result: dict[str, Any] = {"protocolVersion": requested if requested in LEGACY else LEGACY[0],
                                  "capabilities": {"tools": {}}, "serverInfo": SERVER_INFO}
        return 200, [(_RESULT % (rid, _dumps(result))).encode()], True
    # 2026-07-28 Streamable HTTP answers an unknown method with a 404.
    return _error(rid, -32601, f"Method not found: {method}", status=404 if modern else 200)


def serve_stdio() -> None:
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        reply = handle(line) if not line.isspace() else None
        if reply is None:
            continue
        try:
            for part in reply[1]:
                out.write(part)
            out.flush()
        except BrokenPipeError:  # the client is gone; keep the exit flush quiet
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return


_REASONS = {200: "OK", 202: "Accepted", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            411: "Length Required"}


def _head(status: int, length: int, extra: str = "") -> bytes:
    return f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Length: {length}\r\n{extra}\r\n".encode()


def _header(head: bytes, name: bytes) -> bytes | None:
    """Header `name` (b"\\r\\nname:") of a lowercased head: a few finds cost
    far less than splitting every header line."""
    i = head.find(name)
    if i < 0:
        return None
    j = head.find(b"\r\n", i + len(name))
    return head[i + len(name):j if j >= 0 else len(head)].strip()


#: --gzip: compress answers for clients that accept gzip.
_GZIP = False
#: --sse: answer requests with an SSE stream.
_SSE = False
#: --get-stream: accept the initialize era's GET stream (and hold it open).
_GET_STREAM = False
_connections = itertools.count()


@functools.lru_cache(maxsize=8)
def _gzipped(part: bytes) -> bytes:
    """One gzip member per part: a blob's large part is the same object
    every time (`_blob_body` caches it), so it is compressed once."""
    return gzip.compress(part, 6)


def _serve_connection(sock: socket.socket) -> None:
    buf = b""
    try:
        while True:
            while (end := buf.find(b"\r\n\r\n")) < 0:
                if len(buf) > 65536:
                    sock.sendall(_head(400, 0, "Connection: close\r\n"))
                    return
                chunk = sock.recv(65536)
                if not chunk:
                    return
                buf += chunk
            line_end = buf.find(b"\r\n")
            request = buf[:line_end].split(b" ")
            head = buf[line_end:end].lower()
            buf = buf[end + 4:]
            length = _header(head, b"\r\ncontent-length:") or b"0"
            if len(request) != 3 or not length.isdigit() or b"\r\ntransfer-encoding:" in head:
                status = 411 if b"\r\ntransfer-encoding:" in head else 400
                sock.sendall(_head(status, 0, "Connection: close\r\n"))
                return
            connection = _header(head, b"\r\nconnection:")
            keep = connection != b"close" if request[2] == b"HTTP/1.1" else connection == b"keep-alive"
            size = int(length)
            if len(buf) < size:
                if _header(head, b"\r\nexpect:") == b"100-continue":
                    sock.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
                chunks, have = [buf], len(buf)
                while have < size:  # join once at the end: no quadratic growth
                    chunk = sock.recv(max(65536, size - have))
                    if not chunk:
                        return
                    chunks.append(chunk)
                    have += len(chunk)
                buf = b"".join(chunks)
            body, buf = buf[:size], buf[size:]
            extra = "" if keep else "Connection: close\r\n"
            if request[1].partition(b"?")[0] != b"/mcp":
                sock.sendall(_head(404, 0, extra))
            elif request[0] == b"POST":
                reply = handle(body)
                if reply is None:
                    sock.sendall(_head(202, 0, extra))
                else:
                    status, parts, session = reply
                    if session:
                        extra += f"Mcp-Session-Id: {os.urandom(16).hex()}\r\n"
                    if _SSE and status == 200:
                        _send_sse(sock, extra, parts)
                        continue
                    extra += "Content-Type: application/json\r\n"
                    accepts = _header(head, b"\r\naccept-encoding:") or b""
                    if _GZIP and b"gzip" in accepts and sum(map(len, parts)) > 1024:
                        parts = [_gzipped(part) if len(part) > 65536 else gzip.compress(part, 6) for part in parts]
                        extra += "Content-Encoding: gzip\r\n"
                    sock.sendall(_head(status, sum(map(len, parts)), extra) + parts[0])
                    for part in parts[1:]:  # a blob's large middle part, not copied
                        sock.sendall(part)
            elif request[0] == b"DELETE":
                sock.sendall(_head(200, 0, extra))
            elif request[0] == b"GET" and _GET_STREAM:
                # The initialize era's standalone stream: opened, never
                # written to, held until the client goes.
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                             b"Transfer-Encoding: chunked\r\n\r\n")
                while sock.recv(65536):
                    pass
                return
            else:
                sock.sendall(_head(405, 0, extra + "Allow: POST, DELETE\r\n"))
            if not keep:
                return
    except OSError:
        pass  # the peer reset or went away: nothing left to answer
    finally:
        sock.close()


def _send_sse(sock: socket.socket, extra: str, parts: list[bytes]) -> None:
    """One answer as an SSE stream: a `message` event in one chunk, then
    the stream's end in a write of its own."""
    data = b"".join(parts).rstrip(b"\n")
    event = b"event: message\r\ndata: %s\r\n\r\n" % data
    head = (f"HTTP/1.1 200 OK\r\n{extra}Content-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
            "Transfer-Encoding: chunked\r\n\r\n").encode()
    sock.sendall(head + b"%x\r\n%s\r\n" % (len(event), event))
    sock.sendall(b"0\r\n\r\n")


def _accept(listener: socket.socket) -> None:
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return  # the listener was closed: shutting down
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        next(_connections)
        threading.Thread(target=_serve_connection, args=(conn,), daemon=True).start()


def serve_http(port: int) -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(128)
    threading.Thread(target=_accept, args=(listener,), daemon=True).start()
    sys.stdout.write(f"http://127.0.0.1:{listener.getsockname()[1]}/mcp\n")
    sys.stdout.flush()
    try:
        # Stdin EOF stops the server only when stdin is a pipe or socket that
        # a harness holds: /dev/null or a terminal would end it at once.
        if stat.S_ISFIFO(os.fstat(0).st_mode) or stat.S_ISSOCK(os.fstat(0).st_mode):
            while os.read(0, 65536):
                pass
        else:
            while True:
                time.sleep(3600)
    finally:
        listener.close()


def _write_stats(path: str, started: float) -> None:
    stats = {"requests": next(_requests), "tool_calls": next(_tool_calls),
             "cpu_s": time.process_time(), "wall_s": time.monotonic() - started}
    if _SSE:
        stats["connections"] = next(_connections)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(stats, f)
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    """Serve until stdin ends or SIGTERM/SIGINT; then write the stats if asked."""
    global _requests, _tool_calls, _GZIP, _PAGES, _SSE, _GET_STREAM
    started = time.monotonic()
    parser = argparse.ArgumentParser(description="A minimal MCP server for benchmarking MCP clients.")
    parser.add_argument("transport", choices=("stdio", "http"))
    parser.add_argument("--port", type=int, default=0, help="HTTP port (default 0: any free port)")
    parser.add_argument("--gzip", action="store_true", help="HTTP: gzip answers over 1 KiB for clients that accept it")
    parser.add_argument("--sse", action="store_true", help="HTTP: answer requests with an SSE stream, not JSON")
    parser.add_argument("--get-stream", action="store_true", help="HTTP: hold GET streams open instead of a 405")
    parser.add_argument("--tools", type=int, default=0, help="list this many tools (echo and blob first)")
    parser.add_argument("--page-size", type=int, default=0, help="tools per tools/list page (default: one page)")
    parser.add_argument("--vary", action="store_true",
                        help="--tools: three listings with other descriptions, served in turn")
    parser.add_argument("--stats", default=os.environ.get("BENCH_SERVER_STATS"),
                        help="write the stats JSON here on exit (default: $BENCH_SERVER_STATS)")
    args = parser.parse_args(argv)
    _requests, _tool_calls = itertools.count(), itertools.count()
    _GZIP = args.gzip
    _SSE = args.sse
    _GET_STREAM = args.get_stream
    if args.tools:
        _PAGES = _build_pages(args.tools, args.page_size or args.tools)
        if args.vary:
            _LISTINGS[:] = [_build_pages(args.tools, args.page_size or args.tools, n) for n in (1, 2, 3)]
    previous = {}
    if threading.current_thread() is threading.main_thread():  # signals can only be set there
        for sig in (signal.SIGTERM, signal.SIGINT):  # both unwind to the finally below
            previous[sig] = signal.signal(sig, signal.default_int_handler)
    try:
        if args.transport == "stdio":
            serve_stdio()
        else:
            serve_http(args.port)
    except KeyboardInterrupt:
        pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if args.stats:
            _write_stats(args.stats, started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
