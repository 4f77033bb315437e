"""Machine instructions per call, counted by valgrind's callgrind.

Timings on a shared two-core machine move by 10 % from run to run, which
hides a change of a few percent. Counted instructions move less: on a
quiet machine runs agree within about 3 %. Not under load: valgrind then
runs slower and the interpreter's timed waits (the GIL's 5 ms) wake more
often, which inflates a count; compare versions on a quiet machine, in
turns. This counts, for mcp_sync and for its floor
(`raw_reader`), the instructions of the client's whole process per
sequential `tools/call` over stdio: the calling and reader threads, the
interpreter and the C libraries; not the server (a process of its own)
nor the kernel. Each client runs twice in a child under
`valgrind --tool=callgrind`, with `FEW` and `FEW + calls` calls after the
same start and warm-up; the difference of the two totals, over `calls`,
is what one call costs. Valgrind runs one thread at a time, so this is
the work a call does, not how long it waits.

    python -m benchmarks.instructions [--calls N]

Needs `valgrind` on PATH (Debian's package); about half a minute per
client for the default 1,000 calls.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SERVER = [sys.executable, str(ROOT / "benchmarks" / "server.py"), "stdio"]
CLIENTS = ("mcp_sync", "raw_reader")
#: Calls in the shorter run, after the warm-up: the start-up it shares with the longer one cancels out.
FEW = 100
WARM_UP = 50
_COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


def child(client: str, calls: int) -> None:
    """In the child valgrind runs: open `client`, warm up, make `calls` calls."""
    sys.path.insert(0, str(ROOT))
    from benchmarks.clients import open_sync

    opened = open_sync(client, "stdio", SERVER)
    try:
        for i in range(WARM_UP + calls):
            text = f"call-{i}"
            if opened.echo(text) != text:
                raise RuntimeError("echo returned another text")
    finally:
        opened.close()


def total(client: str, calls: int) -> int:
    """The instructions callgrind counted in a child making `calls` calls."""
    with tempfile.TemporaryDirectory() as folder:
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={os.path.join(folder, 'out')}",
             sys.executable, "-m", "benchmarks.instructions", "--child", client, str(calls)],
            cwd=ROOT, capture_output=True, text=True, timeout=900)
    found = _COLLECTED.findall(done.stderr)
    if done.returncode != 0 or not found:
        raise RuntimeError(f"valgrind exited {done.returncode}: {done.stderr.strip()[-500:]}")
    return int(found[-1])


def per_call(client: str, calls: int) -> float:
    """Instructions per call of `client`: the difference of two runs."""
    return (total(client, FEW + calls) - total(client, FEW)) / calls


def measure(calls: int) -> dict[str, Any]:
    """Instructions per call of each client and mcp_sync's ratio to the floor."""
    counts = {client: per_call(client, calls) for client in CLIENTS}
    return {"instructions_per_call": counts, "ratio": counts["mcp_sync"] / counts["raw_reader"], "calls": calls}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.instructions", description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=1000, help="calls measured per client (default 1000)")
    parser.add_argument("--json", help="write the result to this file too")
    parser.add_argument("--child", nargs=2, metavar=("CLIENT", "CALLS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child[0], int(args.child[1]))
        return 0
    if args.calls < 1:
        parser.error("--calls must be at least 1")
    if shutil.which("valgrind") is None:
        print("valgrind is not installed: install Debian's valgrind package (apt-get install valgrind)",
              file=sys.stderr)
        return 2
    result = measure(args.calls)
    for client, count in result["instructions_per_call"].items():
        print(f"{client:12} {count:12,.0f} instructions per call")
    print(f"mcp_sync / floor: {result['ratio']:.3f}x")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
