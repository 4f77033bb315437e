"""A 2026-07-28 stdio server that reads nothing until it is told to.

    python deaf.py RECORD

Connect to it with `protocol="2026-07-28"` and a short `probe_timeout`
(the probe goes unanswered, and the pin is trusted after it). It
reads nothing from its stdin until it gets SIGUSR1, so the client's writes
fill the pipe. Then it reads its stdin to the end, answering each
`tools/call` (echoing `text`), and at end of input writes to RECORD one line
per complete message it read (its method) and, if the input ended inside a
message, `partial N` with the number of bytes of that unfinished line.
Standard library only.
"""

import json
import os
import signal
import sys


def main():
    record = sys.argv[1]
    # Blocked, not handled: `sigwait()` takes it whenever it was sent.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    signal.sigwait({signal.SIGUSR1})
    seen = []
    buffered = b""
    while True:
        chunk = os.read(0, 65536)
        if not chunk:
            break
        buffered += chunk
        *lines, buffered = buffered.split(b"\n")
        for raw in lines:
            message = json.loads(raw)
            seen.append(message.get("method") or "response")
            if message.get("method") == "tools/call":
                text = message["params"]["arguments"].get("text", "")
                answer = {"resultType": "complete", "content": [{"type": "text", "text": text}]}
                sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": answer}) + "\n")
                sys.stdout.flush()
    with open(record, "w") as out:
        out.write("".join(f"{method}\n" for method in seen))
        if buffered:
            out.write(f"partial {len(buffered)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
