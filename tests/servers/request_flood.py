"""An initialize-era stdio server that floods the client with requests.

    python request_flood.py

Standard library only. Its tool `flood` answers at once ("started"), then
writes `count` requests of `method` (`roots/list` unless given; ids "f0",
"f1", ...) to the client in
one write, while no call of the client waits. Its tool `answers` answers
once every flooded request has had an answer, or after `seconds` have
passed without the last one, with JSON: how many distinct ids were
answered, how many results and errors, the error messages, and how many
answers came twice or for ids it never sent. The reading loop never stops
while the flood is written (a thread writes it), as a server must read its
answers while it waits for them.
"""

import json
import sys
import threading

LATEST = "2025-11-25"

out_lock = threading.Lock()
state_lock = threading.Lock()
state = {"sent": set(), "answered": {}, "duplicates": 0, "strangers": 0, "waiting": None, "timer": None}


def send(message):
    with out_lock:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def text(request_id, value):
    send({"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": value}]}})


def report():
    """The JSON the `answers` tool answers with (under `state_lock`)."""
    answered = state["answered"]
    errors = [a["error"].get("message") for a in answered.values() if "error" in a]
    return json.dumps({"sent": len(state["sent"]), "answered": len(answered),
                       "results": sum(1 for a in answered.values() if "result" in a),
                       "errors": len(errors), "messages": sorted(set(errors)),
                       "duplicates": state["duplicates"], "strangers": state["strangers"]})


def finish():
    """Answer the waiting `answers` call, if any (under `state_lock`)."""
    waiting, state["waiting"] = state["waiting"], None
    if state["timer"] is not None:
        state["timer"].cancel()
        state["timer"] = None
    if waiting is not None:
        text(waiting, report())


def flood(count, method):
    ids = [f"f{i}" for i in range(count)]
    with state_lock:
        state["sent"].update(ids)
    lines = "".join(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method}) + "\n"
                    for request_id in ids)
    with out_lock:
        sys.stdout.write(lines)
        sys.stdout.flush()


def main():
    for line in sys.stdin:
        message = json.loads(line)
        if "method" not in message:  # an answer to one of ours
            with state_lock:
                request_id = message.get("id")
                if request_id not in state["sent"]:
                    state["strangers"] += 1
                elif request_id in state["answered"]:
                    state["duplicates"] += 1
                else:
                    state["answered"][request_id] = message
                if len(state["answered"]) == len(state["sent"]):
                    finish()
            continue
        request_id, method = message.get("id"), message["method"]
        if request_id is None:
            continue
        params = message.get("params") or {}
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": request_id, "result": {
                "protocolVersion": params.get("protocolVersion", LATEST), "capabilities": {"tools": {}},
                "serverInfo": {"name": "request-flood", "version": "1"}}})
        elif method == "tools/call" and params.get("name") == "flood":
            count = int((params.get("arguments") or {}).get("count", 3000))
            method = (params.get("arguments") or {}).get("method", "roots/list")
            text(request_id, "started")
            threading.Thread(target=flood, args=(count, method), daemon=True).start()
        elif method == "tools/call" and params.get("name") == "answers":
            seconds = float((params.get("arguments") or {}).get("seconds", 10))
            with state_lock:
                state["waiting"] = request_id
                if len(state["answered"]) == len(state["sent"]):
                    finish()
                else:
                    # The bound for a client that lost answers: the report
                    # then says how many came.
                    state["timer"] = threading.Timer(seconds, lambda: _expire())
                    state["timer"].daemon = True
                    state["timer"].start()
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": request_id, "result": {}})
        else:
            send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "Method not found"}})


def _expire():
    with state_lock:
        finish()


if __name__ == "__main__":
    main()
