"""Prints how long `connect()` took to each old-SDK server of
test_old_sdk_servers.py, after the run: the figure behind the probe timeout
and era-memory decisions (a server that swallows `server/discover` costs the
whole probe timeout on a first connect)."""

import sys


def pytest_terminal_summary(terminalreporter):
    module = sys.modules.get("tests.interop.test_old_sdk_servers")
    if module is None or not module.CONNECT_TIMES:
        return
    terminalreporter.section("connect() to old-SDK servers (all cases connected at once)")
    for case_id, (seconds, outcome) in sorted(module.CONNECT_TIMES.items()):
        terminalreporter.write_line(f"{case_id:40} {seconds:6.2f} s  {outcome}")
