"""Protocol revisions: one `Dialect` per revision, and the rules for settling one.

Everything version-specific is decided by asking a dialect; no other module
compares version strings. The settling rules follow the spec's stdio
backward-compatibility section (2026-07-28 `basic/transports/stdio.mdx`):
probe with `server/discover`; a `DiscoverResult` or a recognised stateless-era
error means a stateless-era server, anything else (or silence) an
initialize-era one (the spec says "modern" and "legacy").

Nothing here does IO: the engine sends the probe and hands the answer to
`read_probe_answer`, which says what to do next.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from ..errors import InvalidResult, VersionNegotiationError
from . import codes
from .meta import META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_LOG_LEVEL, META_PROTOCOL_VERSION

STATELESS_VERSIONS: tuple[str, ...] = ("2026-07-28",)
#: Newest first: negotiation offers the first one allowed, and servers of
#: SDK releases still in wide use answer with 2025-03-26 or 2024-11-05.
INITIALIZE_VERSIONS: tuple[str, ...] = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
SUPPORTED_VERSIONS: tuple[str, ...] = STATELESS_VERSIONS + INITIALIZE_VERSIONS
"""Every protocol version this client speaks, newest first: ``2026-07-28``
(stateless, with `server/discover`), then the initialize-era
``2025-11-25``, ``2025-06-18``, ``2025-03-26`` and ``2024-11-05``. A
client may settle on any of them unless `connect(protocol=)` names fewer."""

LOG_LEVELS: tuple[str, ...] = (
    "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency",
)


_STATELESS_ONLY = frozenset({"server/discover", "subscriptions/listen"})
_INITIALIZE_ONLY = frozenset({
    "initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe",
})
_RESULT_TYPES = frozenset({"complete", "input_required"})
# Client capabilities that appeared after 2024-11-05, with the first revision
# that has them (a server of an older one could misread or reject them).
_CAPABILITY_SINCE = {"elicitation": "2025-06-18"}
# `MCP-Protocol-Version` on every HTTP request after initialize came with 2025-06-18.
_VERSION_HEADER_SINCE = "2025-06-18"
# Structured tool output (`outputSchema`, `structuredContent`) came with 2025-06-18.
_STRUCTURED_OUTPUT_SINCE = "2025-06-18"
# `title` in `Implementation` (clientInfo, serverInfo) came with 2025-06-18.
_IMPLEMENTATION_TITLE_SINCE = "2025-06-18"
# Extensions in the `initialize` handshake's capabilities came with 2025-11-25.
_INITIALIZE_EXTENSIONS_SINCE = "2025-11-25"
#: The input kinds (`inputs.KINDS`) a server of an older revision cannot ask
#: for, with the first revision that has them: elicitation (kind "form") came
#: with 2025-06-18, its url mode with 2025-11-25; sampling and roots were in
#: 2024-11-05 already.
INPUT_KIND_SINCE: Mapping[str, str] = {"form": "2025-06-18", "url": "2025-11-25"}
# The content blocks a sampling answer (`CreateMessageResult.content`) may
# be, by type, with the revision whose schema first lists each: audio came
# with 2025-03-26, tool use and tool results with 2025-11-25 (as did a list
# of blocks, `_SAMPLING_LIST_SINCE`). A type not listed is in no revision.
_SAMPLING_BLOCK_SINCE = {"text": "2024-11-05", "image": "2024-11-05", "audio": "2025-03-26",
                         "tool_use": "2025-11-25", "tool_result": "2025-11-25"}
_SAMPLING_LIST_SINCE = "2025-11-25"
# A multi-select answer (a list of strings in an elicitation's `content`) came with 2025-11-25.
_ELICIT_LIST_SINCE = "2025-11-25"


class NotInRevision(ValueError):
    """An answer to a server's request that its revision has no way to
    carry (a list of sampling blocks on 2025-06-18, say); the message says
    what, and from which revision on it could be sent."""


class Era(str, enum.Enum):
    """The protocol era a revision belongs to: the one name for the idea in
    code and docs. `STATELESS` is 2026-07-28 (per-request `_meta`,
    `server/discover`); `INITIALIZE` is every revision with the `initialize`
    handshake and a session (2025-11-25 back to 2024-11-05). The spec's own
    words for them are "modern" and "legacy".

    Example::

        >>> dialect_for("2025-06-18").era
        <Era.INITIALIZE: 'initialize'>
    """

    STATELESS = "stateless"
    INITIALIZE = "initialize"

    def __str__(self) -> str:
        return self.value


@attrs.frozen
class Dialect:
    """What one protocol revision requires of the client.

    Example::

        >>> dialect_for("2026-07-28").stateless
        True
        >>> dialect_for("2025-06-18").defines("ping")
        True
        >>> dialect_for("2025-03-26").protocol_version_header
        False
    """

    version: str
    stateless: bool
    #: The methods this revision does not define (`defines()` as a set: the
    #: call path tests membership without a call).
    undefined: frozenset[str] = attrs.field(init=False, eq=False, repr=False)
    #: The methods whose requests may not be cancelled by notification
    #: (`may_cancel()` as a set).
    uncancellable: frozenset[str] = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "undefined", _INITIALIZE_ONLY if self.stateless else _STATELESS_ONLY)
        object.__setattr__(self, "uncancellable", frozenset() if self.stateless else frozenset({"initialize"}))

    @property
    def era(self) -> Era:
        """The era of this revision (`Era.STATELESS` or `Era.INITIALIZE`)."""
        return Era.STATELESS if self.stateless else Era.INITIALIZE

    @property
    def initialize_extensions(self) -> bool:
        """Whether this revision's `initialize` capabilities carry
        `extensions` (2025-11-25 on; older revisions keep their own shapes).

        Example::

            >>> dialect_for("2025-06-18").initialize_extensions
            False
        """
        return not self.stateless and self._has_since(_INITIALIZE_EXTENSIONS_SINCE)

    @property
    def core_tasks(self) -> bool:
        """Whether the revision has task-augmented requests in its core
        protocol (`params.task`, `tasks/get`, `tasks/result`, `tasks/list`,
        `tasks/cancel`): 2025-11-25 only; 2026-07-28 moved tasks into the
        `io.modelcontextprotocol/tasks` extension.

        Example::

            >>> dialect_for("2025-11-25").core_tasks, dialect_for("2026-07-28").core_tasks
            (True, False)
        """
        return self.version == "2025-11-25"

    @property
    def protocol_version_header(self) -> bool:
        """Whether HTTP requests after the handshake carry `MCP-Protocol-Version`
        (2025-06-18 on; older servers never heard of it)."""
        return self._has_since(_VERSION_HEADER_SINCE)

    @property
    def structured_output(self) -> bool:
        """Whether tools have `outputSchema` and results `structuredContent`
        (2025-06-18 on): before, a tool's output is never checked against a
        schema, whatever an out-of-spec server lists."""
        return self._has_since(_STRUCTURED_OUTPUT_SINCE)

    def client_info(self, info: Mapping[str, Any]) -> dict[str, Any]:
        """`clientInfo` as this revision defines `Implementation`: before
        2025-06-18 only `name` and `version` (a stricter server of 2024-11-05
        or 2025-03-26 may refuse the rest).

        Example::

            >>> dialect_for("2024-11-05").client_info({"name": "c", "version": "1", "title": "C"})
            {'name': 'c', 'version': '1'}
        """
        if self._has_since(_IMPLEMENTATION_TITLE_SINCE):
            return dict(info)
        return {k: v for k, v in info.items() if k in ("name", "version")}

    def declarable_capabilities(self, capabilities: Mapping[str, Any]) -> dict[str, Any]:
        """`capabilities` without those this revision does not define, so a
        client never declares what the server's revision lacks.

        Example::

            >>> dialect_for("2025-03-26").declarable_capabilities({"elicitation": {}, "roots": {}})
            {'roots': {}}
        """
        return {k: v for k, v in capabilities.items() if self._has_since(_CAPABILITY_SINCE.get(k))}

    def has_input(self, kind: str) -> bool:
        """Whether a server of this revision can ask for input of `kind`
        (``"form"``, ``"url"``, ``"sampling"``, ``"roots"``): elicitation
        came with 2025-06-18, its url mode with 2025-11-25.

        Example::

            >>> dialect_for("2025-03-26").has_input("form"), dialect_for("2025-06-18").has_input("url")
            (False, False)
        """
        return self._has_since(INPUT_KIND_SINCE.get(kind))

    def input_answer(self, kind: str, answer: Mapping[str, Any]) -> dict[str, Any]:
        """A handler's answer (already checked by `inputs.check_response`,
        written in the newest shape) as this revision's schema has it, for
        a server of this revision. Shaped where nothing is lost (a list of
        one sampling block becomes that block, the only form before
        2025-11-25); `NotInRevision` saying what cannot be carried
        otherwise: several blocks, or a block type, the revision does not
        have (audio before 2025-03-26, tool use before 2025-11-25), a
        multi-select answer before 2025-11-25, any input of a kind the
        revision does not have (`has_input`).

        Example::

            >>> dialect_for("2025-06-18").input_answer("sampling", {
            ...     "role": "assistant", "model": "m", "content": [{"type": "text", "text": "hi"}]})
            {'role': 'assistant', 'model': 'm', 'content': {'type': 'text', 'text': 'hi'}}
        """
        if not self.has_input(kind):
            raise NotInRevision(f"protocol {self.version} has no {kind} input (it came with "
                                f"{INPUT_KIND_SINCE[kind]})")
        shaped = dict(answer)
        if kind == "sampling":
            content = shaped.get("content")
            blocks = content if isinstance(content, list) else [content]
            for block in blocks:
                block_type = block.get("type") if isinstance(block, Mapping) else None
                since = _SAMPLING_BLOCK_SINCE.get(block_type) if isinstance(block_type, str) else None
                if since is None:
                    raise NotInRevision(f"a {block_type!r} content block is in no revision's sampling answer "
                                        f"(they carry {', '.join(_SAMPLING_BLOCK_SINCE)})")
                if not self._has_since(since):
                    raise NotInRevision(f"protocol {self.version} has no {block_type!r} content in a sampling "
                                        f"answer (it came with {since})")
            if isinstance(content, list) and not self._has_since(_SAMPLING_LIST_SINCE):
                if len(content) != 1:
                    raise NotInRevision(f"protocol {self.version} carries exactly one content block in a "
                                        f"sampling answer, not a list of {len(content)} (lists came with "
                                        f"{_SAMPLING_LIST_SINCE})")
                # The one block says all the list said: no loss.
                shaped["content"] = content[0]
        elif kind == "form" and not self._has_since(_ELICIT_LIST_SINCE):
            content = shaped.get("content")
            listed = sorted(name for name, value in content.items()
                            if isinstance(value, list)) if isinstance(content, Mapping) else []
            if listed:
                raise NotInRevision(f"protocol {self.version} has no multi-select answers (a list) in an "
                                    f"elicitation's content, given for {', '.join(map(repr, listed))} (they "
                                    f"came with {_ELICIT_LIST_SINCE})")
        return shaped

    def _has_since(self, first: str | None) -> bool:
        # Revisions are ISO dates, so string order is release order.
        return first is None or self.version >= first

    def defines(self, method: str) -> bool:
        """Whether this revision defines `method` (unknown methods pass: they
        may belong to an extension, and the server decides)."""
        return method not in self.undefined

    def request_meta(
        self,
        capabilities: Mapping[str, Any],
        client_info: Mapping[str, Any],
        log_level: str | None,
    ) -> dict[str, Any]:
        """The `_meta` entries every request of this revision carries."""
        if not self.stateless:
            return {}
        meta: dict[str, Any] = {
            META_PROTOCOL_VERSION: self.version,
            META_CLIENT_CAPABILITIES: capabilities,
            META_CLIENT_INFO: client_info,
        }
        if log_level is not None:
            meta[META_LOG_LEVEL] = log_level
        return meta

    def may_cancel(self, method: str) -> bool:
        """Whether a request of `method` may be cancelled with a notification.

        The initialize-era lifecycle forbids cancelling `initialize`. (A
        task-augmented request, one with `params.task`, is not cancelled by
        notification either: see `Pipeline`.)
        """
        return method not in self.uncancellable

    def result_type(self, result: Mapping[str, Any]) -> str:
        """The result's `resultType`: absent means complete; unknown is invalid."""
        value = result.get("resultType", "complete")
        if value not in _RESULT_TYPES:
            raise InvalidResult(f"unknown resultType {value!r}")
        return str(value)


