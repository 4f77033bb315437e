"""Reaching the person who authorizes: one interface, a handler per setting.

The authorization code flow needs a person to approve access in a browser;
the authorization server then redirects the browser to the client's
`redirect_uri` with a code. A `RedirectHandler` is how the client gets
there and back:

- `LoopbackRedirect` (scripts): listens on 127.0.0.1 on a free port, opens
  the browser, and waits for the redirect, on the calling thread.
- `PasteRedirect` (notebooks): shows the URL and asks the person to paste
  the address the browser ended on.
- `HeadlessRedirect` (tests, automation, the conformance suite): requests
  the authorization URL itself and reads the redirect from the `Location`
  header, for servers that approve without a person.

Web apps use no handler: `OAuth.start()` gives the URL for a view to
redirect to and `OAuth.finish(callback_url)` completes it in the callback
view (see `mcp_sync.auth.oauth`).

A handler returns the full callback URL; the flow checks `state` and `iss`
and takes the code from it. Handlers never see tokens.

Example::

    oauth = OAuth(redirect=LoopbackRedirect())          # a script
    oauth = OAuth(redirect=PasteRedirect())             # a notebook
"""

from __future__ import annotations

import html
import re
import selectors
import socket
import sys
import threading
import time
import webbrowser
from collections.abc import Callable
from typing import Protocol, runtime_checkable
from urllib.parse import parse_qs, urljoin, urlsplit

import attrs
import requests

from ..errors import AuthorizationError, AuthorizationRequired
from ..options import check_flag
from ..transports.http_network import NetworkSettings
from ..waiting import remaining
from ._http import fetch
from .discovery import is_loopback
from .pkce import same_secret

__all__ = ["RedirectHandler", "LoopbackRedirect", "PasteRedirect", "HeadlessRedirect", "check_redirect_uri"]

#: How much of a page without a redirect `HeadlessRedirect` reads, for its error message.
_PREVIEW_BYTES = 4096


@runtime_checkable
class RedirectHandler(Protocol):
    """Takes a person to the authorization URL and brings back the redirect.

    `redirect_uri` is the URI registered with the authorization server and
    sent in the request. `authorize(url)` returns the callback URL the
    server redirected to (with `code`, `state` and maybe `iss`), or raises
    `AuthorizationError`.
    """

    @property
    def redirect_uri(self) -> str:
        """The redirect URI: registered with the authorization server and
        sent in the authorization request. It must stay the same for the
        handler's life."""
        ...

    def authorize(self, authorization_url: str) -> str:
        """Take the person to `authorization_url` and return the full
        callback URL the authorization server redirected to (with `code`,
        `state` and maybe `iss`, or an `error`). Raises
        `AuthorizationError` when it cannot.

        Args:
            authorization_url: The authorization server's URL to open.

        Returns:
            The full callback URL.

        Raises:
            AuthorizationError: The person could not be reached.
        """
        ...


