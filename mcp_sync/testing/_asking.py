"""Servers that ask back: the era-independent pieces.

A handler asks the client for input through its context (`ctx.elicit(...)`,
`ctx.sample(...)`, `ctx.list_roots()`, ...); `core.py` carries the question
over the wire, as a server-to-client JSON-RPC request in the `initialize` era
or as an `InputRequiredResult` (multi round-trip requests, MRTR) in the
stateless era. This module holds what both need:

* the exceptions a handler may see (`ClientError`, `MissingClientCapability`,
  `RequestCancelled`) and the private `InputRequired` unwind of MRTR;
* which client capability a question needs (`missing_capabilities`);
* checks of the client's answers (`check_answer`);
* the sealed, HMAC-protected `requestState` token (`StateSealer`).

requestState format: `<payload>.<mac>`, both unpadded base64url; `payload`
is compact JSON, `mac` its HMAC-SHA256 under a per-`Server` random key. The
payload is `{"v": 1, "m": method, "d": digest, "exp": unix_time, "a":
{key: {"m": method, "r": result}}, "p": {key: method}}`: `d` is the SHA-256
of the canonical JSON of the request's salient params (tools/call and
prompts/get: name and arguments; resources/read: uri), `a` the answers the
handler already used, `p` the questions of the last round (whose answers
arrive in `inputResponses`). It is integrity-protected, not encrypted.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Mapping
from typing import Any

JSONDict = dict[str, Any]

#: The requests a server may put in `inputRequests` (2026-07-28 MRTR).
ASKABLE_METHODS = frozenset({"elicitation/create", "sampling/createMessage", "roots/list"})
#: Client requests that may be answered with an InputRequiredResult.
MRTR_METHODS = frozenset({"tools/call", "prompts/get", "resources/read"})
STATE_VERSION = 1


class ClientError(Exception):
    """A question to the client failed: the client answered with a JSON-RPC
    error (initialize era) or with a result that does not fit the request.
    A tool that lets it escape gets an `isError` result with its message."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


class MissingClientCapability(Exception):
    """Initialize era: the client did not declare, in `initialize`, the
    capability a question needs (`required` lists it, as in the stateless
    era's -32021 `data.requiredCapabilities`). Stateless requests answer
    with the -32021 JSON-RPC error instead."""

    def __init__(self, required: JSONDict, message: str) -> None:
        super().__init__(message)
        self.required = required


class RequestCancelled(Exception):
    """The request being served was cancelled (or its session closed) while
    the handler waited for the client's answer. Its response is dropped."""


class InputRequired(BaseException):
    """Stateless era: unwinds a handler that asked a question whose answer
    is not in the request; the session answers with an InputRequiredResult.
    A BaseException, so a handler's `except Exception` does not swallow it."""

    def __init__(self, requests: dict[str, JSONDict]) -> None:
        super().__init__(sorted(requests))
        self.requests = requests


# --------------------------------------------------------------------------
# Capabilities


def _merge(into: JSONDict, extra: JSONDict) -> None:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def _declared(caps: Mapping[str, Any], name: str) -> JSONDict | None:
    value = caps.get(name)
    return value if isinstance(value, dict) else None


def capability_for(caps: Mapping[str, Any], method: str, params: Mapping[str, Any]) -> JSONDict:
    """The part of `requiredCapabilities` that `caps` lacks for one question (empty: none)."""
    if method == "elicitation/create":
        mode = params.get("mode", "form")
        elicitation = _declared(caps, "elicitation")
        if mode == "url":
            return {} if elicitation is not None and "url" in elicitation else {"elicitation": {"url": {}}}
        # An empty elicitation object declares form mode (backwards compatibility).
        if elicitation is not None and ("form" in elicitation or not elicitation):
            return {}
        return {"elicitation": {"form": {}}}
    if method == "sampling/createMessage":
        sampling = _declared(caps, "sampling")
        if sampling is None:
            needed: JSONDict = {"sampling": {}}
            sampling = {}
        else:
            needed = {}
        if ("tools" in params or "toolChoice" in params) and "tools" not in sampling:
            _merge(needed, {"sampling": {"tools": {}}})
        if params.get("includeContext") in ("thisServer", "allServers") and "context" not in sampling:
            _merge(needed, {"sampling": {"context": {}}})
        return needed
    if method == "roots/list":
        return {} if _declared(caps, "roots") is not None else {"roots": {}}
    return {}


def missing_capabilities(caps: Any, requests: list[JSONDict]) -> JSONDict:
    """Merged `requiredCapabilities` the client lacks for all `requests`."""
    declared = caps if isinstance(caps, dict) else {}
    missing: JSONDict = {}
    for request in requests:
        _merge(missing, capability_for(declared, request["method"], request.get("params") or {}))
    return missing