_DIALECTS = {v: Dialect(v, v in STATELESS_VERSIONS) for v in SUPPORTED_VERSIONS}


def dialect_for(version: str) -> Dialect:
    try:
        return _DIALECTS[version]
    except KeyError:
        raise ValueError(f"unsupported protocol version {version!r}; this client speaks {', '.join(SUPPORTED_VERSIONS)}") from None


def allowed_versions(protocol: str | Iterable[str] | None) -> tuple[str, ...]:
    """Normalise the `protocol=` option into a tuple of versions, newest first."""
    if protocol is None:
        return SUPPORTED_VERSIONS
    wanted = [protocol] if isinstance(protocol, str) else list(protocol)
    if not wanted:
        raise ValueError("protocol= names no version")
    for version in wanted:
        if not isinstance(version, str) or version not in _DIALECTS:
            raise ValueError(
                f"unsupported protocol version {version!r}; this client speaks {', '.join(SUPPORTED_VERSIONS)}"
            )
    return tuple(v for v in SUPPORTED_VERSIONS if v in wanted)


# -- settling the version ---------------------------------------------------------


@attrs.frozen
class UseStateless:
    """A stateless-era server: speak `version` from now on."""

    version: str
    discover_result: Mapping[str, Any] | None


@attrs.frozen
class Reprobe:
    """A stateless-era server that refused our version: probe again at `version`."""

    version: str