def check_redirect_uri(uri: str) -> str:
    """A redirect URI must be HTTPS or on a loopback host (the MCP spec's
    communication-security rule), absolute, and without a fragment."""
    parts = urlsplit(uri) if isinstance(uri, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or parts.fragment:
        raise ValueError(f"the redirect URI must be an absolute http(s) URL without a fragment, not {uri!r}")
    if parts.scheme == "http" and not is_loopback(parts.hostname):
        raise ValueError(f"the redirect URI must use HTTPS unless its host is loopback: {uri!r}")
    return uri


def _show_on_stderr(url: str) -> None:
    print(f"Authorize this client by opening:\n  {url}", file=sys.stderr, flush=True)


class LoopbackRedirect:
    """Scripts: a one-shot listener on a loopback port, and the browser.

    The port is chosen once (a free one unless `port` is given) and kept
    for this handler, so the redirect URI stays the one registered. The
    listener exists only while `authorize()` runs, on the calling thread:
    no thread or socket outlives the call. The URL is also shown (on
    stderr by default) for when no browser opens; `timeout` bounds the
    wait for the person, whatever else connects to the port meanwhile. Only
    the redirect carrying this authorization's `state` ends the wait: one
    from an earlier authorization's tab, or any other request, is answered
    with an error page and ignored.

    Example::

        oauth = OAuth(redirect=LoopbackRedirect())
        with mcp_sync.connect("https://mcp.example.com/mcp", auth=oauth) as client:
            client.list_tools()     # opens the browser on first use

    Raises `ValueError` for a host that is not loopback or a path that does
    not start with ``/``.

    Attributes:
        host (str): The loopback address the listener binds (default
            ``"127.0.0.1"``; an IPv6 one such as ``"::1"`` works too).
        path (str): The path of the redirect URI (default ``"/callback"``);
            requests for other paths get a 404.
        open_browser (bool): Whether `authorize()` opens the URL in the
            default browser (default True).
        timeout (float): The most `authorize()` waits for the redirect, in
            seconds (default 300).
        show (Callable[[str], None] | None): Called with the authorization
            URL before waiting (default: print it on stderr); None shows
            nothing.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        path: str = "/callback",
        open_browser: bool = True,
        timeout: float = 300.0,
        show: Callable[[str], None] | None = _show_on_stderr,
    ) -> None:
        if not is_loopback(host):
            raise ValueError(f"the loopback listener needs a loopback host, not {host!r}")
        if not path.startswith("/"):
            raise ValueError("path must start with '/'")
        check_flag("open_browser", open_browser)
        self.host = host
        self.path = path
        self.open_browser = open_browser
        self.timeout = timeout
        self.show = show
        self._port = port
        self._lock = threading.Lock()

    @property
    def port(self) -> int:
        """The listener's port: the `port` given, or a free one the kernel
        picks on first use and this handler keeps (so the redirect URI stays
        the one registered)."""
        with self._lock:
            if not self._port:
                # Ask the kernel for a free port once; authorize() binds it again.
                with socket.socket(socket.AF_INET6 if ":" in self.host else socket.AF_INET) as probe:
                    probe.bind((self.host, 0))
                    self._port = probe.getsockname()[1]
            return self._port

    @property
    def redirect_uri(self) -> str:
        """``http://<host>:<port><path>``, for example
        ``http://127.0.0.1:53682/callback``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{self.path}"

    def authorize(self, authorization_url: str) -> str:
        """Listen on `redirect_uri`, show the URL and open the browser, and
        wait on this thread (at most `timeout` seconds) for the redirect;
        return its full URL. The listener is closed before it returns.
        Raises `AuthorizationError` when the port cannot be bound or no
        redirect came in time.

        Args:
            authorization_url: The authorization server's URL to open.

        Returns:
            The full callback URL.

        Raises:
            AuthorizationError: The port cannot be bound, or no redirect
                came within `timeout`.
        """
        redirect_uri = self.redirect_uri
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        try:
            server = socket.create_server((self.host, self.port), family=family, backlog=16)
        except OSError as exc:
            raise AuthorizationError(f"cannot listen for the redirect on {redirect_uri}: {exc}") from None
        try:
            if self.show is not None:
                self.show(authorization_url)
            if self.open_browser:
                webbrowser.open(authorization_url)
            listener = _CallbackListener(server, self.path, redirect_uri, _only(authorization_url, "state"))
            callback = listener.wait(time.monotonic() + self.timeout)
        finally:
            server.close()
        if callback is None:
            raise AuthorizationError(
                f"no redirect reached {redirect_uri} within {self.timeout:g} s; authorization was not completed"
            )
        return callback

    def __repr__(self) -> str:
        return f"LoopbackRedirect({self.host}:{self._port or 'auto'}{self.path})"


def _only(url: str, name: str) -> str | None:
    """The one value of query parameter `name` in `url`; None when it is
    absent or repeated."""
    values = parse_qs(urlsplit(url).query, keep_blank_values=True).get(name)
    return values[0] if values is not None and len(values) == 1 else None


#: The largest request head the loopback listener reads: a callback URL
#: with a code and state is far smaller.
_MAX_HEAD = 32 * 1024
#: Connections the loopback listener holds at once; past it the oldest is
#: closed (a browser opens a few, some never used).
_MAX_CONNECTIONS = 32
_HEAD_END = re.compile(rb"\r?\n\r?\n")
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            431: "Request Header Fields Too Large"}


