"""Servers that ask back: a handler's questions to the client, in both eras.

A handler asks the client for input through its context (`ctx.elicit(...)`,
`ctx.sample(...)`, `ctx.list_roots()`, ...); its session calls `ask()`,
which carries the question over the wire, as a server-to-client JSON-RPC
request in the `initialize` era or as an `InputRequiredResult` (multi
round-trip requests, MRTR) in the stateless era. This module holds:

* the exceptions a handler may see (`ClientError`, `MissingClientCapability`,
  `RequestCancelled`) and the private `InputRequired` unwind of MRTR;
* which client capability a question needs (`missing_capabilities`);
* checks of the client's answers (`check_answer`);
* the sealed, HMAC-protected `requestState` token (`StateSealer`);
* `ask()` and `input_required()`: the session side. Initialize era: each
  question becomes an `Outgoing` request ("s-1", "s-2", ... per session),
  registered in the session's `_outgoing` table (under its lock) and the
  call's `pending`, sent related to the call, then awaited on its event;
  the session's `_client_response` sets the event. A timeout or a cancel
  withdraws what is unanswered with `notifications/cancelled`. Stateless
  era: answers come from the retried request (`Mrtr`); an unanswered
  question unwinds the handler with `InputRequired`, which the session
  turns into the result of `input_required()`.

It does not route messages nor run handlers: it uses the session's
`_deliver` and tables, and never holds a session lock while waiting.

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
import threading
import time
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ._protocol import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    META_CLIENT_CAPABILITIES,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    JSONDict,
    RequestId,
    RpcError,
)

if TYPE_CHECKING:
    from ._context import Call
    from ._session import ServerSession

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
    # ASCII, escaped: a lone surrogate (which JSON may carry, escaped) has no UTF-8.
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode("ascii")


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


# --------------------------------------------------------------------------
# Asking from a session (`ServerSession._ask`): both eras


class Outgoing:
    """One server-to-client request waiting for the client's response (initialize era)."""

    __slots__ = ("id", "method", "done", "response")

    def __init__(self, request_id: str, method: str) -> None:
        self.id = request_id
        self.method = method
        self.done = threading.Event()
        self.response: JSONDict | None = None


class Mrtr:
    """Stateless era: what a retried request brought back (answers by input
    key, from `requestState` and `inputResponses`) and what this run used."""

    __slots__ = ("digest", "answers", "used")

    def __init__(self, digest: str, answers: dict[str, tuple[str, JSONDict]]) -> None:
        self.digest = digest
        self.answers = answers
        self.used: dict[str, tuple[str, JSONDict]] = {}


def ask(session: ServerSession, call: Call, keys: list[str], questions: list[JSONDict], timeout: float | None) -> list[JSONDict]:
    if call.stateless:
        return _ask_stateless(call, keys, questions)
    return _ask_legacy(session, call, questions, timeout)


def _ask_stateless(call: Call, keys: list[str], questions: list[JSONDict]) -> list[JSONDict]:
    for question in questions:
        if question["method"] not in ASKABLE_METHODS:
            raise ValueError(f"{question['method']} cannot be asked in a stateless request; "
                             f"use one of {', '.join(sorted(ASKABLE_METHODS))}")
    missing = missing_capabilities(call.meta.get(META_CLIENT_CAPABILITIES), questions)
    if missing:
        raise RpcError(MISSING_REQUIRED_CLIENT_CAPABILITY,
                       f"Missing required client capability: {describe_capabilities(missing)}",
                       {"requiredCapabilities": missing})
    mrtr = call.mrtr
    if mrtr is None:
        raise RuntimeError(f"{call.method} cannot ask the client for input")
    results: list[JSONDict] = []
    wanted: dict[str, JSONDict] = {}
    for key, question in zip(keys, questions):
        found = mrtr.answers.get(key)
        if found is not None and found[0] == question["method"]:
            mrtr.used[key] = found
            results.append(found[1])
        else:
            wanted[key] = question
    if wanted:
        raise InputRequired(wanted)
    return results


def input_required(sealer: StateSealer, call: Call, asked: InputRequired) -> JSONDict:
    """The InputRequiredResult of a stateless run that asked what its request did not answer."""
    mrtr = call.mrtr
    if mrtr is None:
        raise RpcError(INTERNAL_ERROR, f"Internal error: {call.method} cannot ask the client for input")
    pending = {key: question["method"] for key, question in asked.requests.items()}
    return {
        "resultType": "input_required",
        "inputRequests": asked.requests,
        "requestState": sealer.seal(call.method, mrtr.digest, mrtr.used, pending),
    }


