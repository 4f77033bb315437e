"""The official-SDK peer of `official_server.py`, served over the old HTTP+SSE
transport (`mcp.server.sse.SseServerTransport`: GET /sse, POST /messages/).

Usage: official_sse_server.py PORT
"""

import sys

from official_server import app

if __name__ == "__main__":
    app.run("sse", host="127.0.0.1", port=int(sys.argv[1]))
