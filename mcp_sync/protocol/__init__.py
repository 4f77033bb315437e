"""Sans-IO protocol logic: everything about MCP that can be decided on plain data.

Nothing in this package does IO, starts a thread or sleeps. Each rule of the
specification that can be checked on a dict lives here and is tested on dicts.
"""
