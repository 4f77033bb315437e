"""What the tests of the benchmark suite share: its server script, a
JSON-RPC request line for it, and a run of the suite (`python -m benchmarks`)
that writes its results as JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "benchmarks" / "server.py"
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}


def request(request_id: int, method: str, params: dict[str, Any] | None = None) -> bytes:
    """One JSON-RPC request, encoded, without a newline."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode()


def run_suite(*args: str, json_path: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run the suite with these arguments; its results go to `json_path`."""
    return subprocess.run([sys.executable, "-m", "benchmarks", *args, "--json", str(json_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout)
