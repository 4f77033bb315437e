"""Display, stderr and progress in a real Jupyter kernel (IPC sockets, no TCP port)."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import nbformat
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent

CELLS = [
    f"""
import sys
import mcp_sync
chatty = "import sys\\nfor i in range(150): print('boot', i, file=sys.stderr)\\nsys.stderr.flush()\\n" \\
         "import runpy; runpy.run_module('mcp_sync.testing', run_name='__main__')\\n"
client = mcp_sync.connect(mcp_sync.Stdio({sys.executable!r}, ["-c", chatty]))
client.call_tool("echo", {{"text": "hi"}}).text
""",
    "next(t for t in client.list_tools() if t.name == 'weather')",
    "client.call_tool('fail', {'message': '<script>alert(1)</script>'})",
    "from mcp_sync.display import table\ntable(client.list_prompts())",
    "client.call_tool('countdown', {'steps': 3, 'delay': 0}, progress=mcp_sync.progress_bar()).text",
    "client.close()",
]


def outputs(cell: nbformat.NotebookNode) -> tuple[str, str, str]:
    """A cell's stderr text, its text/html and its text/plain."""
    err, rich, plain = [], [], []
    for output in cell.get("outputs", []):
        if output["output_type"] == "stream" and output["name"] == "stderr":
            err.append(output["text"])
        elif output["output_type"] in ("display_data", "execute_result"):
            rich.append(output["data"].get("text/html", ""))
            plain.append(output["data"].get("text/plain", ""))
        elif output["output_type"] == "error":
            raise AssertionError(f"{output['ename']}: {output['evalue']}")
    return "".join(err), "".join(rich), "".join(plain)


def test_in_a_kernel(tmp_path: Path) -> None:
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code) for code in CELLS])
    threads_before = set(threading.enumerate())
    kernel = KernelManager(kernel_name="python3", transport="ipc", ip=str(tmp_path / "kernel"))
    try:
        runner = NotebookClient(notebook, km=kernel, timeout=30, resources={"metadata": {"path": str(ROOT)}})
        runner.execute(cleanup_kc=True)
    finally:
        if kernel.has_kernel:
            kernel.shutdown_kernel(now=False)
    left = [t for t in set(threading.enumerate()) - threads_before if not t.name.endswith(" - runner")]
    assert not left, f"threads left running: {left}"
    connect, tool, error, prompts, progress, close = (outputs(cell) for cell in notebook.cells)

    # The kernel's default: stderr printed in the cell, at a limited rate, the rest summarised.
    # (Lines still being forwarded as the cell ends show in the next cell's output.)
    shown = [line for cell in (connect, tool, error, prompts, progress, close)
             for line in cell[0].splitlines() if " boot " in line]
    assert 100 <= len(shown) < 150 and shown[0].endswith("] boot 0") and " boot " in connect[0]
    assert "more server stderr than 20 lines a second: the rest is counted, not shown" in connect[0]
    # The count of lines not shown comes before the next line shown (when a
    # token came back meanwhile) and, for the last ones, when the pipe ends:
    # here, as the client closes. Together they count every line not shown.
    def counts(text: str) -> list[int]:
        return [int(line.split("\u2026 ")[1].split()[0]) for line in text.splitlines()
                if "of server stderr not shown" in line]
    assert len(counts(close[0])) == 1
    assert sum(n for cell in (connect, tool, error, prompts, progress, close) for n in counts(cell[0])) \
        == 150 - len(shown)
    assert connect[2] == "'hi'"

    assert "<th>parameter</th>" in tool[1] and "<code>city</code>" in tool[1]
    assert tool[2].startswith("Tool weather: Current weather")
    assert 'class="mcp-sync-error"' in error[1] and "&lt;script&gt;" in error[1] and "<script>" not in error[1]
    assert "<th>arguments</th>" in prompts[1] and "greet" in prompts[1]
    # tqdm is not installed here: the plain bar, drawn in the cell and ended with a line break.
    assert progress[0].count("\r") >= 1 and progress[0].endswith("3/3 100% step 3/3\n")
    assert progress[2] == "'liftoff'"
    assert close[1:] == ("", "")
