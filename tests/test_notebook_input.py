"""A person answering a server's question in a real Jupyter kernel: the
ready-made `console_form` asks through the kernel's `input()`, whose
`input_request` the front end (here, this test) answers, for an
initialize-era stdio server whose elicitation names no call."""

from __future__ import annotations

import queue
import sys
import time
from pathlib import Path

from jupyter_client.manager import KernelManager

ROOT = Path(__file__).resolve().parent.parent

CODE = f"""
import sys, threading
import mcp_sync
from mcp_sync.handlers import console_form

form = console_form()

def recorded(params):
    print("asked on", threading.current_thread().name)
    return form(params)

client = mcp_sync.connect([{sys.executable!r}, "-m", "mcp_sync.testing"], protocol="2025-11-25",
                          input_handlers={{"form": recorded}})
try:
    print(client.call_tool("book_table", {{"date": "sunday"}}).text)
finally:
    client.close()
"""

ANSWERS = {"guests": "3", "name": "Ada"}


def test_console_form_answers_through_the_kernels_input(tmp_path: Path) -> None:
    kernel = KernelManager(kernel_name="python3", transport="ipc", ip=str(tmp_path / "kernel"))
    kernel.start_kernel(cwd=str(ROOT))
    kc = kernel.client()
    kc.start_channels()
    prompts: list[str] = []
    try:
        kc.wait_for_ready(timeout=60)
        msg_id = kc.execute(CODE, allow_stdin=True)
        deadline = time.monotonic() + 60
        reply = None
        while reply is None:
            assert time.monotonic() < deadline, f"no reply; prompts so far: {prompts}"
            try:
                request = kc.get_stdin_msg(timeout=0.05)
            except queue.Empty:
                pass
            else:
                prompt = request["content"]["prompt"]
                prompts.append(prompt)
                kc.input(next(answer for field, answer in ANSWERS.items() if field in prompt.lower()))
            try:
                message = kc.get_shell_msg(timeout=0.05)
            except queue.Empty:
                continue
            if message["parent_header"].get("msg_id") == msg_id:
                reply = message
        assert reply["content"]["status"] == "ok", reply["content"]
        stdout = []
        while True:
            message = kc.get_iopub_msg(timeout=10)
            if message["parent_header"].get("msg_id") != msg_id:
                continue
            if message["msg_type"] == "stream" and message["content"]["name"] == "stdout":
                stdout.append(message["content"]["text"])
            if message["msg_type"] == "status" and message["content"]["execution_state"] == "idle":
                break
    finally:
        kc.stop_channels()
        kernel.shutdown_kernel(now=True)
    text = "".join(stdout)
    assert len(prompts) == 2 and "guests" in prompts[0].lower() and "name" in prompts[1].lower()
    # One call waiting: the handler ran on the cell's own thread, and the
    # answers typed into the front end reached the server.
    assert "asked on MainThread" in text
    assert "Booked for 3 under Ada" in text
