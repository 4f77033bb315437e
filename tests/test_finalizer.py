"""A client dropped without `close()` is collected and closed, with a warning.

Nothing the client starts (the engine's threads, the transport's reader,
the notification dispatcher) holds the client strongly, so dropping the last
reference lets it be collected; its finalizer then closes what it held and
warns with a `ResourceWarning`, as an unclosed file does.
"""

import gc
import threading
import warnings
import weakref

import pytest

import mcp_sync
from mcp_sync.testing import demo_server
from tests.helpers import demo_command, wait_until


def _drop_and_collect(make):
    """Make a client with `make()`, drop it, collect; returns the warnings
    and what the client had started (its server process, its threads)."""
    before = set(threading.enumerate())
    client = make()
    proc = getattr(client._conn.transport, "_proc", None)
    started = set(threading.enumerate()) - before
    ref = weakref.ref(client)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del client
        gc.collect()
    return ref, caught, proc, started


@pytest.mark.parametrize("protocol", ["2026-07-28", "2025-11-25"])
def test_a_dropped_stdio_client_is_closed_with_a_resource_warning(protocol):
    def make():
        client = mcp_sync.connect(demo_command(), protocol=protocol)
        assert client.call_tool("echo", {"text": "x"}).text == "x"
        client.on_notification(lambda note: None)  # a dispatcher thread too
        return client

    ref, caught, proc, started = _drop_and_collect(make)
    assert ref() is None, "the client was not collected"
    assert [w for w in caught if issubclass(w.category, ResourceWarning)
            and "unclosed mcp_sync.Client" in str(w.message)]
    assert proc is not None and started
    # Closing runs off the collecting thread (which may hold an engine lock).
    assert wait_until(lambda: proc.returncode is not None, 10), "the server process is still running"
    assert wait_until(lambda: not any(t.is_alive() for t in started), 10), \
        f"threads left: {[t for t in started if t.is_alive()]}"


def test_a_dropped_client_with_a_subscription_and_a_server_request_handler_is_collected():
    def make():
        client = mcp_sync.connect(demo_server(), protocol="2025-11-25",
                                  input_handlers={"form": lambda params: {"action": "decline"}})
        client.listen(tools_list_changed=True)
        client.notifications()
        return client

    ref, caught, _, started = _drop_and_collect(make)
    assert ref() is None, "the client was not collected"
    assert any(issubclass(w.category, ResourceWarning) for w in caught)
    assert wait_until(lambda: not any(t.is_alive() for t in started), 10)


def test_a_closed_client_warns_nothing():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        client = mcp_sync.connect(demo_server())
        client.close()
        del client
        gc.collect()
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)]


def test_a_dropped_client_is_closed_by_reference_counting_alone():
    """No cycle through the client (its typed calls hold it weakly): the
    finalizer runs when the last reference goes, not at the next collection."""
    client = mcp_sync.connect(demo_server())
    client.list_tools()
    finalizer = client._finalizer
    gc.disable()
    try:
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            del client
            assert not finalizer.alive, "the client is only reclaimed by the garbage collector"
    finally:
        gc.enable()
