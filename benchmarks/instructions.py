"""Machine instructions per call, counted by valgrind's callgrind.

Timings on a shared two-core machine move by 10 % from run to run, which
hides a change of a few percent. Counted instructions move less: most
runs agree within about 3 %. Now and then one is far off (once, in a CI
run, the floor read 180,000 instead of 100,000: under valgrind a call
takes milliseconds, and the interpreter's timed waits, such as the GIL's
5 ms, then wake more or less often with the machine's moods), so each
client is measured `--repeat` times and the median kept. This counts, for
mcp_sync and for its floor (`raw_reader`), the instructions of the
client's whole process per sequential `tools/call` over stdio: the calling and reader threads, the
interpreter and the C libraries; not the server (a process of its own)
nor the kernel. Each client runs twice in a child under
`valgrind --tool=callgrind`, with `FEW` and `FEW + calls` calls after the
same start and warm-up; the difference of the two totals, over `calls`,
is what one call costs. Valgrind runs one thread at a time, so this is
the work a call does, not how long it waits.

    python -m benchmarks.instructions [--calls N] [--repeat R]

Needs `valgrind` on PATH (Debian's package); about 20 seconds per
measurement for the default 1,000 calls, three measurements per client.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
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


def measure(calls: int, repeat: int = 3) -> dict[str, Any]:
    """Instructions per call of each client (the median of `repeat`
    measurements, the clients taking turns) and mcp_sync's ratio to the
    floor; each measurement in `runs`."""
    runs: dict[str, list[float]] = {client: [] for client in CLIENTS}
    for _ in range(repeat):
        for client in CLIENTS:
            runs[client].append(per_call(client, calls))
    counts = {client: statistics.median(values) for client, values in runs.items()}
    return {"instructions_per_call": counts, "ratio": counts["mcp_sync"] / counts["raw_reader"], "calls": calls,
            "runs": runs}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.instructions", description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=1000, help="calls measured per client (default 1000)")
    parser.add_argument("--repeat", type=int, default=3, help="measurements per client, median kept (default 3)")
    parser.add_argument("--json", help="write the result to this file too")
    parser.add_argument("--child", nargs=2, metavar=("CLIENT", "CALLS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child[0], int(args.child[1]))
        return 0
    if args.calls < 1 or args.repeat < 1:
        parser.error("--calls and --repeat must be at least 1")
    if shutil.which("valgrind") is None:
        print("valgrind is not installed: install Debian's valgrind package (apt-get install valgrind)",
              file=sys.stderr)
        return 2
    result = measure(args.calls, args.repeat)
    for client, count in result["instructions_per_call"].items():
        each = ", ".join(f"{value:,.0f}" for value in result["runs"][client])
        print(f"{client:12} {count:12,.0f} instructions per call (median of {each})")
    print(f"mcp_sync / floor: {result['ratio']:.3f}x")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
