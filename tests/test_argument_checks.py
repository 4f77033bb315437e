"""Duration arguments follow one rule, at every entry point, before anything
is sent: TypeError for what is not a number of seconds (a string, a bool,
None where None is not allowed), ValueError for a number out of range (0
where 0 is not allowed, a negative, NaN, infinite, or longer than a thread
can wait)."""

import math
import numbers
import threading
from typing import Any

import pytest

import mcp_sync
from mcp_sync.waiting import check_seconds
from mcp_sync.keepalive import Keepalive as KeepaliveThread
from mcp_sync.status import Status, StatusMonitor
from mcp_sync.testing import demo_server

#: What one blocking wait of a thread accepts (`waiting.LONGEST_WAIT`).
LONGEST_WAIT = threading.TIMEOUT_MAX
NOT_NUMBERS = ["5", True, False, [5], b"5"]
TOO_LONG = [math.inf, LONGEST_WAIT * 2]


def on_a_thread(call):
    """What `call()` raises on a thread that is not the main one (whose
    waits are sliced, which hid the overflow of an infinite timeout)."""
    raised = []

    def run():
        try:
            call()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            raised.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)
    assert not thread.is_alive()
    return raised[0] if raised else None


# -- requests and connect -------------------------------------------------------------------


REQUESTS = {
    "call_tool": lambda c, **kw: c.call_tool("echo", {"text": "x"}, **kw),
    "list_tools": lambda c, **kw: c.list_tools(**kw),
    "read_resource": lambda c, **kw: c.read_resource("demo://readme", **kw),
    "listen": lambda c, **kw: c.listen(tools_list_changed=True, **kw),
}


@pytest.mark.parametrize("request_name", sorted(REQUESTS))
@pytest.mark.parametrize("bad", NOT_NUMBERS, ids=repr)
def test_a_request_timeout_that_is_not_a_number_is_a_type_error(request_name, bad):
    # It was a ValueError ("timeout must be a positive number of seconds,
    # not '5'"), and a bool passed as 1 s in `next()`.
    server = demo_server()
    with mcp_sync.connect(server) as client:
        before = server.served()
        with pytest.raises(TypeError, match=r"^timeout must be a number of seconds or None \(no limit\), not "):
            REQUESTS[request_name](client, timeout=bad)
        assert server.served() == before


def test_a_numeric_string_timeout_says_what_to_pass():
    with mcp_sync.connect(demo_server()) as client:
        with pytest.raises(TypeError) as info:
            client.call_tool("echo", {"text": "x"}, timeout="5")
    assert str(info.value) == ("timeout must be a number of seconds or None (no limit), not the string '5': "
                               "pass timeout=5")


@pytest.mark.parametrize("request_name", sorted(REQUESTS))
@pytest.mark.parametrize("bad", [0, -1, math.nan], ids=repr)
def test_a_request_timeout_out_of_range_is_a_value_error(request_name, bad):
    server = demo_server()
    with mcp_sync.connect(server) as client:
        before = server.served()
        with pytest.raises(ValueError, match=r"^timeout must be a positive number of seconds, not "):
            REQUESTS[request_name](client, timeout=bad)
        assert server.served() == before


@pytest.mark.parametrize("request_name", sorted(REQUESTS))
@pytest.mark.parametrize("bad", TOO_LONG, ids=repr)
def test_a_request_timeout_longer_than_a_thread_can_wait_is_refused_before_it_is_sent(request_name, bad):
    # On a thread other than the main one the request was sent, then its
    # wait raised OverflowError ("timestamp out of range for platform time_t").
    server = demo_server()
    with mcp_sync.connect(server) as client:
        before = server.served()
        raised = on_a_thread(lambda: REQUESTS[request_name](client, timeout=bad))
        assert isinstance(raised, ValueError), raised
        assert str(raised).endswith(f"not {bad!r}: pass None for no limit")
        assert server.served() == before
        # None is the way to say "no limit", and works on a thread.
        assert on_a_thread(lambda: client.call_tool("echo", {"text": "x"}, timeout=None)) is None


