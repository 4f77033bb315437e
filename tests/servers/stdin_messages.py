"""Reading the input of a standard-library stdio test server.

Imported by the server scripts beside it (run as `python <script>`, so this
folder is first on `sys.path`); standard library only, so they start fast.
"""

import json
import os
import sys


def received(record=None):
    """Each JSON-RPC message read from stdin, one a line, until it closes.

    With `record` (an open file, the script's `--record`), every line is
    appended to it first, after this process's pid, so a test can tell the
    lines of a restarted server from those of the first one."""
    for line in sys.stdin:
        if record:
            record.write(f"{os.getpid()} {line}")
            record.flush()
        yield json.loads(line)
