"""A 2026-07-28 stdio server that stops reading in the middle of a call.

    python stops_reading.py RECORD

Connect to it with `protocol="2026-07-28"` (no probe is sent then). Its
`tools/call` of `hold` closes its stdin (so that any later write of the
client fails with EPIPE), appends "hold ran" to RECORD, then exits after
`seconds` without answering; `echo` answers with its `text`. Standard library
only.
"""

import json
import os
import sys
import time


def main():
    record = sys.argv[1]
    for line in sys.stdin:
        message = json.loads(line)
        if message.get("method") != "tools/call":
            continue
        params = message.get("params") or {}
        arguments = params.get("arguments") or {}
        if params.get("name") == "hold":
            os.close(0)
            with open(record, "a") as out:
                out.write("hold ran\n")
            time.sleep(float(arguments.get("seconds", 1)))
            os._exit(0)
        answer = {"jsonrpc": "2.0", "id": message["id"],
                  "result": {"content": [{"type": "text", "text": str(arguments.get("text"))}]}}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