def test_the_longest_wait_allowed_works_on_a_thread():
    with mcp_sync.connect(demo_server()) as client:
        assert on_a_thread(lambda: client.call_tool("echo", {"text": "x"}, timeout=LONGEST_WAIT)) is None


@pytest.mark.parametrize("option", ["timeout", "probe_timeout", "max_total_timeout", "handler_timeout"])
@pytest.mark.parametrize("bad", ["5", True], ids=repr)
def test_a_connect_timeout_that_is_not_a_number_is_a_type_error(option, bad):
    server = demo_server()
    with pytest.raises(TypeError, match=rf"^{option} must be a number of seconds"):
        mcp_sync.connect(server, **{option: bad})
    assert server.served() == 0


@pytest.mark.parametrize("option", ["timeout", "probe_timeout", "max_total_timeout", "handler_timeout"])
@pytest.mark.parametrize("bad", [0, -1, math.nan, math.inf], ids=repr)
def test_a_connect_timeout_out_of_range_is_a_value_error(option, bad):
    server = demo_server()
    with pytest.raises(ValueError, match=rf"^{option} must be "):
        mcp_sync.connect(server, **{option: bad})
    assert server.served() == 0


def test_none_is_a_type_error_where_it_is_not_allowed():
    server = demo_server()
    with pytest.raises(TypeError, match=r"^probe_timeout must be a number of seconds, not None$"):
        mcp_sync.connect(server, probe_timeout=None)
    with pytest.raises(TypeError, match=r"^probe must be a number of seconds, not None$"):
        mcp_sync.Timeouts(probe=None)
    assert server.served() == 0
    mcp_sync.Timeouts(request=None, handler=None)  # allowed: no limit


@pytest.mark.parametrize("bad,error", [("5", TypeError), (True, TypeError), (0, ValueError),
                                       (math.nan, ValueError), (math.inf, ValueError)], ids=repr)
def test_a_keepalive_interval_follows_the_same_rule(bad, error):
    server = demo_server()
    with pytest.raises(error, match=r"^keepalive must be "):
        mcp_sync.connect(server, keepalive=bad)
    assert server.served() == 0


def test_a_keepalive_interval_longer_than_a_thread_can_wait_is_refused_when_given():
    # It passed `connect()`'s check, and was refused only after the
    # connection was open (or killed the keepalive's thread).
    server = demo_server()
    with pytest.raises(ValueError, match=r"^interval must be a number of seconds up to "):
        mcp_sync.connect(server, keepalive=mcp_sync.Keepalive(LONGEST_WAIT * 2))
    with pytest.raises(ValueError, match=r"^interval must be a number of seconds up to "):
        KeepaliveThread(LONGEST_WAIT * 2, 3, probe=lambda timeout: None, on_dead=lambda error: None)
    assert server.served() == 0


@pytest.mark.parametrize("field", ["initial_delay", "max_delay"])
def test_a_reconnect_delay_is_named_when_it_is_not_a_number(field):
    # It said "a delay must be a number of seconds", naming neither.
    with pytest.raises(TypeError, match=rf"^{field} must be a number of seconds, not the string '1': pass {field}=1$"):
        mcp_sync.Reconnect(**{field: "1"})
    with pytest.raises(ValueError, match=rf"^{field} must be a finite number of seconds, not inf$"):
        mcp_sync.Reconnect(**{field: math.inf})
    # A backoff waits in pieces: longer than one thread wait is fine there.
    assert getattr(mcp_sync.Reconnect(initial_delay=1e10, max_delay=1e10), field) == 1e10


# -- waits for notifications and events ------------------------------------------------------


