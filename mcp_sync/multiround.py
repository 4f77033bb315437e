"""The multi round-trip loop of 2026-07-28 (`input_required` results).

`answer_rounds()` sends a request, and while the server answers
`resultType: "input_required"`, answers its `inputRequests` with the input
handlers and sends the request again with `inputResponses` and the
`requestState` exactly as received. It runs entirely on the calling thread:
handlers are user code. Everything it adds to a request lives in this one
call's params, so nothing leaks into any other request.

Order of work in a round, so that nothing half-done reaches the server:
every request is matched to a handler and its params checked first; only
when all pass do the handlers run, one at a time, in the sort order of the
request keys; every answer is checked before any is sent.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any, Callable

from .errors import (
    InputHandlerError,
    InputRequired,
    InputRoundsExceeded,
    InvalidResult,
    MalformedInputRequest,
    NoInputHandler,
    RequestTimeout,
    UrlElicitationRequired,
)
from .protocol import inputs
from .protocol.schemas import SchemaCache
from .waiting import expired, remaining

#: The requests a server may answer with `input_required`.
METHODS = frozenset({"tools/call", "prompts/get", "resources/read"})
#: How long to wait before re-sending a result that carries only `requestState`.
STATE_ONLY_DELAY = 0.25

Handler = Callable[[dict[str, Any]], Any]


def is_input_required(result: Mapping[str, Any]) -> bool:
    return result.get("resultType") == "input_required"


def answer_rounds(
    send: Callable[..., dict[str, Any]],
    method: str,
    params: Mapping[str, Any],
    *,
    handlers: Mapping[str, Handler],
    answer_input: bool,
    max_rounds: int,
    input_responses: Mapping[str, Any] | None,
    request_state: str | None,
    schemas: SchemaCache,
    max_total_timeout: float | None,
    started: float | None = None,
    first: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Send `params` with `send` until the result is complete; see the module.
    `first` is the first round's result when it was sent before this loop
    began (the fast lane's first round: `Pipeline.call_tool_plain`), and
    `started` when it was sent. With `max_total_timeout`, each round after
    the first is sent as `send(params, left)`: its wait is cut to the
    `left` seconds of the whole call's bound."""
    if started is None:
        started = time.monotonic()
    deadline = None if max_total_timeout is None else started + max_total_timeout
    responses = dict(input_responses) if input_responses is not None else None
    state = request_state
    answered = 0
    while True:
        round_params = dict(params)
        if responses is not None:
            round_params["inputResponses"] = responses
        if state is not None:
            round_params["requestState"] = state
        if first is not None:
            result, first = first, None
        elif not answered or (left := remaining(deadline)) is None:
            result = send(round_params)  # (the first round waits as the call says, for ever with None)
        else:
            try:
                result = send(round_params, left)
            except RequestTimeout:
                _within_total(method, deadline, max_total_timeout)  # the bound's error, when it ended the round
                raise
        if not is_input_required(result):
            return result
        if method not in METHODS:
            raise InvalidResult(f"{method}: the server answered input_required, which only "
                                f"{', '.join(sorted(METHODS))} may")
        if not answer_input:
            raise InputRequired(f"{method}: the server needs input (answer_input=False)", result=result)
        if answered >= max_rounds:
            raise InputRoundsExceeded(
                f"{method}: the server still asks for input after {answered} rounds (max_input_rounds)",
                result=result, rounds=answered,
            )
        _within_total(method, deadline, max_total_timeout)  # no person is asked past it
        requests, state = _read(method, result)
        answered += 1
        if not requests:
            # Only state: the server is working; ask again shortly (never
            # pausing past the bound: the pause is part of the call).
            left = remaining(deadline)
            threading.Event().wait(STATE_ONLY_DELAY if left is None else min(STATE_ONLY_DELAY, left))
            responses = None
        else:
            responses = answer_requests(method, result, requests, handlers, schemas)
        # The handlers' time (a person typing) and the pause count against
        # the bound of the whole call: no round goes out once it has passed.
        _within_total(method, deadline, max_total_timeout)


def _within_total(method: str, deadline: float | None, max_total_timeout: float | None) -> None:
    """Raise `RequestTimeout` once `deadline`, the end of the whole call's
    `max_total_timeout` (None: no bound), has passed."""
    if expired(deadline):
        raise RequestTimeout(f"{method}: maximum total timeout exceeded ({max_total_timeout:g} s)",
                             method=method, max_total_timeout=max_total_timeout)


