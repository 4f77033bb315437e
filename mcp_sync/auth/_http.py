"""HTTP to authorization servers and metadata endpoints, size-limited.

Every answer is read with a byte limit (a metadata document or token
response has no reason to be large, and an endless one must not exhaust
memory), redirects are never followed (RFC 8414 and RFC 9728 documents
are fetched from exactly the URL the spec names), and a body must be a
JSON object to count as one.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

import attrs
import requests

from ..errors import AuthorizationError

log = logging.getLogger("mcp_sync.auth")

#: Metadata documents and token responses larger than this are refused.
DEFAULT_MAX_BYTES = 256 * 1024


@attrs.frozen
class Answer:
    """One HTTP answer: status, lower-cased headers, and the body parsed as
    a JSON object (None when it is not one)."""

    status: int
    headers: Mapping[str, str]
    json: dict[str, Any] | None
    url: str

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


class AuthHTTP:
    """A `requests.Session` wrapper for the OAuth flow's own requests."""

    def __init__(
        self,
        *,
        timeout: float = 30.0,
        verify: bool | str = True,
        max_bytes: int = DEFAULT_MAX_BYTES,
        session: requests.Session | None = None,
    ) -> None:
        self.timeout = timeout
        self.verify = verify
        self.max_bytes = max_bytes
        # Without a session of the user's, each request gets its own and
        # closes it: the flow talks to an authorization server a few times
        # an hour, and a kept-alive socket would outlive the client.
        self._session = session

    def close(self) -> None:
        """Nothing is kept open between requests; kept for symmetry."""

    def get(self, url: str, *, headers: Mapping[str, str] | None = None) -> Answer:
        return self._request("GET", url, headers=headers)

    def post(
        self,
        url: str,
        *,
        form: Mapping[str, str] | None = None,
        json_body: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Answer:
        return self._request("POST", url, form=form, json_body=json_body, headers=headers)

    def _request(
        self,
        method: str,
        url: str,
        *,
        form: Mapping[str, str] | None = None,
        json_body: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Answer:
        sent = {"Accept": "application/json", **(headers or {})}
        session = self._session or requests.Session()
        try:
            with session.request(
                method, url, data=dict(form) if form is not None else None,
                json=dict(json_body) if json_body is not None else None, headers=sent,
                timeout=self.timeout, verify=self.verify, allow_redirects=False, stream=True,
            ) as response:
                body = self._read(response, url)
                answer_headers = {k.lower(): v for k, v in response.headers.items()}
                status = response.status_code
        except requests.RequestException as exc:
            # The exception text can hold the URL but never a form value.
            raise AuthorizationError(f"{method} {url} failed: {type(exc).__name__}") from None
        finally:
            if self._session is None:
                session.close()
        parsed: Any = None
        if body:
            try:
                parsed = json.loads(body)
            except (ValueError, RecursionError):
                # RecursionError: deeply nested arrays ("[[[[...") fit well
                # within the size limit and exhaust the parser's stack.
                parsed = None
        log.debug("%s %s -> %s", method, url, status)
        return Answer(status, answer_headers, parsed if isinstance(parsed, dict) else None, url)

    def _read(self, response: requests.Response, url: str) -> bytes:
        declared = response.headers.get("content-length")
        # ASCII digits only: "²".isdigit() is True, but int("²") raises ValueError.
        if declared is not None and declared.isascii() and declared.isdigit() and int(declared) > self.max_bytes:
            raise AuthorizationError(f"the answer from {url} is larger than {self.max_bytes} bytes")
        chunks: list[bytes] = []
        size = 0
        for chunk in response.iter_content(65536):
            size += len(chunk)
            if size > self.max_bytes:
                raise AuthorizationError(f"the answer from {url} is larger than {self.max_bytes} bytes")
            chunks.append(chunk)
        return b"".join(chunks)
