"""The package version, kept apart so that every layer can read it."""

__version__ = "0.1.0"
"""The version of this package (the `mcp-sync-client` distribution), as a
PEP 440 string; the client sends it as its `clientInfo.version` by default."""