def _read(method: str, result: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    requests = result.get("inputRequests")
    state = result.get("requestState")
    if requests is not None and not isinstance(requests, Mapping):
        raise MalformedInputRequest(f"{method}: inputRequests is not an object", result=result)
    if state is not None and not isinstance(state, str):
        raise MalformedInputRequest(f"{method}: requestState is not a string", result=result)
    if not requests and state is None:
        raise MalformedInputRequest(f"{method}: input_required with nothing to answer and no requestState",
                                    result=result)
    return dict(requests or {}), state


def answer_requests(
    method: str, result: Mapping[str, Any], requests: Mapping[str, Any],
    handlers: Mapping[str, Handler], schemas: SchemaCache,
) -> dict[str, Any]:
    plan: list[tuple[str, str, dict[str, Any]]] = []
    missing: set[str] = set()
    for key in sorted(requests):
        request = requests[key]
        if not isinstance(request, Mapping):
            raise MalformedInputRequest(f"{method}: input request {key!r} is not an object", result=result)
        kind = inputs.kind_of(request.get("method"), request.get("params"))
        if kind is None:
            raise MalformedInputRequest(
                f"{method}: input request {key!r} has method {request.get('method')!r}, which is not an input request",
                result=result)
        try:
            inputs.check_request(kind, request.get("params"))
        except inputs.BadInput as exc:
            raise MalformedInputRequest(f"{method}: input request {key!r}: {exc}", result=result) from None
        if kind not in handlers:
            missing.add(kind)
        plan.append((key, kind, dict(request.get("params") or {})))
    if missing:
        raise NoInputHandler(
            f"{method}: the server asks for {', '.join(sorted(missing))} input and no handler is installed for it",
            result=result, missing=sorted(missing),
        )
    answers: dict[str, Any] = {}
    for key, kind, params in plan:
        answers[key] = run_handler(kind, handlers[kind], params, schemas, result)
    return answers



def run_handler(kind: str, handler: Handler, params: dict[str, Any], schemas: SchemaCache,
                result: Mapping[str, Any]) -> dict[str, Any]:
    """Run one handler and check its answer; `InputHandlerError` if either fails."""
    try:
        answer = handler(params)
    except Exception as exc:
        raise InputHandlerError(f"the {kind} handler failed: {exc!r}", result=result, handler=kind,
                                problem=repr(exc)) from exc
    try:
        return inputs.check_response(kind, params, answer, schemas)
    except inputs.BadInput as exc:
        raise InputHandlerError(f"the {kind} handler answered something invalid: {exc}", result=result,
                                handler=kind, problem=str(exc)) from None



def retry_after_url_elicitations(
    refused: UrlElicitationRequired, send: Callable[[], dict[str, Any]], handlers: Mapping[str, Handler],
    schemas: SchemaCache, *, answer_input: bool, started: float, max_total_timeout: float | None,
) -> dict[str, Any]:
    """What to do when the server refused a request with -32042 (URL
    elicitation required, 2025-11-25): run the ``"url"`` handler for each
    elicitation it lists and, when every one was accepted, `send()` the
    request once more and return its result.

    The server refused the request before running it, so sending it again
    is safe for any request. `refused` is raised again when there is no
    ``"url"`` handler, `answer_input` is false, or the handler declined or
    cancelled one; a second refusal propagates too (one retry, so a server
    that keeps asking cannot hold the caller in a loop), and not at all
    once `max_total_timeout` has passed since the call `started` (the
    person's time included, as in the multi-round loop). Runs on the
    calling thread, like every handler the client runs for a call."""
    handler = handlers.get("url")
    elicitations = refused.elicitations
    if (handler is None or not answer_input or not elicitations
            or not all(run_handler("url", handler, elicitation, schemas, {}).get("action") == "accept"
                       for elicitation in elicitations)):  # (the first that is not accepted ends it)
        try:
            raise refused
        finally:
            # The traceback holds this frame: it must not hold the refusal
            # in turn (a reference cycle per refused call).
            del refused
    method = refused.method
    del refused  # (as above, for whatever `send()` raises)
    if max_total_timeout is not None and expired(started + max_total_timeout):
        raise RequestTimeout(f"{method or 'the request'}: maximum total timeout exceeded "
                             f"({max_total_timeout:g} s) before it could be sent again",
                             method=method, max_total_timeout=max_total_timeout)
    return send()
