"""The public API is typed: mypy --strict passes on the package."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent


def test_mypy_strict_is_clean():
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "mcp_sync"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_py_typed_marker_ships():
    assert (ROOT / "mcp_sync" / "py.typed").exists()
    assert "py.typed" in (ROOT / "setup.cfg").read_text()
