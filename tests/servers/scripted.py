"""A tiny stdio MCP server whose (mis)behaviour is chosen on the command line.

Standard library only, so it starts fast. Used by the tests for the cases a
well-behaved server never produces: crashes, garbage, oversize lines,
silent probes, odd negotiation answers, broken pagination.

    python scripted.py [--mode MODE] [--versions V,V] [--stderr-lines N] ...
"""

import argparse
import json
import os
import sys
import threading
import time

from stdin_messages import received

STATELESS = "2026-07-28"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", default="normal")
    parser.add_argument("--versions", default="2026-07-28,2025-11-25,2025-06-18")
    parser.add_argument("--answer-version", default=None, help="protocolVersion to answer initialize with")
    parser.add_argument("--stderr-lines", type=int, default=0)
    parser.add_argument("--size", type=int, default=0)
    parser.add_argument("--record", default=None, help="append every received line to this file")
    parser.add_argument("--marker", default=None, help="exit-once: exit on the first call if this file is absent")
    parser.add_argument("--capabilities", default="tools",
                        help="the capabilities declared; with resources, resources/list lists one (no "
                             "templates); with prompts, prompts/list lists greet (prompts/get: -32601)")
    args = parser.parse_args()
    versions = args.versions.split(",")
    capabilities = {name: {} for name in args.capabilities.split(",") if name}
    out_lock = threading.Lock()
    state = {"initialized": False, "discover_count": 0}
    record = open(args.record, "a") if args.record else None

    for i in range(args.stderr_lines):
        sys.stderr.write(f"chatty line {i} " + "x" * 100 + "\n")
    sys.stderr.flush()

    def send(message):
        with out_lock:
            sys.stdout.write(json.dumps(message) + "\n")
            sys.stdout.flush()

    def result(request_id, body):
        send({"jsonrpc": "2.0", "id": request_id, "result": body})

    def error(request_id, code, message, data=None):
        err = {"code": code, "message": message}
        if data is not None:
            err["data"] = data
        send({"jsonrpc": "2.0", "id": request_id, "error": err})

    for message in received(record):
        method = message.get("method")
        request_id = message.get("id")
        if request_id is None:
            continue
        meta = (message.get("params") or {}).get("_meta") or {}
        version = meta.get("io.modelcontextprotocol/protocolVersion")
        mode = args.mode

        if mode == "swallow-then-exit" and state["discover_count"] and method != "server/discover":
            sys.stderr.write("Traceback (most recent call last):\nRuntimeError: request before initialization\n")
            sys.exit(1)

        if method == "server/discover":
            state["discover_count"] += 1
            if mode in ("silent-probe", "swallow-then-exit"):
                continue
            if mode == "discover-after-initialize":
                state["held_discover"] = request_id  # answered once initialize was refused
                continue
            if mode == "exit-on-probe":
                sys.stderr.write("unknown method, giving up\n")
                sys.exit(9)
            if mode == "reprobe" and version != "2026-07-28":
                error(request_id, -32022, "Unsupported protocol version",
                      {"supported": ["2026-07-28"], "requested": version})
                continue
            if mode == "unsupported-version":
                error(request_id, -32022, "Unsupported protocol version",
                      {"supported": ["2099-01-01"], "requested": version})
                continue
            stateless = [v for v in versions if v == STATELESS]
            if not stateless:
                error(request_id, -32601, "Method not found")
                continue
            result(request_id, {"resultType": "complete", "supportedVersions": stateless,
                                "capabilities": capabilities,
                                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "scripted", "version": "1"}}})
            continue
        if method == "subscriptions/listen":
            if mode == "listen-silent":
                continue
            if mode == "listen-end":
                result(request_id, {"resultType": "complete"})
                continue
            if mode == "listen-exit":
                sys.stderr.write("listen crashed\n")
                sys.stderr.flush()
                os._exit(4)
            error(request_id, -32601, "Method not found")
            continue
        if method == "initialize" and mode == "discover-after-initialize":
            # A server that takes requests concurrently: the cheap refusal
            # of initialize goes out before the probe's answer.
            error(request_id, -32600, "initialize is not a 2026-07-28 method")
            time.sleep(0.2)  # the probe's answer comes a moment later
            result(state["held_discover"], {"resultType": "complete", "supportedVersions": [STATELESS],
                                            "capabilities": capabilities})
            continue
        if method == "initialize":
            asked = message["params"]["protocolVersion"]
            answer = args.answer_version or (asked if asked in versions else versions[-1])
            state["initialized"] = True
            result(request_id, {"protocolVersion": answer, "capabilities": capabilities,
                                "serverInfo": {"name": "scripted", "version": "1"}})
            continue
        if method == "ping":
            result(request_id, {})
            continue
        if method == "tools/list":
            cursor = (message.get("params") or {}).get("cursor")
            if mode == "repeat-cursor":
                result(request_id, {"tools": [{"name": "t", "inputSchema": {"type": "object"}}], "nextCursor": "same"})
                continue
            if mode == "endless-pages":
                n = int(cursor or 0) + 1
                result(request_id, {"tools": [{"name": f"t{n}", "inputSchema": {"type": "object"}}], "nextCursor": str(n)})
                continue
            result(request_id, {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]})
            continue
        if method == "resources/list" and "resources" in capabilities:
            body = {"resources": [{"uri": "scripted://one", "name": "one", "description": "The only one."}]}
            if version:
                body["resultType"] = "complete"
            result(request_id, body)
            continue
        if method == "prompts/list" and "prompts" in capabilities:
            body = {"prompts": [{"name": "greet", "description": "Greet someone."}]}
            if version:
                body["resultType"] = "complete"
            result(request_id, body)
            continue
        if method == "tools/call" and mode == "unknown-tool-is-error-result" \
                and (message.get("params") or {}).get("name") != "echo":
            # How official-SDK servers refuse a tool they do not have.
            body = {"content": [{"type": "text", "text": f"Unknown tool: {message['params'].get('name')}"}],
                    "isError": True}
            if version:
                body["resultType"] = "complete"
            result(request_id, body)
            continue
        if method == "tools/call":
            params = message.get("params") or {}
            arguments = params.get("arguments") or {}
            if mode == "exit-once" and not os.path.exists(args.marker):
                open(args.marker, "w").close()
                sys.stderr.write("crashing once\n")
                sys.stderr.flush()
                os._exit(5)
            if mode == "exit-on-call":
                sys.stderr.write("fatal: something broke\n")
                sys.stderr.flush()
                os._exit(7)
            if mode == "close-stdout-on-call":
                sys.stdout.close()
                os.close(1)
                for _ in sys.stdin:
                    pass
                return
            if mode == "burst-on-call":
                # `n` progress notifications of `pad` bytes each and the
                # answer in one burst, more than one read takes, with a
                # line that is not JSON after the first `bad` if given.
                token = meta.get("progressToken")
                lines = [json.dumps({"jsonrpc": "2.0", "method": "notifications/progress", "params": {
                    "progressToken": token, "progress": i, "message": "x" * arguments.get("pad", 0)}})
                    for i in range(arguments["n"])]
                if "bad" in arguments:
                    lines.insert(arguments["bad"], "this is not json")
                lines.append(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": {
                    "content": [{"type": "text", "text": "done"}], "resultType": "complete"}}))
                with out_lock:
                    sys.stdout.write("\n".join(lines) + "\n")
                    sys.stdout.flush()
                continue
            if mode == "garbage-on-call":
                with out_lock:
                    sys.stdout.write("this is not json\n")
                    sys.stdout.flush()
                continue
            if mode == "oversize-on-call":
                with out_lock:
                    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": {
                        "content": [{"type": "text", "text": "x" * args.size}]}}) + "\n")
                    sys.stdout.flush()
                continue
            if mode == "unsupported-later":
                state.setdefault("calls", 0)
                state["calls"] += 1
                if state["calls"] == 1:
                    error(request_id, -32022, "Unsupported protocol version",
                          {"supported": ["2026-07-28"], "requested": version})
                    continue
            if mode == "unknown-result-type":
                result(request_id, {"resultType": "mystery", "content": []})
                continue
            if mode == "input-required":
                result(request_id, {"resultType": "input_required", "inputRequests": {
                    "r1": {"method": "elicitation/create", "params": {
                        "mode": "form", "message": "Your name?",
                        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}}}},
                    "requestState": "opaque-state"})
                continue
            if mode == "not-an-object":
                send({"jsonrpc": "2.0", "id": request_id, "result": [1, 2]})
                continue
            text = arguments.get("text", "")
            if "env" in arguments:
                text = json.dumps({"env": os.environ.get(arguments["env"]), "cwd": os.getcwd()})
            body = {"content": [{"type": "text", "text": text}]}
            if version:
                body["resultType"] = "complete"
            result(request_id, body)
            continue
        error(request_id, -32601, f"Method not found: {method}")


if __name__ == "__main__":
    main()
