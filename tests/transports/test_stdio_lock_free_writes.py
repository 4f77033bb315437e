"""Messages of at most PIPE_BUF bytes are written to the server's stdin
without the write lock (one `write()` that size is whole and unmixed on a
pipe); larger ones take the lock, and the lock's holder keeps lone writers
out while it writes in pieces or closes stdin. Nothing may interleave."""

import collections
import os
import select
import sys
import threading
import time

import pytest

import mcp_sync
from mcp_sync.transports import stdio as stdio_module
from mcp_sync.transports import stdio_writer
from tests.helpers import scripted, wait_until
from tests.helpers import check_echoes as check
from tests.helpers import hammer_echo as hammer

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX pipes only")


class NullSink:
    def deliver(self, message):
        pass

    def transport_failed(self, error):
        pass


def started(command):
    """A bare stdio transport to `command`, started, its messages checked
    against the 2025-11-25 schema."""
    transport = stdio_module.Stdio(command[0], command[1:], shutdown_timeout=0.5).open()
    transport.start(NullSink())
    transport.negotiated("2025-11-25", False)
    return transport


def test_small_and_large_messages_from_many_threads_never_interleave():
    big_text = "x" * (3 * 65536)  # more than a pipe holds: written in pieces, under the lock
    errors = []
    bigs = collections.Counter()
    with mcp_sync.connect(mcp_sync.Stdio(sys.executable, scripted()[1:])) as client:
        stop = threading.Event()

        def big_writer(n):
            try:
                while not stop.is_set():
                    text = f"{n}:{big_text}"
                    assert client.call_tool("echo", {"text": text}).text == text
                    bigs[n] += 1
            except Exception as exc:  # asserted on below
                errors.append(exc)

        writers = [threading.Thread(target=big_writer, args=(n,)) for n in range(3)]
        for writer in writers:
            writer.start()
        try:
            results, hammer_errors = hammer(client, threads=24, calls=150)
        finally:
            stop.set()
            for writer in writers:
                writer.join()
        check(results, hammer_errors, threads=24, calls=150)
    assert errors == []
    assert sum(bigs.values()) >= 3  # the large writes did overlap the small ones


def test_bytes_sent_counts_every_write_with_and_without_the_lock(monkeypatch):
    written = collections.Counter()
    real_write = os.write

    class CountingOs:
        def __getattr__(self, name):
            return getattr(os, name)

        @staticmethod
        def write(fd, data):
            n = real_write(fd, data)
            written[fd] += n
            return n

    monkeypatch.setattr(stdio_writer, "os", CountingOs())
    with mcp_sync.connect(mcp_sync.Stdio(sys.executable, scripted()[1:])) as client:
        transport = client._conn.transport
        fd = transport._proc.stdin.fileno()
        before_bytes, before_written = transport.bytes_sent, written[fd]
        results, errors = hammer(client, threads=16, calls=100)
        check(results, errors, threads=16, calls=100)
        assert client.call_tool("echo", {"text": "y" * 10000}).text == "y" * 10000  # under the lock
        assert transport.bytes_sent - before_bytes == written[fd] - before_written > 16 * 100 * 50


def test_a_lone_writer_stands_back_while_the_lock_holder_is_exclusive():
    with mcp_sync.connect(mcp_sync.Stdio(sys.executable, scripted()[1:])) as client:
        transport = client._conn.transport
        writer = transport._writer
        fd = transport._proc.stdin.fileno()
        sent = transport.bytes_sent
        writer._exclusive = True
        try:
            assert writer._write_alone(fd, b'{"jsonrpc":"2.0","method":"x"}\n', None) is False
        finally:
            writer._exclusive = False
        assert transport.bytes_sent == sent and not writer._alone
        assert client.call_tool("echo", {"text": "after"}).text == "after"  # nothing half-written


def test_the_lock_holder_waits_for_a_lone_writer_in_flight_and_no_longer():
    with mcp_sync.connect(mcp_sync.Stdio(sys.executable, scripted()[1:])) as client:
        writer = client._conn.transport._writer
        token = object()
        writer._alone.add(token)  # a lone writer between its token and its write
        try:
            # Its deadline bounds the wait.
            assert writer._exclude_alone(time.monotonic() + 0.05) is False
            writer._exclusive = False

            def finish_when_excluded():
                wait_until(lambda: writer._exclusive, timeout=5)  # else the holder gives up at its deadline
                writer._alone.discard(token)

            finisher = threading.Thread(target=finish_when_excluded)
            finisher.start()
            assert writer._exclude_alone(time.monotonic() + 5) is True
            finisher.join()
        finally:
            writer._exclusive = False
            writer._alone.discard(token)
        assert client.call_tool("echo", {"text": "still fine"}).text == "still fine"


def test_a_full_pipe_sends_a_small_message_through_the_lock_and_its_deadline():
    # The server reads nothing: small requests fill its stdin (the lone write
    # finds no room for all of it and writes nothing), then the call waits
    # under the lock for room, up to its deadline, and says nothing was sent.
    transport = started([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        message = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1, "reason": "z" * 1000}}
        assert len(mcp_sync.protocol.jsonrpc.encode(message)) + 1 <= select.PIPE_BUF
        began = time.monotonic()
        with pytest.raises(mcp_sync.RequestTimeout):
            for _ in range(1000):  # a pipe holds 64 KiB: about 65 of these
                transport.send(message, deadline=time.monotonic() + 0.3)
        assert time.monotonic() - began < 5
        assert not transport._writer._alone and not transport._writer._exclusive
    finally:
        transport.close()


def test_a_small_send_after_close_says_the_connection_is_closed():
    # The review's reproduction: the lone path read stdin's descriptor
    # before anything said the transport was closing (ValueError).
    transport = started(scripted())
    transport.close()
    for size in (10, 10000):
        message = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1, "reason": "r" * size}}
        with pytest.raises(mcp_sync.ConnectionClosed):
            transport.send(message)
