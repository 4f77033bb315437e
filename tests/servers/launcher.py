"""A launcher: starts the demo server with its own stdin, stdout and stderr
and exits at once, as a wrapper script that runs the server in the
background does.

    python launcher.py PIDFILE

The server's pid is written to PIDFILE (atomically) before the launcher exits.
"""

import os
import subprocess
import sys


def main() -> int:
    pidfile = sys.argv[1]
    server = subprocess.Popen([sys.executable, "-m", "mcp_sync.testing.server"])
    with open(pidfile + ".tmp", "w") as out:
        out.write(str(server.pid))
    os.replace(pidfile + ".tmp", pidfile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
