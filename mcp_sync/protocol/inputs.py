"""Requests for input from the server: what kind each is, and whether a
request and its answer are well formed.

The same four kinds arrive two ways: inside an `input_required` result
(2026-07-28, `inputRequests`) and as server-to-client JSON-RPC requests
(the initialize era). Either way a request is `{"method", "params"}`:

    elicitation/create, mode "form" (or no mode)  -> kind "form"
    elicitation/create, mode "url"                -> kind "url"
    sampling/createMessage                        -> kind "sampling"
    roots/list                                    -> kind "roots"

Nothing here runs a handler; the client does, on the calling thread, after
these checks pass.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from . import jsonrpc
from .schemas import SchemaCache

KINDS = ("form", "url", "sampling", "roots")
_ACTIONS = ("accept", "decline", "cancel")
_ROLES = ("user", "assistant")


class BadInput(ValueError):
    """A request or an answer that breaks the protocol; the message says how."""


def kind_of(method: Any, params: Any) -> str | None:
    """The handler kind for a request, or None when it is not an input request."""
    if method == "elicitation/create":
        mode = params.get("mode", "form") if isinstance(params, Mapping) else "form"
        return mode if mode in ("form", "url") else None
    if method == "sampling/createMessage":
        return "sampling"
    if method == "roots/list":
        return "roots"
    return None


def check_request(kind: str, params: Any) -> None:
    """Raise `BadInput` when `params` lack what a request of `kind` needs."""
    if kind == "roots":
        if params is not None and not isinstance(params, Mapping):
            raise BadInput("roots/list params must be an object")
        return
    if not isinstance(params, Mapping):
        raise BadInput(f"a {kind} request needs params")
    if kind in ("form", "url") and not isinstance(params.get("message"), str):
        raise BadInput(f"a {kind} elicitation needs a message")
    if kind == "form" and not isinstance(params.get("requestedSchema"), Mapping):
        raise BadInput("a form elicitation needs a requestedSchema object")
    if kind == "url" and not isinstance(params.get("url"), str):
        raise BadInput("a url elicitation needs a url")
    if kind == "sampling":
        if not isinstance(params.get("messages"), list):
            raise BadInput("a sampling request needs a messages list")
        max_tokens = params.get("maxTokens")
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
            raise BadInput("a sampling request needs an integer maxTokens")


def check_response(kind: str, params: Mapping[str, Any] | None, response: Any, schemas: SchemaCache) -> dict[str, Any]:
    """The handler's answer as a dict, or `BadInput` naming what is wrong
    (an answer JSON cannot carry, NaN say, too: it could not be sent)."""
    answer = _check_shape(kind, params, response, schemas)
    problem = jsonrpc.unencodable(answer)
    if problem is not None:
        raise BadInput(f"the answer cannot be sent as JSON: {problem}")
    return answer


def _check_shape(kind: str, params: Mapping[str, Any] | None, response: Any, schemas: SchemaCache) -> dict[str, Any]:
    if not isinstance(response, Mapping):
        raise BadInput(f"the answer must be an object (a dict), not {type(response).__name__}")
    answer = dict(response)
    if kind in ("form", "url"):
        action = answer.get("action")
        if action not in _ACTIONS:
            raise BadInput(f"action must be one of {', '.join(_ACTIONS)}, not {action!r}")
        content = answer.get("content")
        if kind == "form" and action == "accept":
            if not isinstance(content, Mapping):
                raise BadInput("an accepted form needs its content (an object)")
            schema = (params or {}).get("requestedSchema")
            if isinstance(schema, Mapping):
                problems = schemas.errors(schema, dict(content))
                if problems:
                    raise BadInput(f"the content does not match requestedSchema: {problems[0]}")
        elif content is not None and not isinstance(content, Mapping):
            raise BadInput("content must be an object")
        return answer
    if kind == "sampling":
        if answer.get("role") not in _ROLES:
            raise BadInput(f"role must be one of {', '.join(_ROLES)}, not {answer.get('role')!r}")
        if not isinstance(answer.get("model"), str):
            raise BadInput("model (a string) is required")
        content = answer.get("content")
        blocks = content if isinstance(content, list) else [content]
        if not blocks or not all(isinstance(b, Mapping) and isinstance(b.get("type"), str) for b in blocks):
            raise BadInput("content must be a content block (or a list of them), each with a type")
        stop = answer.get("stopReason")
        if stop is not None and not isinstance(stop, str):
            raise BadInput("stopReason must be a string")
        return answer
    if kind == "roots":
        roots = answer.get("roots")
        if not isinstance(roots, list):
            raise BadInput("roots (a list) is required")
        for root in roots:
            if not isinstance(root, Mapping) or not isinstance(root.get("uri"), str):
                raise BadInput("every root needs a uri string")
            if not root["uri"].startswith("file://"):
                raise BadInput(f"a root uri must start with file://, not {root['uri']!r}")
            if "name" in root and not isinstance(root["name"], str):
                raise BadInput("a root name must be a string")
        return answer
    raise BadInput(f"unknown kind {kind!r}")


def capabilities_for(kinds: Iterable[str]) -> dict[str, Any]:
    """The client capabilities that installed handlers of these kinds declare."""
    caps: dict[str, Any] = {}
    kinds = set(kinds)
    modes: dict[str, Any] = {k: {} for k in ("form", "url") if k in kinds}
    if modes:
        caps["elicitation"] = modes
    if "sampling" in kinds:
        caps["sampling"] = {}
    if "roots" in kinds:
        caps["roots"] = {"listChanged": False}
    return caps


def merge_capabilities(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """`base` with `extra` merged in, objects merged key by key (`extra` wins)."""
    merged: dict[str, Any] = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge_capabilities(merged[key], value)
        else:
            merged[key] = value
    return merged


def declared(kind: str, capabilities: Mapping[str, Any]) -> bool:
    """Whether `capabilities` declare support for requests of `kind`."""
    if kind in ("form", "url"):
        elicitation = capabilities.get("elicitation")
        if not isinstance(elicitation, Mapping):
            return False
        # 2025-06-18 declares elicitation without modes, which means form.
        return kind in elicitation or (kind == "form" and not elicitation)
    return isinstance(capabilities.get(kind), Mapping)