@attrs.frozen
class FallBack:
    """Not a stateless-era server: send `initialize`. `reason` says why."""

    reason: str
    #: No answer came within the probe timeout (not an answer that said so).
    silent: bool = False
    #: The HTTP status the probe was refused with, when it was.
    http_status: int | None = None


ProbeVerdict = UseStateless | Reprobe | FallBack


def _recognised_modern_error(error: Mapping[str, Any]) -> bool:
    return codes.is_stateless_era_code(error.get("code"))


def read_probe_answer(message: Mapping[str, Any] | None, allowed: Sequence[str]) -> ProbeVerdict:
    """Decide what a `server/discover` probe's answer means.

    `message` is the whole JSON-RPC response, or None when none came in time.
    Raises `VersionNegotiationError` for a stateless-era server with no version in
    common: the spec says never to fall back then.
    """
    if message is None:
        return FallBack("no answer to server/discover within the probe timeout", silent=True)
    stateless_allowed = [v for v in allowed if v in STATELESS_VERSIONS]
    error = message.get("error")
    if isinstance(error, Mapping):
        if error.get("code") == codes.UNSUPPORTED_PROTOCOL_VERSION:
            data = error.get("data")
            supported = data.get("supported") if isinstance(data, Mapping) else None
            offered = [v for v in supported if isinstance(v, str)] if isinstance(supported, list) else []
            for version in stateless_allowed:
                if version in offered:
                    return Reprobe(version)
            raise VersionNegotiationError(
                f"the server supports protocol versions {offered}, none of which this client allows "
                f"({list(allowed)}): {_what_to_do(offered)}",
                requested=list(allowed), supported=offered,
            )
        if _recognised_modern_error(error):
            raise VersionNegotiationError(
                f"server/discover failed with a stateless-era error {error.get('code')}: {error.get('message')}",
                requested=list(allowed),
            )
        return FallBack(f"server/discover answered error {error.get('code')}: {error.get('message')}")
    result = message.get("result")
    if not isinstance(result, Mapping) or not isinstance(result.get("supportedVersions"), list):
        return FallBack("server/discover answered without supportedVersions")
    offered = [v for v in result["supportedVersions"] if isinstance(v, str)]
    for version in stateless_allowed:
        if version in offered:
            return UseStateless(version, result)
    if any(v in offered for v in allowed if v in INITIALIZE_VERSIONS):
        return FallBack("the server's only shared versions are initialize-era ones")
    raise VersionNegotiationError(
        f"the server supports protocol versions {offered}, none of which this client allows "
        f"({list(allowed)}): {_what_to_do(offered)}",
        requested=list(allowed), supported=offered,
    )


