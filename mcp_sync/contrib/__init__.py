"""Integrations with web frameworks: `mcp_sync.contrib.django` (a Django app)
and `mcp_sync.contrib.flask` (a Flask extension).

Importing this package imports no framework: each integration imports its
framework when it is itself imported. Both keep one client per configured
server in each process, made on first use and closed at exit; see
docs/django.md and docs/flask.md.

Example::

    # settings.py
    INSTALLED_APPS = [..., "mcp_sync.contrib.django"]
    MCP_SERVERS = {"demo": {"command": "python", "args": ["-m", "mcp_sync.testing"]}}
"""
