"""The notebook recipe (examples/notebook.ipynb), executed cell by cell in a real kernel."""

from __future__ import annotations

import threading
from pathlib import Path

import nbformat
import pytest
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

from .harness import EXAMPLES, stdio_command, wait_until_gone


def outputs_of(cell: nbformat.NotebookNode) -> str:
    texts = []
    for output in cell.get("outputs", []):
        if output["output_type"] == "stream":
            texts.append(output["text"])
        elif output["output_type"] in ("display_data", "execute_result"):
            data = output["data"]
            texts.append(data.get("text/markdown") or data.get("text/plain", ""))
        elif output["output_type"] == "error":
            texts.append(f"ERROR {output['ename']}: {output['evalue']}")
    return "".join(texts)


def test_notebook_runs(marker: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MCP_SERVER", stdio_command(marker))  # the kernel inherits it
    notebook = nbformat.read(EXAMPLES / "notebook.ipynb", as_version=4)
    threads_before = set(threading.enumerate())
    # IPC sockets in a temporary folder: the kernel opens no TCP port at all.
    kernel = KernelManager(kernel_name="python3", transport="ipc", ip=str(tmp_path / "kernel"))
    try:
        runner = NotebookClient(notebook, km=kernel, timeout=30, resources={"metadata": {"path": str(EXAMPLES)}})
        runner.execute(cleanup_kc=True)  # shut the kernel down and stop its channels at the end
    finally:
        if kernel.has_kernel:  # only if execute() failed before its own cleanup
            kernel.shutdown_kernel(now=False)
    assert not kernel.has_kernel, "the kernel was not shut down"
    # jupyter_core keeps one event-loop thread per process for its sync wrappers, by design.
    left = [t for t in set(threading.enumerate()) - threads_before if not t.name.endswith(" - runner")]
    assert not left, f"threads left running: {left}"
    code = [outputs_of(cell) for cell in notebook.cells if cell.cell_type == "code"]
    connect, tools, progress, asked, answered, result, table, close = code
    assert connect.split() == [marker, "2026-07-28"]
    assert "countdown" in tools and "book_table" in tools and "Parameters" not in connect
    # The bar was drawn in the cell that made the call, up to its end.
    assert progress.count("\r[") >= 2 and "[" + "#" * 24 + "] 10/10 100% step 10/10" in progress
    assert progress.rstrip().endswith("liftoff")
    assert asked.splitlines() == [
        "input-1 Booking a table for saturday: how many guests, and under which name?",
        "  fields: ['guests', 'name']",
    ]
    assert answered.strip() == "Booked for 2 under Grace"
    assert "windy" in result and "Oslo" in result  # the result's display
    assert "| Oslo | 23.0 | windy |" in table and table.count("\n| ") == 4
    assert close == ""
    print("RECIPE notebook: 8 code cells ran; 1 elicitation answered by hand")
    assert wait_until_gone(marker) == {}, "the notebook's server process outlived it"
