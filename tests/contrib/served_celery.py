"""A Celery app using the integration, run as a worker by test_celery.py.

Its broker and result backend are the Redis server the test starts
(`MCP_TEST_REDIS`); its one MCP server, "demo", is the bundled demo server
over stdio, named by `${MCP_TEST_MARKER}` so the test can find every server
process it started. When a pool process ends, after the integration's own
receiver, it appends to `MCP_TEST_RECORD` its pid and the status of the
client its tasks used.
"""

from __future__ import annotations

import os
import sys
import threading

from celery import Celery, signals

from mcp_sync.contrib.celery import MCP

app = Celery("served_celery", broker=os.environ.get("MCP_TEST_REDIS", "redis://127.0.0.1:1/0"),
             backend=os.environ.get("MCP_TEST_REDIS", "redis://127.0.0.1:1/0"))
app.conf.update(
    mcp_servers={"demo": {"command": sys.executable,
                          "args": ["-m", "mcp_sync.testing.server", "--name", "${MCP_TEST_MARKER}"]}},
    mcp_client_options={"timeout": 30},
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
    result_expires=600,
)
mcp = MCP(app)  # connects its receivers first: they run before the one below
used = []  # the clients this process's tasks used (one, or none)


@signals.worker_process_shutdown.connect
def record_status(**_: object) -> None:
    record = os.environ.get("MCP_TEST_RECORD")
    if record:
        with open(record, "a") as out:
            out.write(f"{os.getpid()} {' '.join(client.status.value for client in used[:1]) or 'unused'}\n")


@app.task
def echo(token: str) -> dict[str, object]:
    """The token echoed by the process's shared client, with who answered."""
    client = mcp.client("demo")
    if not used:
        used.append(client)
    text = client.call_tool("echo", {"text": token}).text
    return {"text": text, "pid": os.getpid(), "thread": threading.get_ident(), "client": id(client)}