class _CallbackListener:
    """The loopback listener's wait for one authorization's redirect, on the
    calling thread.

    Whatever else reaches the port must neither hold the wait past its
    deadline nor end it: a browser opens connections it sends nothing on
    (preconnects), any local program can connect, and a tab left from an
    earlier authorization can load its callback again. So every connection
    is read without blocking, side by side (none waits behind another), and
    answered once its head is in; all of them end with the wait. Only a GET
    of `path` whose `state` is this authorization's ends it (any GET of
    `path` when the authorization URL has no single `state`); anything else
    gets an error page and the wait goes on."""

    def __init__(self, server: socket.socket, path: str, redirect_uri: str, state: str | None) -> None:
        self._server = server
        self._path = path
        self._redirect_uri = redirect_uri
        self._state = state
        #: Each open connection and the bytes of its head read so far.
        self._heads: dict[socket.socket, bytearray] = {}

    def wait(self, deadline: float) -> str | None:
        """The callback URL, or None when `deadline` (`time.monotonic()`)
        passed first."""
        self._server.setblocking(False)
        with selectors.DefaultSelector() as selector:
            selector.register(self._server, selectors.EVENT_READ)
            try:
                while (left := remaining(deadline)) > 0:
                    for key, _ in selector.select(left):
                        sock = key.fileobj
                        assert isinstance(sock, socket.socket)
                        if sock is self._server:
                            self._accept(selector)
                        elif sock not in self._heads:
                            continue  # dropped by an `_accept` earlier in this batch: closed
                        elif (callback := self._read(selector, sock, deadline)) is not None:
                            return callback
                return None
            finally:
                for sock in self._heads:
                    sock.close()
                self._heads.clear()

    def _accept(self, selector: selectors.BaseSelector) -> None:
        try:
            sock, _ = self._server.accept()
        except OSError:
            return  # gone before it was taken, or out of descriptors: the wait goes on
        if len(self._heads) >= _MAX_CONNECTIONS:
            oldest = next(iter(self._heads))
            self._drop(selector, oldest)
        sock.setblocking(False)
        self._heads[sock] = bytearray()
        selector.register(sock, selectors.EVENT_READ)

    def _drop(self, selector: selectors.BaseSelector, sock: socket.socket) -> None:
        selector.unregister(sock)
        del self._heads[sock]
        sock.close()

    def _read(self, selector: selectors.BaseSelector, sock: socket.socket, deadline: float) -> str | None:
        try:
            data = sock.recv(8192)
        except (BlockingIOError, InterruptedError):
            return None
        except OSError:
            data = b""
        if not data:
            self._drop(selector, sock)
            return None
        head = self._heads[sock]
        head += data
        end = _HEAD_END.search(head)
        if end is None and len(head) <= _MAX_HEAD:
            return None  # more to come
        status, callback = (431, None) if end is None or end.start() > _MAX_HEAD else \
            self._judge(bytes(head[:end.start()]))
        _answer(sock, status, remaining(deadline))
        self._drop(selector, sock)
        return callback

    def _judge(self, head: bytes) -> tuple[int, str | None]:
        """The status to answer a request head with, and the callback URL
        when it is this authorization's redirect."""
        request_line = head.split(b"\n", 1)[0].rstrip(b"\r").decode("latin-1")
        parts = request_line.split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/") or not parts[1].startswith("/"):
            return 400, None
        method, target = parts[0], parts[1]
        if urlsplit(target).path != self._path:
            return 404, None
        if method != "GET":
            return 405, None
        callback = urljoin(self._redirect_uri, target)
        if self._state is not None and not same_secret(_only(callback, "state"), self._state):
            return 400, None  # another authorization's redirect, or none at all
        return 200, callback


def _answer(sock: socket.socket, status: int, seconds: float) -> None:
    """A short page for `status`; what the peer does with it is its affair."""
    if status == 200:
        text = "Authorization is complete; you can close this tab."
    elif status == 400:
        text = "This is not the redirect of the authorization in progress; it was ignored."
    else:
        text = _REASONS[status] + "."
    page = f"<!doctype html><title>Authorization</title><p>{text}</p>".encode()
    allow = "Allow: GET\r\n" if status == 405 else ""
    head = (f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: text/html; charset=utf-8\r\n"
            f"Content-Length: {len(page)}\r\nConnection: close\r\n{allow}\r\n").encode("latin-1")
    try:
        sock.settimeout(max(0.001, min(seconds, 1.0)))  # a peer that reads nothing holds it no longer
        sock.sendall(head + page)
    except OSError:
        pass