def describe_capabilities(required: JSONDict) -> str:
    parts: list[str] = []
    for name, sub in sorted(required.items()):
        if isinstance(sub, dict) and sub:
            parts.extend(f"{name}.{key}" for key in sorted(sub))
        else:
            parts.append(name)
    return ", ".join(parts)


# --------------------------------------------------------------------------
# Answers


def check_answer(method: str, result: Any) -> str | None:
    """Why `result` is not a valid answer to `method` (None when it is)."""
    if not isinstance(result, dict):
        return "it is not an object"
    if method == "elicitation/create":
        if result.get("action") not in ("accept", "decline", "cancel"):
            return 'its action must be "accept", "decline" or "cancel"'
        if "content" in result and not isinstance(result["content"], dict):
            return "its content must be an object"
    elif method == "sampling/createMessage":
        if result.get("role") not in ("user", "assistant"):
            return 'its role must be "user" or "assistant"'
        if not isinstance(result.get("content"), (dict, list)):
            return "its content must be a content block or a list of them"
        if not isinstance(result.get("model"), str):
            return "its model must be a string"
    elif method == "roots/list":
        roots = result.get("roots")
        if not isinstance(roots, list) or not all(isinstance(r, dict) and isinstance(r.get("uri"), str) for r in roots):
            return "its roots must be a list of objects with a string uri"
    return None


RESULT_NAMES = {
    "elicitation/create": "ElicitResult",
    "sampling/createMessage": "CreateMessageResult",
    "roots/list": "ListRootsResult",
    "ping": "EmptyResult",
}


# --------------------------------------------------------------------------
# requestState


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64decode(text: str) -> bytes:
    if not text or any(c not in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_" for c in text):
        raise ValueError("not unpadded base64url")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise ValueError("not unpadded base64url") from None


def canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def request_digest(method: str, params: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the salient params of an MRTR-capable request."""
    if method == "resources/read":
        salient: Any = {"uri": params.get("uri")}
    else:
        arguments = params.get("arguments")
        salient = {"name": params.get("name"), "arguments": {} if arguments is None else arguments}
    return hashlib.sha256(method.encode("utf-8") + b"\n" + canonical(salient)).hexdigest()


class StateSealer:
    """Seals and opens `requestState` tokens with one HMAC key (see the module docstring)."""

    def __init__(self, key: bytes | None = None, ttl: float = 600.0) -> None:
        if key is not None and (not isinstance(key, bytes) or len(key) < 16):
            raise ValueError("request_state_key must be at least 16 bytes")
        if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or ttl < 0:
            raise ValueError("request_state_ttl must be a non-negative number of seconds")
        self._key = key if key is not None else secrets.token_bytes(32)
        self.ttl = float(ttl)

    def _mac(self, payload: bytes) -> bytes:
        return hmac.new(self._key, payload, hashlib.sha256).digest()

    def seal(self, method: str, digest: str, answers: Mapping[str, tuple[str, JSONDict]],
             pending: Mapping[str, str]) -> str:
        payload = canonical({
            "v": STATE_VERSION,
            "m": method,
            "d": digest,
            "exp": time.time() + self.ttl,
            "a": {key: {"m": m, "r": r} for key, (m, r) in answers.items()},
            "p": dict(pending),
        })
        return f"{_b64encode(payload)}.{_b64encode(self._mac(payload))}"

    def open(self, token: str, method: str, digest: str) -> tuple[dict[str, tuple[str, JSONDict]], dict[str, str]]:
        """The answers and pending questions sealed in `token`; ValueError
        (with the reason) when it was not sealed here, was altered, belongs
        to another request, or has expired."""
        encoded, sep, mac = token.partition(".")
        if not sep:
            raise ValueError("malformed")
        payload = _b64decode(encoded)
        if not hmac.compare_digest(self._mac(payload), _b64decode(mac)):
            raise ValueError("integrity check failed")
        try:
            state = json.loads(payload)
        except ValueError:
            raise ValueError("malformed") from None
        if not isinstance(state, dict) or state.get("v") != STATE_VERSION:
            raise ValueError("unknown format")
        if state.get("m") != method or state.get("d") != digest:
            raise ValueError("it belongs to another request")
        expires = state.get("exp")
        if not isinstance(expires, (int, float)) or time.time() >= expires:
            raise ValueError("expired")
        raw_answers, raw_pending = state.get("a"), state.get("p")
        if not isinstance(raw_answers, dict) or not isinstance(raw_pending, dict):
            raise ValueError("malformed")
        answers: dict[str, tuple[str, JSONDict]] = {}
        for key, entry in raw_answers.items():
            if not isinstance(entry, dict) or not isinstance(entry.get("m"), str) or not isinstance(entry.get("r"), dict):
                raise ValueError("malformed")
            answers[key] = (entry["m"], entry["r"])
        pending: dict[str, str] = {}
        for key, asked in raw_pending.items():
            if not isinstance(asked, str):
                raise ValueError("malformed")
            pending[key] = asked
        return answers, pending