def _shape_legacy(call: Call, question: JSONDict) -> JSONDict:
    """A question in the form of the session's revision."""
    params = question.get("params")
    if question["method"] != "elicitation/create" or params is None:
        return question
    params = dict(params)
    mode = params.get("mode", "form")
    if call.version == "2025-06-18":
        if mode == "url":
            raise MissingClientCapability(
                {"elicitation": {"url": {}}},
                "URL mode elicitation needs protocol revision 2025-11-25 or later; this session speaks 2025-06-18",
            )
        params.pop("mode", None)  # 2025-06-18 elicitation has no mode
    elif mode == "url":
        params.setdefault("elicitationId", uuid.uuid4().hex)
    return {**question, "params": params}


def _ask_legacy(session: ServerSession, call: Call, questions: list[JSONDict], timeout: float | None) -> list[JSONDict]:
    for question in questions:
        if question["method"] not in ASKABLE_METHODS and question["method"] != "ping":
            raise ValueError(f"{question['method']} is not a request a server sends to a client")
    missing = missing_capabilities(session._client_capabilities, questions)
    if missing:
        raise MissingClientCapability(
            missing, f"The client did not declare the {describe_capabilities(missing)} capability")
    shaped = [_shape_legacy(call, question) for question in questions]
    registered: list[Outgoing] = []
    sent: list[Outgoing] = []
    try:
        for question in shaped:
            outgoing = Outgoing(f"s-{next(session._server_ids)}", question["method"])
            with session._lock:
                if session._closed:
                    raise RequestCancelled("the session is closed")
                session._outgoing[outgoing.id] = outgoing
            registered.append(outgoing)
            with call.pending_lock:
                call.pending[outgoing.id] = outgoing
            message: JSONDict = {"jsonrpc": "2.0", "id": outgoing.id, "method": question["method"]}
            if "params" in question:
                message["params"] = question["params"]
            with call.lock:
                live = not call.done and not call.cancelled.is_set()
                if live:
                    session._deliver(message, call.id)
            if not live:
                _withdraw(session, call, sent, "the request was cancelled", None)
                raise RequestCancelled(f"request {call.id!r} was cancelled")
            sent.append(outgoing)
        deadline = None if timeout is None else time.monotonic() + max(0.0, float(timeout))
        for outgoing in sent:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            answered = outgoing.done.wait(remaining)
            if call.cancelled.is_set():
                _withdraw(session, call, sent, "the request was cancelled", None)
                raise RequestCancelled(f"request {call.id!r} was cancelled while waiting for the client")
            if not answered:
                if _withdraw(session, call, [outgoing], f"no answer within {timeout:g} seconds", call.id):
                    _withdraw(session, call, sent, "a related request timed out", call.id)
                    raise TimeoutError(f"the client did not answer {outgoing.method} within {timeout:g} seconds")
                outgoing.done.wait()  # the answer is arriving right now
    finally:
        with session._lock:
            for outgoing in registered:
                session._outgoing.pop(outgoing.id, None)
        with call.pending_lock:
            for outgoing in registered:
                call.pending.pop(outgoing.id, None)
    results: list[JSONDict] = []
    for outgoing in sent:
        response = outgoing.response
        assert response is not None
        if "error" in response:
            error = response["error"]
            if not isinstance(error, dict):
                error = {}
            code = error.get("code")
            raise ClientError(
                code if isinstance(code, int) and not isinstance(code, bool) else INTERNAL_ERROR,
                str(error.get("message", "the client answered with an error")),
                error.get("data"),
            )
        result = response.get("result")
        why = check_answer(outgoing.method, result)
        if why is not None:
            raise ClientError(INVALID_PARAMS, f"The client's answer to {outgoing.method} is not a valid "
                              f"{RESULT_NAMES.get(outgoing.method, 'result')}: {why}")
        assert isinstance(result, dict)
        results.append(result)
    return results


def _withdraw(session: ServerSession, call: Call, sent: list[Outgoing], reason: str, related: RequestId | None) -> bool:
    """Send `notifications/cancelled` for each of `sent` still unanswered
    (and forget it); True if any was. `related` None: the message belongs
    to no request (the one it served was cancelled, its stream is gone)."""
    withdrawn: list[Outgoing] = []
    with session._lock:
        for outgoing in sent:
            if session._outgoing.pop(outgoing.id, None) is not None:
                withdrawn.append(outgoing)
    for outgoing in withdrawn:
        message: JSONDict = {"jsonrpc": "2.0", "method": "notifications/cancelled",
                             "params": {"requestId": outgoing.id, "reason": reason}}
        if related is None:
            session._deliver(message, None)
            continue
        with call.lock:
            if not call.done and not call.cancelled.is_set():
                session._deliver(message, related)
    return bool(withdrawn)

# -- subscriptions/listen (stateless era) ---------------------------------
