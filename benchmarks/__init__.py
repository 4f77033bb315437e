"""The benchmark suite: mcp_sync against the raw floor and the official SDK.

Run it from the repository root with ``python -m benchmarks`` (see
``python -m benchmarks --help`` and the README's development section).
Every measurement runs in a fresh worker process (``worker.py``) against the
suite's own minimal server (``server.py``), so memory numbers belong to one
client only and the server's cost stays small next to any client's.
"""
