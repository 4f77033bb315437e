"""Request `_meta`: merging the layers, and W3C trace context checks.

A request's `_meta` is built from four layers, later ones winning:
the dialect's per-request fields, `_meta` already in the caller's params,
the caller's `meta=` option, then `trace_context=`. The progress token is
the engine's to set and cannot be overridden by any layer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# -- the keys the specification gives `_meta` (defined here only) -------------------------

META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
"""2026-07-28: the protocol version of a request (and the HTTP header's source)."""
META_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
"""2026-07-28: the capabilities the client declares, per request."""
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
"""2026-07-28: the client's name and version, per request."""
META_LOG_LEVEL = "io.modelcontextprotocol/logLevel"
"""2026-07-28: the log level the client asks for, per request."""
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
"""2026-07-28: the server's name and version, in a `server/discover` result."""
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
"""2026-07-28: the subscription a notification belongs to (`subscriptions/listen`)."""
META_RELATED_TASK = "io.modelcontextprotocol/related-task"
"""2025-11-25: the task a message belongs to, as ``{"taskId": ...}`` (the
client's answer to `tasks/result` for a task it runs carries it)."""

_TRACEPARENT = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$")
_TRACESTATE_KEY = re.compile(
    r"^(?:[a-z][a-z0-9_\-*/]{0,255}|[a-z0-9][a-z0-9_\-*/]{0,240}@[a-z][a-z0-9_\-*/]{0,13})$"
)
_TRACESTATE_VALUE = re.compile(r"^[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]$")


def validate_trace_context(trace_context: Mapping[str, Any]) -> dict[str, str]:
    """Check a W3C trace context and return the `_meta` entries it gives.

    Accepts `traceparent` (required), `tracestate` and `baggage`; raises
    `ValueError` naming the first problem.

    Example::

        >>> validate_trace_context({"traceparent": "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"})
        {'traceparent': '00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01'}
    """
    if not isinstance(trace_context, Mapping):
        raise TypeError("trace_context must be a mapping with 'traceparent'")
    unknown = set(trace_context) - {"traceparent", "tracestate", "baggage"}
    if unknown:
        raise ValueError(f"trace_context has unknown keys: {sorted(unknown)}")
    parent = trace_context.get("traceparent")
    if not isinstance(parent, str):
        raise ValueError("trace_context needs a 'traceparent' string")
    match = _TRACEPARENT.match(parent)
    if not match:
        raise ValueError(f"invalid traceparent {parent!r}")
    version, trace_id, parent_id, _flags, rest = match.groups()
    if version == "ff" or (version == "00" and rest):
        raise ValueError(f"invalid traceparent version in {parent!r}")
    if trace_id == "0" * 32 or parent_id == "0" * 16:
        raise ValueError(f"traceparent {parent!r} has an all-zero id")
    out = {"traceparent": parent}
    state = trace_context.get("tracestate")
    if state is not None:
        if not isinstance(state, str):
            raise ValueError("tracestate must be a string")
        members = [m.strip() for m in state.split(",") if m.strip()]
        if len(members) > 32:
            raise ValueError("tracestate has more than 32 members")
        keys = set()
        for member in members:
            key, sep, value = member.partition("=")
            if not sep or not _TRACESTATE_KEY.match(key) or not _TRACESTATE_VALUE.match(value):
                raise ValueError(f"invalid tracestate member {member!r}")
            if key in keys:
                raise ValueError(f"tracestate repeats key {key!r}")
            keys.add(key)
        out["tracestate"] = state
    baggage = trace_context.get("baggage")
    if baggage is not None:
        if not isinstance(baggage, str) or any(ord(c) < 0x20 or ord(c) > 0x7E for c in baggage):
            raise ValueError("baggage must be a printable ASCII string")
        out["baggage"] = baggage
    return out


def merge_meta(
    dialect_meta: Mapping[str, Any],
    params_meta: Mapping[str, Any] | None,
    option_meta: Mapping[str, Any] | None,
    trace_meta: Mapping[str, str] | None,
    progress_token: int | str | None,
) -> dict[str, Any]:
    """One `_meta` from the four layers, later layers winning; the progress
    token last of all, because the engine routes by it."""
    meta = dict(dialect_meta)
    for layer in (params_meta, option_meta, trace_meta):
        if layer:
            meta.update(layer)
    if progress_token is not None:
        meta["progressToken"] = progress_token
    return meta
