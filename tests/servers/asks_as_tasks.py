"""A stdio server of protocol 2025-11-25 that asks the client its questions
as tasks (the client as task receiver): a tool plays a script of server
requests and returns what the client answered.

Standard library only. Tools:

- `script` (`steps`: a list) plays each step in turn and returns the
  outcome of each, as JSON text (a list, one item a step):
  - `{"send": [{"method", "params"}, ...]}` sends the requests at once,
    each related to nothing (a stdio stream cannot say), and waits for
    every answer: the step's outcome is the list of responses, each
    `{"result": ...}` or `{"error": ...}`. `"wait": false` leaves them
    unanswered for a later `{"collect": true}` step, which waits for them;
  - `{"poll": "$task1"}` sends `tasks/get` every 20 ms until the task is
    `completed`, `failed` or `cancelled` (10 s at most): the outcome is
    the statuses seen, each once;
  - `{"log": "text"}` sends `notifications/message` with that text.
  In any params, the string "$taskN" stands for the id of the N-th task
  the client created in this session (from its `CreateTaskResult`s).
- `capabilities` returns the client's `initialize` capabilities as JSON.

    python asks_as_tasks.py [--record FILE]
"""

import argparse
import itertools
import json
import re
import sys
import threading
import time

from stdin_messages import received

TOOLS = [
    {"name": "script", "inputSchema": {"type": "object", "properties": {"steps": {"type": "array"}}}},
    {"name": "capabilities", "inputSchema": {"type": "object"}},
]
TERMINAL = ("completed", "failed", "cancelled")
ANSWER_WITHIN = 20.0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--record", default=None)
    args = parser.parse_args()
    record = open(args.record, "a") if args.record else None
    out_lock = threading.Lock()
    lock = threading.Lock()
    waiting = {}  # our request id -> [Event, response]
    task_ids = []  # the client's tasks, in the order it created them
    ids = itertools.count(1)
    declared = {}

    def send(message):
        with out_lock:
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
            sys.stdout.flush()

    def fill(value):
        if isinstance(value, str):
            found = re.fullmatch(r"\$task(\d+)", value)
            if found:
                with lock:
                    return task_ids[int(found.group(1)) - 1]
            return value
        if isinstance(value, list):
            return [fill(item) for item in value]
        if isinstance(value, dict):
            return {key: fill(item) for key, item in value.items()}
        return value

    def ask(method, params):
        request_id = f"s-{next(ids)}"
        entry = [threading.Event(), None]
        with lock:
            waiting[request_id] = entry
        message = {"id": request_id, "method": method}
        if params is not None:
            message["params"] = fill(params)
        send(message)
        return request_id, entry

    def outcome(entry):
        if not entry[0].wait(ANSWER_WITHIN):
            return {"error": {"code": 0, "message": "no answer from the client"}}
        response = entry[1]
        result = response.get("result")
        if isinstance(result, dict) and isinstance(result.get("task"), dict):
            with lock:
                task_ids.append(result["task"]["taskId"])
        return {"error": response["error"]} if "error" in response else {"result": result}

    def play(steps):
        outcomes, unanswered = [], []
        for step in steps:
            if "send" in step:
                sent = [ask(request["method"], request.get("params"))[1] for request in step["send"]]
                if step.get("wait", True):
                    outcomes.append([outcome(entry) for entry in sent])
                else:
                    unanswered.extend(sent)
                    outcomes.append("sent")
            elif step.get("collect"):
                outcomes.append([outcome(entry) for entry in unanswered])
                unanswered = []
            elif "poll" in step:
                seen, deadline = [], time.monotonic() + 10
                while time.monotonic() < deadline:
                    answer = outcome(ask("tasks/get", {"taskId": step["poll"]})[1])
                    status = answer.get("result", {}).get("status", json.dumps(answer))
                    if not seen or seen[-1] != status:
                        seen.append(status)
                    if status not in ("working", "input_required"):
                        break
                    time.sleep(0.02)  # the server's polling interval, not a test waiting
                outcomes.append(seen)
            elif "log" in step:
                send({"method": "notifications/message", "params": {"level": "info", "data": step["log"]}})
                outcomes.append("logged")
        return outcomes

    def call(request_id, params):
        name = params.get("name")
        if name == "capabilities":
            text = json.dumps(declared)
        else:
            text = json.dumps(play((params.get("arguments") or {}).get("steps", [])))
        send({"id": request_id, "result": {"content": [{"type": "text", "text": text}]}})

    for message in received(record):
        method, request_id, params = message.get("method"), message.get("id"), message.get("params") or {}
        if method is None:  # the client's answer to one of our requests
            with lock:
                entry = waiting.pop(request_id, None)
            if entry is not None:
                entry[1] = message
                entry[0].set()
            continue
        if request_id is None:
            continue
        if method == "initialize":
            declared.update(params.get("capabilities") or {})
            send({"id": request_id, "result": {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                                               "serverInfo": {"name": "asks-as-tasks", "version": "1"}}})
        elif method == "tools/list":
            send({"id": request_id, "result": {"tools": TOOLS}})
        elif method == "tools/call":
            threading.Thread(target=call, args=(request_id, params), daemon=True).start()
        elif method == "ping":
            send({"id": request_id, "result": {}})
        else:
            send({"id": request_id, "error": {"code": -32601, "message": f"no method {method}"}})


if __name__ == "__main__":
    main()
