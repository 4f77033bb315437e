"""A stdio MCP server that misbehaves in one chosen way, for the fault walk.

Standard library only, so it starts fast. It speaks both eras (it answers
`server/discover` for 2026-07-28 and `initialize` for the older ones) and
has two tools: `echo`, always well behaved, and `hostile`, whose answer is
the fault named by `--fault`. So a test can call `hostile` and then check
with `echo` that the client is still usable.

    python hostile_stdio.py --fault FAULT [--pending N] [--record FILE]
                            [--size BYTES] [--count N]

`--pending N` holds the `hostile` calls until N of them have arrived and
then applies the fault once, so that N calls are in flight when a fault
that kills the connection strikes. `--record FILE` appends one JSON line per
message received (method, id, a call's tool name, a cancellation's request id), so a
test can see that the client told the server it gave up.
"""

import argparse
import json
import os
import sys

STATELESS = "2026-07-28"
UNKNOWN_REQUEST_ID = "hostile-request-1"


def _garbage(server, ids):
    server.raw("this is not json at all\n")


def _not_an_object(server, ids):
    server.raw("[1, 2, 3]\n")


def _oversize(server, ids):
    # One valid response, longer than the client's max_line_bytes.
    server.raw(json.dumps(server.answer(ids[0], "x" * server.args.size)) + "\n")


