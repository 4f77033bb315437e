"""`python -m mcp_sync.testing`: the stdio demo server (same as `-m mcp_sync.testing.server`)."""

import sys

from .server import main

sys.exit(main())
