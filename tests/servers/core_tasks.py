"""A stdio server of protocol 2025-11-25 with tasks in its core protocol, for
the cases the reference server does not produce: a task that fails, status
notifications, and servers that offer no tasks or no `tasks/list`.

Standard library only. Tools: `work` (`taskSupport: "optional"`; arguments
`outcome`: "ok", "tool-error" (an `isError` result) or "rpc-error" (the
task fails with a JSON-RPC error), and `until`: "now", "released" (the task
ends when the client calls the `release` tool) or "input" (the same, the
task `input_required` meanwhile)), `release`, and `must` (`taskSupport:
"required"`: a call without `params.task` gets -32601).

    python core_tasks.py [--no-tasks] [--no-list] [--notify] [--eager-error]
                         [--end-after-error] [--slow-create SECONDS] [--record FILE]

`--eager-error` answers a `tasks/result` for a task still running with an
error at once, instead of holding it until the task ends; with
`--end-after-error` the task completes right after that error is sent (the
error was true when sent, stale when read); `--slow-create`
waits before answering a task-augmented `tools/call`.

`--notify` sends `notifications/tasks/status` on every change, and then
suggests polling once an hour (else every 50 ms), so a waiter that finishes
promptly heard the notification rather than polled.
"""

import argparse
import json
import sys
import threading
import time

from stdin_messages import received

RELATED = "io.modelcontextprotocol/related-task"
TOOLS = [
    {"name": "work", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "optional"}},
    {"name": "release", "inputSchema": {"type": "object"}},
    {"name": "must", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "required"}},
]
STAMP = "2025-11-25T10:30:00Z"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--no-tasks", action="store_true")
    parser.add_argument("--no-list", action="store_true")
    parser.add_argument("--notify", action="store_true")
    parser.add_argument("--eager-error", action="store_true")
    parser.add_argument("--end-after-error", action="store_true")
    parser.add_argument("--slow-create", type=float, default=0.0)
    parser.add_argument("--record", default=None)
    args = parser.parse_args()
    record = open(args.record, "a") if args.record else None
    lock = threading.Condition()
    out_lock = threading.Lock()
    tasks = {}  # id -> {"state": {...}, "outcome": ("result"|"error", value) or None, "until": str}
    waiting_results = []  # (request id, task id) of tasks/result calls not answered yet

    def send(message):
        with out_lock:
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
            sys.stdout.flush()

    def answer_results():
        """Answer each waiting tasks/result whose task ended. Called with `lock` held."""
        for request_id, task_id in list(waiting_results):
            task = tasks[task_id]
            if task["outcome"] is None:
                continue
            waiting_results.remove((request_id, task_id))
            kind, value = task["outcome"]
            if kind == "result":
                send({"id": request_id, "result": {**value, "_meta": {RELATED: {"taskId": task_id}}}})
            else:
                send({"id": request_id, "error": value})

    def finish(task_id, status, outcome):
        with lock:
            task = tasks[task_id]
            if task["state"]["status"] in ("completed", "failed", "cancelled"):
                return
            task["state"].update(status=status, lastUpdatedAt=STAMP)
            task["outcome"] = outcome
            if args.notify:
                send({"method": "notifications/tasks/status", "params": dict(task["state"])})
            answer_results()

    def run(task_id, arguments):
        outcome = arguments.get("outcome", "ok")
        if outcome == "ok":
            finish(task_id, "completed", ("result", {"content": [{"type": "text", "text": f"done {task_id}"}]}))
        elif outcome == "tool-error":
            finish(task_id, "failed", ("result", {"content": [{"type": "text", "text": "it broke"}],
                                                  "isError": True}))
        else:
            finish(task_id, "failed", ("error", {"code": -32603, "message": "the work failed"}))

    capabilities = {"tools": {}}
    if not args.no_tasks:
        capabilities["tasks"] = {"cancel": {}, "requests": {"tools": {"call": {}}}}
        if not args.no_list:
            capabilities["tasks"]["list"] = {}

    for message in received(record):
        method, request_id, params = message.get("method"), message.get("id"), message.get("params") or {}
        if request_id is None:
            continue
        if method == "initialize":
            send({"id": request_id, "result": {"protocolVersion": "2025-11-25", "capabilities": capabilities,
                                               "serverInfo": {"name": "core-tasks", "version": "1"}}})
        elif method == "tools/list":
            send({"id": request_id, "result": {"tools": TOOLS}})
        elif method == "tools/call" and params.get("name") == "release":
            with lock:
                held = [task_id for task_id, task in tasks.items()
                        if task["until"] in ("released", "input") and task["outcome"] is None]
                for task_id in held:
                    tasks[task_id]["until"] = "now"
            for task_id in held:
                run(task_id, tasks[task_id]["arguments"])
            send({"id": request_id, "result": {"content": [{"type": "text", "text": f"released {len(held)}"}]}})
        elif method == "tools/call":
            arguments = params.get("arguments") or {}
            if "task" not in params or args.no_tasks:
                if params.get("name") == "must":
                    send({"id": request_id, "error": {"code": -32601, "message": "must requires a task"}})
                else:
                    send({"id": request_id, "result": {"content": [{"type": "text", "text": "at once"}]}})
                continue
            if args.slow_create:
                time.sleep(args.slow_create)  # the server being slow, not the test waiting
            with lock:
                task_id = f"task-{len(tasks) + 1}"
                status = "input_required" if arguments.get("until") == "input" else "working"
                state = {"taskId": task_id, "status": status, "createdAt": STAMP, "lastUpdatedAt": STAMP,
                         "ttl": 60000, "pollInterval": 3600000 if args.notify else 50}
                tasks[task_id] = {"state": state, "outcome": None, "arguments": arguments,
                                  "until": arguments.get("until", "now")}
            send({"id": request_id, "result": {"task": dict(state)}})
            if tasks[task_id]["until"] == "now":
                run(task_id, arguments)
        elif method in ("tasks/get", "tasks/result", "tasks/cancel"):
            with lock:
                task = tasks.get(params.get("taskId"))
                if task is None:
                    send({"id": request_id, "error": {"code": -32602, "message": "no such task"}})
                elif method == "tasks/get":
                    send({"id": request_id, "result": dict(task["state"])})
                elif method == "tasks/result" and args.eager_error and task["outcome"] is None:
                    send({"id": request_id, "error": {"code": -32603, "message": "not finished yet"}})
                    if args.end_after_error:
                        task["until"] = "now"
                        run(params["taskId"], task["arguments"])  # `lock` is reentrant
                elif method == "tasks/result":
                    waiting_results.append((request_id, params["taskId"]))
                    answer_results()
                elif task["state"]["status"] in ("completed", "failed", "cancelled"):
                    send({"id": request_id, "error": {"code": -32602, "message": "the task already ended"}})
                else:
                    task["state"].update(status="cancelled", statusMessage="cancelled by the client")
                    task["outcome"] = ("error", {"code": -32603, "message": "cancelled"})
                    send({"id": request_id, "result": dict(task["state"])})
                    answer_results()
        elif method == "tasks/list" and not args.no_list and not args.no_tasks:
            with lock:
                send({"id": request_id, "result": {"tasks": [dict(t["state"]) for t in tasks.values()]}})
        else:
            send({"id": request_id, "error": {"code": -32601, "message": f"no method {method}"}})


if __name__ == "__main__":
    main()
