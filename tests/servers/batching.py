"""A stdio server of revision 2025-03-26 that answers in JSON-RPC batches.

Standard library only. 2025-03-26 says implementations MUST support receiving
batches, so this server sends little else: its `initialize` answer is a batch
of one, and each tool's answer is a batch.

Tools (`tools/call` by name):

- `echo`: a progress notification (when a token came) and the response, in
  one batch.
- `echo4`: the same, held back until four answers wait, then all in one
  batch (each flush is recorded as `batch N`), so that concurrent callers
  get their responses in shared batches.
- `mixed`: one batch holding a `roots/list` request to the client, a
  `notifications/tools/list_changed`, a progress notification, a log message
  and the response. The client's answer to `roots/list` is recorded.
- `invalid`: a batch of the response and an item that is not JSON-RPC;
  `invalid-first`: the same, the invalid item first.
- `empty`: the line `[]`.
- `too-big`: a batch of 1001 notifications, then the response alone.
- `weather`: listed (`tools/list`) with an `outputSchema`, which 2025-03-26
  does not have, and answered with text content only, as a server of that
  revision would: the client must not check the output against it.

    python batching.py [--record FILE]
"""

import argparse
import json
import os
import sys
import threading

from stdin_messages import received

VERSION = "2025-03-26"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--record", default=None, help="append every received line to this file")
    args = parser.parse_args()
    out_lock = threading.Lock()
    record = open(args.record, "a") if args.record else None
    waiting = []  # items of held-back echo4 answers

    def write(value):
        with out_lock:
            sys.stdout.write(json.dumps(value) + "\n")
            sys.stdout.flush()

    def hold(items):
        waiting.extend(items)
        answers = sum(1 for item in waiting if "result" in item)
        if answers >= 4:
            if record:
                record.write(f"{os.getpid()} batch {answers}\n")
                record.flush()
            batch, waiting[:] = list(waiting), []
            write(batch)

    def progress(token, value):
        return {"jsonrpc": "2.0", "method": "notifications/progress",
                "params": {"progressToken": token, "progress": value, "total": 1}}

    for message in received(record):
        method = message.get("method")
        request_id = message.get("id")
        params = message.get("params") or {}
        if request_id is None or method is None:
            continue  # notifications and the client's answers: recorded only

        def result(body, request_id=request_id):
            return {"jsonrpc": "2.0", "id": request_id, "result": body}

        if method == "initialize":
            write([result({"protocolVersion": VERSION, "capabilities": {"tools": {}, "logging": {}},
                           "serverInfo": {"name": "batching", "version": "1"}})])
            continue
        if method == "tools/list":
            write([result({"tools": [{
                "name": "weather", "inputSchema": {"type": "object"},
                "outputSchema": {"type": "object", "properties": {"t": {"type": "number"}}, "required": ["t"]},
            }]})])
            continue
        if method != "tools/call":
            write([{"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "no such method"}}])
            continue
        name = params.get("name")
        token = (params.get("_meta") or {}).get("progressToken")
        text = (params.get("arguments") or {}).get("text", "")
        answer = result({"content": [{"type": "text", "text": text}]})
        if name == "echo":
            write(([progress(token, 1)] if token is not None else []) + [answer])
        elif name == "echo4":
            hold(([progress(token, 1)] if token is not None else []) + [answer])
        elif name == "mixed":
            write([
                {"jsonrpc": "2.0", "id": "s-1", "method": "roots/list"},
                {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"},
                progress(token, 1),
                {"jsonrpc": "2.0", "method": "notifications/message",
                 "params": {"level": "info", "data": "in a batch"}},
                answer,
            ])
        elif name == "invalid":
            write([answer, {"neither": "request nor response"}])
        elif name == "invalid-first":
            write([{"neither": "request nor response"}, answer])
        elif name == "empty":
            write([])
        elif name == "weather":
            write([result({"content": [{"type": "text", "text": "sunny"}]})])
        elif name == "too-big":
            write([{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}] * 1001)
            write(answer)
        else:
            write(result({"content": [{"type": "text", "text": f"unknown tool {name}"}], "isError": True}))


if __name__ == "__main__":
    main()