class PasteRedirect:
    """Notebooks and terminals without a usable browser: show the URL, then
    ask for the address the browser ended on after approving (the page at
    `redirect_uri` need not load; its address bar holds the code).

    `show` displays the URL (default: print), `ask` reads the pasted URL
    (default: `input`); both run on the calling thread.

    Example::

        oauth = OAuth(redirect=PasteRedirect())
        client = mcp_sync.connect(url, auth=oauth)   # prints a link, waits for the paste

    Raises `ValueError` for a redirect URI that is not HTTPS or loopback
    HTTP, not absolute, or has a fragment.

    Attributes:
        show (Callable[[str], None]): Shows the authorization URL to the
            person (default: print it on stdout).
        ask (Callable[[str], str]): Asks for the pasted address, given the
            prompt (default: `input`).
    """

    def __init__(
        self,
        redirect_uri: str = "http://localhost:8976/callback",
        *,
        show: Callable[[str], None] | None = None,
        ask: Callable[[str], str] | None = None,
    ) -> None:
        self._redirect_uri = check_redirect_uri(redirect_uri)
        self.show = show or (lambda url: print(f"Open this URL and approve access:\n{url}", flush=True))
        self.ask = ask or input

    @property
    def redirect_uri(self) -> str:
        """The redirect URI given (default
        ``http://localhost:8976/callback``); nothing needs to listen there."""
        return self._redirect_uri

    def authorize(self, authorization_url: str) -> str:
        """`show` the URL, then `ask` for the address the browser ended on,
        and return it. Pasting only its query (``?code=...`` or
        ``code=...``) works too. Raises `AuthorizationRequired` when nothing
        is pasted (an empty answer, end of input, or Ctrl-C).

        Args:
            authorization_url: The authorization server's URL to show.

        Returns:
            The full callback URL (built from a pasted query alone too).

        Raises:
            AuthorizationRequired: Nothing was pasted.
        """
        self.show(authorization_url)
        try:
            pasted = self.ask("Paste the address your browser was sent to: ").strip()
        except (EOFError, KeyboardInterrupt):
            raise AuthorizationRequired("authorization was not completed: nothing was pasted") from None
        if not pasted:
            raise AuthorizationRequired("authorization was not completed: nothing was pasted")
        if pasted.startswith(("?", "code=")):
            pasted = self._redirect_uri + ("" if pasted.startswith("?") else "?") + pasted
        return pasted

    def __repr__(self) -> str:
        return f"PasteRedirect({self._redirect_uri!r})"


class HeadlessRedirect:
    """No person: request the authorization URL and read the redirect from
    the `Location` header, without following it. For authorization servers
    that approve at once (test servers, pre-consented automation).

    `timeout` bounds the whole request (connecting, the answer's head and
    the little of its body that is read), not each socket read.

    Example::

        oauth = OAuth(redirect=HeadlessRedirect())

    Raises `ValueError` for a redirect URI that is not HTTPS or loopback
    HTTP, not absolute, or has a fragment.

    Attributes:
        timeout (float): The most the authorization request may take in
            all, in seconds (default 30).
        verify (bool | str): TLS verification for that request: True (the
            default: that of the network path the `OAuth` provider hands
            over), False, or a CA bundle path, which wins over the network
            path's.
    """

    def __init__(
        self,
        redirect_uri: str = "http://localhost:3000/callback",
        *,
        timeout: float = 30.0,
        verify: bool | str = True,
        session: requests.Session | None = None,
    ) -> None:
        self._redirect_uri = check_redirect_uri(redirect_uri)
        self.timeout = timeout
        self.verify = verify
        self._session = session
        self._network: NetworkSettings | None = None

    def use_network(self, network: NetworkSettings) -> None:
        """Request the authorization URL on this network path (the `OAuth`
        provider hands over its transport's): its proxy and TLS settings,
        except a `verify=` given here.

        Args:
            network: The transport's network settings.
        """
        if self.verify is not True:
            network = attrs.evolve(network, verify=self.verify, cert=network.cert)
        self._network = network

    @property
    def redirect_uri(self) -> str:
        """The redirect URI given (default
        ``http://localhost:3000/callback``); nothing needs to listen there."""
        return self._redirect_uri

    def authorize(self, authorization_url: str) -> str:
        """GET `authorization_url` and return the URL its redirect points to
        (the `Location` header, resolved against it). Raises
        `AuthorizationRequired` when the answer is no redirect (a person
        must approve), `AuthorizationError` when the request fails.

        Args:
            authorization_url: The authorization server's URL to request.

        Returns:
            The URL the redirect points to.

        Raises:
            AuthorizationRequired: The answer is no redirect.
            AuthorizationError: The request fails.
        """
        # `timeout` is a total for the request and the body is read only
        # as far as the preview needs: a page that trickles or never ends
        # (or a small gzip bomb) cannot hold the flow or fill memory.
        answer = fetch("GET", authorization_url, timeout=self.timeout, verify=self.verify,
                       max_bytes=_PREVIEW_BYTES, truncate=True, session=self._session, network=self._network,
                       headers={"Accept": "text/html, */*"}, label="the authorization request")
        location = answer.headers.get("location")
        if answer.status not in (301, 302, 303, 307, 308) or not location:
            text = answer.body.decode("utf-8", "replace")
            preview = html.unescape(text)[:200] if text else ""
            raise AuthorizationRequired(
                f"the authorization server answered HTTP {answer.status} without a redirect; "
                f"a person must authorize (use LoopbackRedirect or PasteRedirect){': ' + preview if preview else ''}"
            )
        return urljoin(authorization_url, location)

    def __repr__(self) -> str:
        return f"HeadlessRedirect({self._redirect_uri!r})"
