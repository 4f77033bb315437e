"""Fixtures of the test server's tests: peers (`conns`, `conn`, `procs`) and
raw HTTP clients (`connect`, `client`), each closed after its test."""

from __future__ import annotations

from typing import Any, Callable, Iterator

import pytest

from mcp_sync.testing import HTTPServer, Server, demo_server
from tests.testing.peers import Conn, Proc
from tests.testing.raw_http import Client
from tests.testing.schema_util import MODERN, check_all_notifications


@pytest.fixture
def conns() -> Any:
    """Open Conns for a test; closes them all and checks their notifications afterwards."""
    opened: list[Conn] = []

    def open_conn(server: Server | None = None, stateless: bool = True) -> Conn:
        conn = Conn(server if server is not None else demo_server(), stateless)
        opened.append(conn)
        return conn

    yield open_conn
    for conn in opened:
        conn.close()
        check_all_notifications(conn.revision if conn.stateless or conn.legacy_version else MODERN, conn.messages)


@pytest.fixture
def conn(conns: Any) -> Conn:
    c: Conn = conns()
    return c


@pytest.fixture
def procs() -> Any:
    started: list[Proc] = []

    def start(*args: str, **kw: Any) -> Proc:
        proc = Proc(*args, **kw)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.kill()


@pytest.fixture
def connect() -> Iterator[Callable[[HTTPServer], Client]]:
    opened: list[Client] = []

    def open_client(server: HTTPServer) -> Client:
        client = Client(server)
        opened.append(client)
        return client

    yield open_client
    for client in opened:
        client.close()


@pytest.fixture
def client(serve: Callable[..., HTTPServer], connect: Callable[[HTTPServer], Client]) -> Client:
    return connect(serve())
