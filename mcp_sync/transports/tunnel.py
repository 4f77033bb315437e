"""The HTTP CONNECT tunnel through a forward proxy, for an https:// server.

Owns: the CONNECT request (`Proxy-Authorization: Basic` when the proxy URL
has credentials) and the reading of the proxy's answer head, and the words
of its failures: a 407 says the proxy needs (or refused) credentials, any
other refusal names the proxy and its status. Messages name the proxy by
host:port only, never by its credentials.

Must not know: how the socket was connected or is stopped (`pool`: the
dialer calls `open_tunnel` on a connected socket whose timeout it set and
which an abort shuts down), TLS (done over the tunnel afterwards), or MCP.

The answer head is read here, not by `http11.Response`, because its reader
buffers: a byte of the server's TLS stream read with the head would be lost.
Nothing may follow the head of a 2xx answer until the client speaks TLS, so
a proxy that sends more is refused.
"""

from __future__ import annotations

import socket

from ..errors import ConnectError
from ..waiting import remaining
from .http_network import ProxyURL

__all__ = ["open_tunnel", "credentials_refused", "MAX_HEAD"]

#: The longest CONNECT answer head accepted (bytes).
MAX_HEAD = 65536


def _authority(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def open_tunnel(sock: socket.socket, proxy: ProxyURL, host: str, port: int, limit: float) -> None:
    """Ask the proxy on `sock` for a tunnel to `host:port`, all of it by
    `limit` (a `time.monotonic()` value: a proxy that trickles its answer a
    byte at a time cannot stretch it). Returns when the tunnel is open;
    raises `ConnectError` when the proxy refuses, OSError (a timeout, a
    broken connection) as the socket does."""
    target = _authority(host, port)
    lines = [f"CONNECT {target} HTTP/1.1", f"Host: {target}"]
    if proxy.authorization is not None:
        lines.append(f"Proxy-Authorization: {proxy.authorization}")
    try:
        _bound(sock, limit)
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        head = _read_head(sock, proxy, limit)
    except socket.timeout:
        raise socket.timeout(f"the proxy {proxy.address} did not answer CONNECT to {target} in time") from None
    status_line = head.split(b"\r\n", 1)[0].decode("latin-1")
    parts = status_line.split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not (parts[1].isascii() and parts[1].isdigit()):
        raise ConnectError(f"the proxy {proxy.address} answered CONNECT with something that is not HTTP: "
                           f"{status_line[:80]!r}")
    status, reason = int(parts[1]), (parts[2] if len(parts) > 2 else "").strip()
    if 200 <= status < 300:
        return
    said = f"HTTP {status}{' ' + reason if reason else ''}"
    if status == 407:
        raise ConnectError(f"the proxy {proxy.address} {credentials_refused(proxy)} ({said} to CONNECT {target})")
    raise ConnectError(f"the proxy {proxy.address} refused to open a tunnel to {target}: {said}")


def _bound(sock: socket.socket, limit: float) -> None:
    """The socket's timeout: what is left until `limit`."""
    left = remaining(limit)
    if left <= 0:
        raise socket.timeout("the deadline passed")
    sock.settimeout(left)


def credentials_refused(proxy: ProxyURL) -> str:
    """What a 407 from `proxy` means to the user, credentials never named."""
    if proxy.username is not None:
        return "refused the credentials in the proxy URL"
    return "needs credentials: put them in the proxy URL (http://user:password@host:port)"


def _read_head(sock: socket.socket, proxy: ProxyURL, limit: float) -> bytes:
    data = b""
    while True:
        _bound(sock, limit)
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectError(f"the proxy {proxy.address} closed the connection without answering CONNECT")
        data += chunk
        end = data.find(b"\r\n\r\n")
        if end >= 0:
            head, rest = data[:end], data[end + 4:]
            if rest and head[9:10] == b"2":  # "HTTP/1.1 2xx": the tunnel must be silent now
                raise ConnectError(f"the proxy {proxy.address} sent data after its answer to CONNECT")
            return head
        if len(data) > MAX_HEAD:
            raise ConnectError(f"the proxy {proxy.address} answered CONNECT with a head over {MAX_HEAD} bytes")
