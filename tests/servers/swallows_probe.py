"""An initialize-era (2025-03-26) stdio server that swallows `server/discover`.

    python swallows_probe.py RECORD MODE_FILE

Like the Python SDK 1.3 server, it neither answers nor refuses the probe.
It appends `start` to RECORD when it starts and the method of every request
it reads. When MODE_FILE holds `new`, it becomes a server that speaks only
2026-07-28 (the bundled test server), as if upgraded in place.
Standard library only, apart from that upgrade.
"""

import json
import os
import sys


def main():
    record, mode_file = sys.argv[1], sys.argv[2]
    with open(record, "a") as f:
        f.write("start\n")
    with open(mode_file) as f:
        if f.read().strip() == "new":
            os.execv(sys.executable, [sys.executable, "-m", "mcp_sync.testing", "--versions", "2026-07-28"])
    for line in sys.stdin:
        message = json.loads(line)
        method = message.get("method")
        if "id" not in message or method is None:
            continue
        with open(record, "a") as f:
            f.write(method + "\n")
        if method == "server/discover":
            continue  # silence: the probe is swallowed
        if method == "initialize":
            result = {"protocolVersion": "2025-03-26", "capabilities": {"tools": {}},
                      "serverInfo": {"name": "swallows-probe", "version": "1"}}
        elif method == "tools/call":
            result = {"content": [{"type": "text", "text": message["params"]["arguments"]["text"]}]}
        else:
            result = {}
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