def _what_to_do(offered: Sequence[str]) -> str:
    """What a user can do when the server's versions and the allowed ones
    meet nowhere: name a revision both speak (an initialize-era pin goes
    straight to `initialize`), or, when the server speaks none this client
    knows, say that."""
    known = [v for v in SUPPORTED_VERSIONS if v in offered]
    if known:
        return f"connect with protocol={known[0]!r}, a revision both speak"
    return (f"this client speaks only {', '.join(SUPPORTED_VERSIONS)}: upgrade mcp_sync, or use a server "
            f"that speaks one of them")


def check_negotiated(result: Mapping[str, Any], requested: str, allowed: Sequence[str]) -> str:
    """The version an `initialize` result settled on, if the client allows it.
    The error says why not, and what to do next."""
    negotiated = result.get("protocolVersion")
    if isinstance(negotiated, str) and negotiated in allowed and negotiated not in STATELESS_VERSIONS:
        return negotiated
    if not isinstance(negotiated, str):
        why = ("which is not a protocol version (a string such as '2025-11-25'): the server breaks the "
               "protocol; tell its authors")
    elif negotiated in STATELESS_VERSIONS:
        why = (f"a revision without initialize (the server breaks the protocol); connect with "
               f"protocol={negotiated!r} to settle it with server/discover instead")
    elif negotiated in _DIALECTS:
        why = (f"which this client was not allowed to use (requested {requested}, allowed {list(allowed)}); "
               f"allow it with protocol={negotiated!r}, or protocol=None to negotiate any")
    else:
        why = f"a revision unknown here; {_what_to_do(())}"
    raise VersionNegotiationError(
        f"the server answered initialize with protocol version {negotiated!r}, {why}",
        requested=requested, negotiated=negotiated if isinstance(negotiated, str) else None,
    )
