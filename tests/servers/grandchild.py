"""The demo stdio server, after starting a grandchild that outlives it.

    python grandchild.py PIDFILE [--escape] [--stdout-only]

Before serving, the server starts a grandchild that inherits its stdin,
stdout and stderr, ignores SIGTERM and sleeps for an hour: a server that
starts helpers and forgets them. With `--stdout-only` its stdin is
/dev/null instead (a helper that does not read). With `--escape` the grandchild also leaves
the server's session (`setsid()`), as a daemon would, so that signalling the
server's process group cannot reach it. The grandchild's pid is written to
PIDFILE (atomically) once it ignores SIGTERM, before the server answers
anything, so a test that connected can read it.
"""

import os
import subprocess
import sys

GRANDCHILD = """
import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
if sys.argv[2] == "escape":
    os.setsid()
os.write(int(sys.argv[1]), b"ready\\n")
os.close(int(sys.argv[1]))
time.sleep(3600)
"""


def main() -> int:
    pidfile = sys.argv[1]
    mode = "escape" if "--escape" in sys.argv[2:] else "stay"
    ready_r, ready_w = os.pipe()
    stdin = subprocess.DEVNULL if "--stdout-only" in sys.argv[2:] else None
    child = subprocess.Popen([sys.executable, "-c", GRANDCHILD, str(ready_w), mode], pass_fds=(ready_w,),
                             stdin=stdin)
    os.close(ready_w)
    with os.fdopen(ready_r, "rb") as ready:
        if ready.readline() != b"ready\n":
            sys.stderr.write("the grandchild did not start\n")
            return 3
    with open(pidfile + ".tmp", "w") as out:
        out.write(str(child.pid))
    os.replace(pidfile + ".tmp", pidfile)

    from mcp_sync.testing.server import main as serve

    return serve([])


if __name__ == "__main__":
    sys.exit(main())