def _death_mid_line(server, ids):
    line = json.dumps(server.answer(ids[0], "never finished"))
    server.raw(line[: len(line) // 2])
    server.die("died mid-line")


def _death_mid_call(server, ids):
    server.die("died mid-call")


def _hang(server, ids):
    pass  # never answers; the client's cancellation is recorded


def _wrong_id(server, ids):
    server.send(server.answer(ids[0] + 1_000_000 if isinstance(ids[0], int) else f"{ids[0]}-wrong", "misrouted"))


def _duplicate_id(server, ids):
    server.send(server.answer(ids[0], "first"))
    server.send(server.answer(ids[0], "second"))


def _deep_json(server, ids):
    server.raw("[" * 100_000 + "]" * 100_000 + "\n")


def _flood(server, ids):
    count, token = server.args.count, server.progress_tokens.get(ids[0])
    lines = []
    for i in range(1, count + 1):
        if i % 3 == 0 and token is not None:
            note = {"method": "notifications/progress", "params": {"progressToken": token, "progress": i}}
        elif i % 3 == 1:
            note = {"method": "notifications/message", "params": {"level": "debug", "data": f"flood {i}"}}
        else:
            note = {"method": "notifications/resources/updated", "params": {"uri": f"flood://{i}"}}
        lines.append(json.dumps({"jsonrpc": "2.0", **note}))
    server.raw("\n".join(lines) + "\n")
    server.send(server.answer(ids[0], str(count)))


def _huge_stderr(server, ids):
    # 10 MB that the client must drain: a client that stopped reading stderr
    # would block this write (the pipe holds 64 KiB) and never get the answer.
    line = "e" * 1023 + "\n"
    for _ in range(10 * 1024):
        sys.stderr.write(line)
    sys.stderr.flush()
    server.send(server.answer(ids[0], "after 10 MB of stderr"))


def _unknown_request(server, ids):
    # The call is answered once the client answered the request (see `on_response`).
    server.waiting_on_request = ids[0]
    server.send({"jsonrpc": "2.0", "id": UNKNOWN_REQUEST_ID, "method": "mystery/ask", "params": {}})


def _result_and_error(server, ids):
    message = server.answer(ids[0], "and also an error")
    message["error"] = {"code": -32000, "message": "both result and error"}
    server.send(message)


# The `hostile` tool's outputSchema under --fault backtracking_pattern: its
# pattern backtracks on a long run of "x" with no "y". Python's `re` (which
# jsonschema uses) would take longer than the age of the universe on 3,000
# "x" (twice as long for each more "x": 2.5 s for 26), and the `regex`
# package, without a timeout, about two minutes.
BACKTRACKING_PATTERN = "(x+x+)+y"
BACKTRACKING_SCHEMA = {"type": "object", "properties": {"value": {"type": "string", "pattern": BACKTRACKING_PATTERN}},
                       "required": ["value"]}
BACKTRACKING_VALUE = "x" * 3000


def _backtracking_pattern(server, ids):
    message = server.answer(ids[0], "x * 3000")
    message["result"]["structuredContent"] = {"value": BACKTRACKING_VALUE}
    server.send(message)


FAULTS = {
    "garbage": _garbage,
    "not_an_object": _not_an_object,
    "oversize": _oversize,
    "death_mid_line": _death_mid_line,
    "death_mid_call": _death_mid_call,
    "hang": _hang,
    "wrong_id": _wrong_id,
    "duplicate_id": _duplicate_id,
    "deep_json": _deep_json,
    "flood": _flood,
    "huge_stderr": _huge_stderr,
    "unknown_request": _unknown_request,
    "result_and_error": _result_and_error,
    "backtracking_pattern": _backtracking_pattern,
}


class Server:
    def __init__(self, args):
        self.args = args
        self.stateless = {}  # request id -> did the request carry the 2026-07-28 version
        self.progress_tokens = {}
        self.held = []
        self.fired = False
        self.waiting_on_request = None
        self.record = open(args.record, "a") if args.record else None

    # -- writing -------------------------------------------------------------

    def raw(self, text):
        sys.stdout.write(text)
        sys.stdout.flush()

    def send(self, message):
        self.raw(json.dumps({"jsonrpc": "2.0", **message}) + "\n")

    def answer(self, request_id, text):
        result = {"content": [{"type": "text", "text": text}]}
        if self.stateless.get(request_id):
            result["resultType"] = "complete"
        return {"jsonrpc": "2.0", "id": request_id, "result": result}

    def die(self, why):
        sys.stderr.write(why + "\n")
        sys.stderr.flush()
        os._exit(3)

    # -- reading ---------------------------------------------------------------

    def serve(self):
        for line in sys.stdin:
            message = json.loads(line)
            if self.record:
                params = message.get("params") or {}
                self.record.write(json.dumps({"method": message.get("method"), "id": message.get("id"),
                                              "name": params.get("name"),
                                              "requestId": params.get("requestId")}) + "\n")
                self.record.flush()
            if "method" not in message:
                self.on_response(message)
            elif "id" in message:
                self.on_request(message)

    def on_response(self, message):
        if message.get("id") == UNKNOWN_REQUEST_ID and self.waiting_on_request is not None:
            call, self.waiting_on_request = self.waiting_on_request, None
            what = {k: message[k] for k in ("result", "error") if k in message}
            self.send(self.answer(call, json.dumps(what)))

    def on_request(self, message):
        method, request_id = message["method"], message["id"]
        params = message.get("params") or {}
        meta = params.get("_meta") or {}
        self.stateless[request_id] = meta.get("io.modelcontextprotocol/protocolVersion") == STATELESS
        if method == "server/discover":
            self.send({"id": request_id, "result": {
                "resultType": "complete", "supportedVersions": [STATELESS], "capabilities": {"tools": {}},
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "hostile", "version": "1"}}}})
        elif method == "initialize":
            self.send({"id": request_id, "result": {
                "protocolVersion": params.get("protocolVersion"), "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile", "version": "1"}}})
        elif method == "ping":
            self.send({"id": request_id, "result": {}})
        elif method == "tools/list":
            tools = [{"name": name, "inputSchema": {"type": "object"}} for name in ("echo", "hostile")]
            if self.args.fault == "backtracking_pattern":
                tools[1]["outputSchema"] = BACKTRACKING_SCHEMA
            result = {"tools": tools}
            if self.stateless[request_id]:
                result["resultType"] = "complete"
            self.send({"id": request_id, "result": result})
        elif method == "tools/call" and params.get("name") == "hostile":
            if "progressToken" in meta:
                self.progress_tokens[request_id] = meta["progressToken"]
            self.hostile(request_id)
        elif method == "tools/call":
            self.send(self.answer(request_id, str((params.get("arguments") or {}).get("text", ""))))
        else:
            self.send({"id": request_id, "error": {"code": -32601, "message": f"Method not found: {method}"}})

    def hostile(self, request_id):
        if self.fired:
            return  # the fault strikes once; later hostile calls are left unanswered
        self.held.append(request_id)
        if len(self.held) >= self.args.pending:
            self.fired = True
            FAULTS[self.args.fault](self, self.held)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fault", required=True, choices=sorted(FAULTS))
    parser.add_argument("--pending", type=int, default=1, help="hold hostile calls until this many arrived")
    parser.add_argument("--record", default=None, help="append what was received to this file")
    parser.add_argument("--size", type=int, default=1_000_000, help="oversize: the text's length")
    parser.add_argument("--count", type=int, default=20_000, help="flood: how many notifications")
    Server(parser.parse_args()).serve()


if __name__ == "__main__":
    main()
