"""A stdio MCP server (stateless era) that floods the client during a call.

Standard library only, so it starts fast and writes fast. Its one tool,
`flood`, sends `count` messages before it answers: progress for the call
(when the call asked for progress), log messages (`notifications/message`)
and notifications that belong to no call (`notifications/resources/updated`),
in the rotation given by `kinds`, each padded to about `pad` bytes. The
answer's text is the count sent, so the client can tell it got the answer
that came after the whole flood.

    python flood.py
    tools/call flood {"count": 200000, "kinds": ["progress", "notify", "log"], "pad": 300}
"""

import json
import sys

STATELESS = "2026-07-28"
BATCH = 2000  # lines per write: the flood is cheap to produce, so the client is what is measured


def flood_lines(token, count, kinds, pad):
    filler = "x" * pad
    for i in range(1, count + 1):
        kind = kinds[i % len(kinds)]
        if kind == "progress" and token is not None:
            yield json.dumps({"jsonrpc": "2.0", "method": "notifications/progress",
                              "params": {"progressToken": token, "progress": i, "total": count,
                                         "message": filler}})
        elif kind == "log":
            yield json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                              "params": {"level": "debug", "logger": "flood", "data": filler}})
        else:
            yield json.dumps({"jsonrpc": "2.0", "method": "notifications/resources/updated",
                              "params": {"uri": f"flood://{i}", "pad": filler}})


def main():
    out = sys.stdout

    def send(message):
        out.write(json.dumps(message) + "\n")
        out.flush()

    for line in sys.stdin:
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if request_id is None:
            continue
        params = message.get("params") or {}
        if method == "server/discover":
            send({"jsonrpc": "2.0", "id": request_id, "result": {
                "resultType": "complete", "supportedVersions": [STATELESS],
                "capabilities": {"tools": {}, "logging": {}},
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "flood", "version": "1"}}}})
        elif method == "tools/call" and params.get("name") == "flood":
            arguments = params.get("arguments") or {}
            count = int(arguments.get("count", 1000))
            kinds = list(arguments.get("kinds") or ["progress", "notify", "log"])
            token = (params.get("_meta") or {}).get("progressToken")
            batch = []
            for text in flood_lines(token, count, kinds, int(arguments.get("pad", 300))):
                batch.append(text)
                if len(batch) >= BATCH:
                    out.write("\n".join(batch) + "\n")
                    batch = []
            if batch:
                out.write("\n".join(batch) + "\n")
            send({"jsonrpc": "2.0", "id": request_id, "result": {
                "resultType": "complete", "content": [{"type": "text", "text": str(count)}]}})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": request_id, "result": {
                "resultType": "complete",
                "tools": [{"name": "flood", "inputSchema": {"type": "object"}}]}})
        else:
            send({"jsonrpc": "2.0", "id": request_id,
                  "error": {"code": -32601, "message": f"Method not found: {method}"}})


if __name__ == "__main__":
    main()
