"""A fork while another thread is in the middle of a lazy import (the
package loads some modules on first use): the child must get a whole
module, not hang on the import lock of a thread it does not have."""

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork() is POSIX only")

SCRIPT = textwrap.dedent('''
    import importlib.abc, importlib.util, os, signal, sys, threading

    import mcp_sync  # registers the package's fork hooks

    inside, release = threading.Event(), threading.Event()

    class SlowLoader(importlib.abc.Loader):
        def create_module(self, spec):
            return None

        def exec_module(self, module):
            inside.set()
            release.wait(30)
            module.DONE = True

    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name == "mcp_sync._probe_slow":
                return importlib.util.spec_from_loader(name, SlowLoader())
            return None

    sys.meta_path.insert(0, Finder())

    def release_later():
        # Runs once the fork has begun (this test's hook runs before the
        # package's): the import ends well after the fork would have
        # happened, unless the package's hook waits for it.
        forking.wait(30)
        threading.Timer(0.5, release.set).start()

    forking = threading.Event()
    os.register_at_fork(before=forking.set)  # registered last: runs first
    threading.Thread(target=release_later, daemon=True).start()
    importer = threading.Thread(target=lambda: importlib.import_module("mcp_sync._probe_slow"))
    importer.start()
    inside.wait(30)
    pid = os.fork()
    if pid == 0:
        signal.alarm(5)  # a hung import ends the child with SIGALRM
        import mcp_sync._probe_slow as probe
        os._exit(0 if probe.DONE else 3)
    _, status = os.waitpid(pid, 0)
    importer.join()
    print("child", os.waitstatus_to_exitcode(status))
''')


def test_a_child_forked_during_a_lazy_import_gets_the_whole_module():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["child", "0"], done.stdout + done.stderr


def test_the_hook_leaves_modules_nobody_is_importing_alone():
    from mcp_sync import client

    before = set(sys.modules)
    client._finish_imports_before_fork()
    assert set(sys.modules) == before
