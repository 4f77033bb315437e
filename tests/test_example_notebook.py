"""examples/notebook.ipynb is committed with its outputs, and they are what it gives today.

A reader (on GitHub, say) sees the outputs without running anything, so
they must not go stale: this test executes the notebook afresh against the
demo server over stdio, in a real kernel (IPC sockets, no TCP port, as in
test_notebook_kernel.py), and compares every code cell's outputs with the
committed ones.

What is compared, after `normalised()`:

- stream text, per stream (stdout, stderr): the two arrive on separate
  channels, so how a cell's stdout and stderr lines interleave is timing,
  not content; within a stream, a line redrawn with carriage returns counts
  by what it finally shows, and of a run of progress-bar lines only the first
  and the last count: the bar draws at most so often by the clock (a
  redrawn frame on a terminal, a new line elsewhere; the first update and
  the last always show), so how many come between is timing too; trailing
  spaces (a frame's padding) do not count;
- text/plain, text/markdown and text/html exactly: nothing in them is
  volatile (no timings, pids, ports or addresses; an image is a data URI of
  the server's fixed bytes);
- errors: there must be none.

Execution counts and timings are not compared (the notebook is saved
without timing metadata). To refresh the committed outputs after changing
the notebook or how results display, run from the repository root:

    python -m tests.test_example_notebook
"""

from __future__ import annotations

import copy
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

import nbformat
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parent.parent / "examples" / "notebook.ipynb"
COMPARED = ("text/plain", "text/markdown", "text/html")
#: A line of the plain progress bar (`mcp_sync.progress_bar(plain=True)`).
BAR = re.compile(r"\[[#.]+\] \d+/\d+ ")


def execute(notebook: nbformat.NotebookNode, folder: Path) -> nbformat.NotebookNode:
    """A copy of `notebook` with every code cell run afresh, outputs normalised."""
    ran = copy.deepcopy(notebook)
    for cell in ran.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    # MCP_SERVER picks another server (tests/examples runs it that way); the
    # committed outputs are the demo server's.
    env = {key: value for key, value in os.environ.items() if key != "MCP_SERVER"}
    kernel = KernelManager(kernel_name="python3", transport="ipc", ip=str(folder / "kernel"))
    try:
        runner = NotebookClient(ran, km=kernel, timeout=30, record_timing=False,
                                resources={"metadata": {"path": str(NOTEBOOK.parent)}})
        runner.execute(cleanup_kc=True, env=env)
    finally:
        if kernel.has_kernel:  # only if execute() failed before its own cleanup
            kernel.shutdown_kernel(now=False)
    ran.metadata = copy.deepcopy(notebook.metadata)  # not the kernel's exact Python version
    for cell in ran.cells:
        if cell.cell_type == "code":
            cell.outputs = normalised(cell.outputs)
    return ran


def normalised(outputs: list[Any]) -> list[Any]:
    """The outputs with each stream's text in one output, every redrawn line as it ended."""
    kept: list[Any] = []
    streams: dict[str, Any] = {}
    for output in outputs:
        if output["output_type"] == "stream":
            if output["name"] in streams:
                streams[output["name"]]["text"] += output["text"]
                continue
            output = copy.deepcopy(output)
            streams[output["name"]] = output
        kept.append(output)
    for output in streams.values():
        lines = [line.rsplit("\r", 1)[-1].rstrip() for line in output["text"].split("\n")]
        # Of each run of bar lines, the first and the last.
        lines = [line for i, line in enumerate(lines)
                 if not (0 < i < len(lines) - 1 and all(BAR.match(near) for near in lines[i - 1:i + 2]))]
        output["text"] = "\n".join(lines)
    return kept


def shown(cell: nbformat.NotebookNode) -> dict[str, Any]:
    """What a code cell shows, in the terms the module docstring gives."""
    errors = [f"{o['ename']}: {o['evalue']}" for o in cell.outputs if o["output_type"] == "error"]
    return {
        "streams": {o["name"]: o["text"] for o in cell.outputs if o["output_type"] == "stream"},
        "data": [{kind: o["data"][kind] for kind in COMPARED if kind in o["data"]}
                 for o in cell.outputs if o["output_type"] in ("display_data", "execute_result")],
        "errors": errors,
    }


def test_every_code_cell_was_saved_with_its_outputs() -> None:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    # The last cell closes the client and shows nothing; every other one shows something.
    *showing, close = code
    assert close.source.strip() == "client.close()" and close.outputs == []
    for cell in showing:
        assert cell.outputs, f"no outputs saved for:\n{cell.source}"
        assert not shown(cell)["errors"], shown(cell)["errors"]
        assert cell.execution_count is not None
    assert [cell.execution_count for cell in code] == list(range(1, len(code) + 1))
    assert all("execution" not in cell.metadata for cell in code), "timings saved"
    # The display is the rich one: tables, the logo as an image, the structured content once.
    html = "".join(o["data"].get("text/html", "") for cell in code for o in cell.outputs if "data" in o)
    assert "<th>parameters</th>" in html and "* required parameter" in html
    assert '<img src="data:image/png;base64,iVBOR' in html and 'alt="demo://logo.png"' in html
    assert html.count("&quot;conditions&quot;: &quot;windy&quot;") == 1


def test_running_it_again_gives_the_saved_outputs(tmp_path: Path) -> None:
    committed = nbformat.read(NOTEBOOK, as_version=4)
    fresh = execute(committed, tmp_path)
    pairs = [(old, new) for old, new in zip(committed.cells, fresh.cells) if old.cell_type == "code"]
    for old, new in pairs:
        assert shown(new) == shown(old), f"the saved outputs are stale for:\n{old.source}"


def write() -> None:
    """Run the notebook and save it with its outputs (see the module docstring)."""
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    with tempfile.TemporaryDirectory() as folder:
        ran = execute(notebook, Path(folder))
    errors = [error for cell in ran.cells if cell.cell_type == "code" for error in shown(cell)["errors"]]
    if errors:
        sys.exit(f"not saved: {errors}")
    nbformat.write(ran, NOTEBOOK)


if __name__ == "__main__":
    write()
