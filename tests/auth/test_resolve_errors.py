"""A lookup's failure reaches each of its waiters as an exception of its
own (`errors.copy_error`): a raise writes the raiser's traceback into the
instance, and the one kept for the waiters holds none (a cycle through the
lookup's frame otherwise)."""

import socket
import threading
import time

from mcp_sync.transports import resolve as _resolve


def test_each_waiter_of_a_failed_lookup_raises_its_own_copy(monkeypatch):
    release = threading.Event()
    started = threading.Event()
    kept = []

    def resolve():
        started.set()
        release.wait(10)
        error = socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        kept.append(error)
        raise error

    caught = {}

    def wait(name):
        try:
            _resolve.within(("test-copies", "x.invalid"), resolve, time.monotonic() + 10, "x.invalid")
        except socket.gaierror as exc:
            caught[name] = exc

    # The lookup is released only once both wait for it, so the second
    # shares the one under way (it never starts its own: `resolve` runs once).
    waiting = threading.Semaphore(0)
    wait_for_event = _resolve.wait_for_event

    def counted(event, timeout):
        waiting.release()
        return wait_for_event(event, timeout)

    monkeypatch.setattr(_resolve, "wait_for_event", counted)
    first = threading.Thread(target=wait, args=("first",))
    first.start()
    assert started.wait(10)
    second = threading.Thread(target=wait, args=("second",))  # shares the lookup under way
    second.start()
    assert waiting.acquire(timeout=10) and waiting.acquire(timeout=10)
    release.set()
    first.join(10)
    second.join(10)
    assert set(caught) == {"first", "second"} and len(kept) == 1  # one lookup for both
    one, other = caught["first"], caught["second"]
    assert one is not other and kept[0] not in (one, other)
    assert one.errno == other.errno == socket.EAI_NONAME and str(one) == str(kept[0])
    assert kept[0].__traceback__ is None  # the one kept holds no frame
    assert _resolve.pending() == 0