@pytest.mark.parametrize("protocol", ["2026-07-28", "2025-11-25"])
def test_the_waits_of_a_listen_and_a_notification_stream(protocol):
    with mcp_sync.connect(demo_server(), protocol=protocol) as client:
        with client.listen(tools_list_changed=True) as sub, client.notifications() as stream:
            for wait in (sub.next, stream.next):
                for bad in NOT_NUMBERS:
                    # True waited 1 s, and "1" said "'>=' not supported between
                    # instances of 'str' and 'float'".
                    with pytest.raises(TypeError, match=r"^timeout must be a number of seconds or None"):
                        wait(timeout=bad)
                for bad in (-1, math.nan):
                    with pytest.raises(ValueError, match=r"^timeout must be a number of seconds, 0 or more, not"):
                        wait(timeout=bad)
                for bad in TOO_LONG:  # OverflowError on a thread
                    raised = on_a_thread(lambda: wait(timeout=bad))
                    assert isinstance(raised, ValueError) and str(raised).endswith(": pass None for no limit")
                with pytest.raises(mcp_sync.RequestTimeout):
                    wait(timeout=0)  # 0 looks without waiting


def test_a_status_wait():
    monitor = StatusMonitor(lambda fn: fn())
    for bad in NOT_NUMBERS:
        with pytest.raises(TypeError, match=r"^timeout must be a number of seconds or None"):
            monitor.wait_for(Status.READY, timeout=bad)
    for bad in (-1, math.nan):
        with pytest.raises(ValueError, match=r"^timeout must be a number of seconds, 0 or more"):
            monitor.wait_for(Status.READY, timeout=bad)
    for bad in TOO_LONG:  # OverflowError on a thread
        raised = on_a_thread(lambda: monitor.wait_for(Status.READY, timeout=bad))
        assert isinstance(raised, ValueError), raised
    assert monitor.wait_for(Status.READY, timeout=0) is None  # 0 looks without waiting
    monitor.set(Status.READY)
    assert monitor.wait_for(Status.READY, timeout=None) is Status.READY


# -- the rule itself -------------------------------------------------------------------------


@pytest.mark.parametrize("value,kwargs,error", [
    (None, {"allow_none": True}, None),
    (None, {"allow_none": False}, TypeError),
    (0, {"allow_none": False}, ValueError),
    (0, {"allow_none": False, "allow_zero": True}, None),
    (0.0, {"allow_none": False, "allow_zero": True}, None),
    (-0.001, {"allow_none": False, "allow_zero": True}, ValueError),
    (1, {"allow_none": False}, None),
    (LONGEST_WAIT, {"allow_none": False}, None),
    (math.nextafter(LONGEST_WAIT, math.inf), {"allow_none": False}, ValueError),
    (1e300, {"allow_none": False, "longest": None}, None),
    (math.inf, {"allow_none": False, "longest": None}, ValueError),
    (-math.inf, {"allow_none": True}, ValueError),
    (math.nan, {"allow_none": True, "allow_zero": True}, ValueError),
    (True, {"allow_none": True}, TypeError),
    ("soon", {"allow_none": True}, TypeError),
    (object(), {"allow_none": True}, TypeError),
])
def test_check_seconds(value, kwargs, error):
    from mcp_sync.waiting import LONGEST_WAIT as longest, check_seconds

    assert longest == LONGEST_WAIT
    if error is None:
        check_seconds("wait", value, **kwargs)
    else:
        with pytest.raises(error, match=r"^wait must be "):
            check_seconds("wait", value, **kwargs)


class _Int64:
    """An integer of another library, as numpy's int64 is to Python: no
    `int`, but registered as a `numbers.Integral`."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __index__(self) -> int:
        return self.n

    __int__ = __index__

    def __float__(self) -> float:
        return float(self.n)

    def __gt__(self, other: Any) -> bool:
        return self.n > other

    def __ge__(self, other: Any) -> bool:
        return self.n >= other


numbers.Integral.register(_Int64)


def test_an_integer_of_another_library_is_a_number_of_seconds():
    # Refused as "not a number" before (numpy's int64 in `next(timeout=...)`).
    check_seconds("timeout", _Int64(2), allow_none=True)
    with pytest.raises(ValueError, match="positive"):
        check_seconds("timeout", _Int64(-1), allow_none=True)


def test_an_integer_too_large_for_a_float_is_a_value_error_not_an_overflow():
    for longest in (None, 100.0):
        with pytest.raises(ValueError):
            check_seconds("timeout", 10**400, allow_none=True, longest=longest)
