"""A wrapper that counts the starts of a stdio server, and can make it slow
to start or crash at start.

    python starts.py COUNT_FILE [--sleep SECONDS] [--crash] -- COMMAND [ARGS...]

Appends a line to COUNT_FILE per start. `--sleep` waits before the server
starts, reading nothing meanwhile (a first `npx -y` downloading its
package). `--crash` writes an error to stderr and exits with code 3
without reading stdin (a missing module, a bad argument). Otherwise it
becomes COMMAND (exec: same process, same pipes).
"""

import argparse
import os
import sys
import time


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("count_file")
    parser.add_argument("--sleep", type=float, default=0.0)
    parser.add_argument("--crash", action="store_true")
    split = sys.argv.index("--")
    args = parser.parse_args(sys.argv[1:split])
    with open(args.count_file, "a") as f:
        f.write(f"{os.getpid()}\n")
    time.sleep(args.sleep)
    if args.crash:
        sys.stderr.write("ModuleNotFoundError: No module named 'server_dependency'\n")
        sys.stderr.flush()
        sys.exit(3)
    command = sys.argv[split + 1:]
    os.execvp(command[0], command)


if __name__ == "__main__":
    main()
