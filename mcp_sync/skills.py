"""The Skills extension (`io.modelcontextprotocol/skills`, SEP-2640): `client.skills`.

What it owns: listing skills (`skills/list`, every page), getting one entry
(`skills/get`), reading a skill's files (`resources/read`) with every check
the extension asks of a host, and listing a directory
(`resources/directory/read`, only when the server declared
`directoryRead: true`). What it must not know: transports, eras beyond
how the extension is declared, or how requests are retried or cached (all
requests go through `Client.request`, so `skills/list` and `skills/get`
share the client's cache by their `ttlMs`/`cacheScope`).

How it works. An entry (`Skill`) is a manifest: the SKILL.md URI, its
frontmatter, and every file with its size and `sha256:` digest (or
`"dynamic"`). Nothing is fetched before it is asked for: not on connect,
not on listing. The entry last obtained for a skill (by `list()` or
`get()`) is *held*, keyed by the server and the URI together (what is held
follows the latest listing: a skill it no longer lists is let go, and a
read of it gets its entry again), and every read is checked against it:
a file it does not list is refused before anything is sent, the content's
size and digest must match, and the frontmatter of SKILL.md (parsed
without YAML aliases, within size and depth bounds) must equal the
entry's field by field. Content that fails a check is never returned:
`SkillVerificationError` says which check.
The extension's limits (512 files, 16 MiB per skill) are checked from the
entry before any read, and for a dynamic skill over what has been read.

Thread-safe: entries are immutable and the table of held entries is
guarded by one lock, never held while a request is on the wire.
"""

from __future__ import annotations

import builtins
import datetime
import functools
import importlib
import logging
import re
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import unquote

import attrs

from .errors import (
    ExtensionNotDeclared,
    InvalidResult,
    SkillVerificationError,
)
# The identifier lives with the handshake, which declares it (see negotiation.py).
from .negotiation import SKILLS_EXTENSION
from .options import check_options
from .protocol import pagination
from .types import Resource

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from .options import RequestOptions
    from .pipeline import Requester

__all__ = ["EXTENSION", "MAX_FILES", "MAX_TOTAL_SIZE", "Skill", "SkillContent", "SkillFile", "Skills"]

log = logging.getLogger("mcp_sync.skills")

#: The extension's identifier, as declared in capabilities.
EXTENSION = SKILLS_EXTENSION
#: Per-skill limits every host must accept (SEP-2640 "Limits"); larger
#: skills are declined before anything is read.
MAX_FILES = 512
MAX_TOTAL_SIZE = 16 * 1024 * 1024
#: The manifest's file name: the skill's URI ends with it.
MANIFEST = "SKILL.md"
#: SKILL.md's frontmatter, as a server sends it, is parsed only within these
#: bounds (characters; nesting levels of the YAML nodes): PyYAML's pure-Python
#: parser costs about a second for 64K characters, and some scalars cost
#: more than linear time in their length (a sexagesimal int such as
#: ``1:0:0:...`` is quadratic). Real frontmatter is a few hundred
#: characters (a name, a description of at most 1024, some metadata).
MAX_FRONTMATTER = 64 * 1024
MAX_FRONTMATTER_DEPTH = 64
#: Entries `get()` obtained that the latest `list()` did not list are held
#: up to this many, the least recently got let go first (a read of one let
#: go gets its entry again); the listed entries are all held.
MAX_UNLISTED = 256
_DYNAMIC = "dynamic"
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_FRONTMATTER = re.compile(r"^---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|$)", re.DOTALL)


@attrs.frozen
class SkillFile:
    """One file of a skill as its entry lists it.

    Attributes:
        uri: The file's resource URI.
        path: Its path inside the skill (``"SKILL.md"``, ``"references/FORMS.md"``).
        digest: ``"sha256:<64 lowercase hex>"`` of its raw bytes.
        size: Its length in bytes.

    Example::

        for file in skill.files or ():
            print(file.path, file.size)
    """

    uri: str
    path: str
    digest: str
    size: int


@attrs.frozen(eq=True, hash=False)
class Skill:
    """A skill's entry from `skills/list` or `skills/get`: what can be read
    and how each read is checked. Nothing of the skill has been fetched.

    A skill is identified by its server and its URI together (`key`): two
    servers may serve the same URI, and those are two unrelated skills.
    Entries compare equal field by field; use `key` (not the entry, which
    is unhashable) as a dict key.

    Attributes:
        server: The client's identity for the server that serves it.
        uri: The URI of its SKILL.md.
        frontmatter: SKILL.md's YAML frontmatter as the entry gives it.
        files: Every file of the skill with its digest and size, SKILL.md
            included; None for a dynamic skill (`dynamic`).
        raw: The wire entry as received.

    Example::

        skill = client.skills.get("skill://pdf-processing/SKILL.md")
        print(skill.name, skill.description, [f.path for f in skill.files or ()])
    """

    server: str
    uri: str
    frontmatter: Mapping[str, Any]
    files: tuple[SkillFile, ...] | None
    raw: Mapping[str, Any] = attrs.field(eq=False, repr=False)

    @property
    def key(self) -> tuple[str, str]:
        """(server, uri): what identifies the skill, e.g. as a dict key."""
        return (self.server, self.uri)

    @property
    def name(self) -> str:
        """The frontmatter's `name`."""
        return str(self.frontmatter["name"])

    @property
    def description(self) -> str:
        """The frontmatter's `description`."""
        return str(self.frontmatter["description"])

    @property
    def root(self) -> str:
        """The skill's directory URI: `uri` without ``/SKILL.md``."""
        return self.uri[: -len(MANIFEST) - 1]

    @property
    def dynamic(self) -> bool:
        """Whether the server generates the skill's content (no file list,
        no digests: reads are not content-checked, only SKILL.md's
        frontmatter and the size limit are)."""
        return self.files is None

    @property
    def total_size(self) -> int | None:
        """The sum of the listed files' sizes; None for a dynamic skill."""
        return None if self.files is None else sum(f.size for f in self.files)

    @property
    def within_limits(self) -> bool:
        """Whether the entry is within the extension's limits (512 files,
        16 MiB); a skill beyond them is listed but not read."""
        return self.files is None or (len(self.files) <= MAX_FILES and sum(f.size for f in self.files) <= MAX_TOTAL_SIZE)

    def file(self, path: str) -> SkillFile | None:
        """The listed file at `path` (relative, or its full URI), or None.

        Args:
            path: The file's path inside the skill, or its full URI.

        Returns:
            Its entry in `files`, or None when the entry lists no such file.
        """
        uri = path if "://" in path else f"{self.root}/{path}"
        for listed in self.files or ():
            if listed.uri == uri:
                return listed
        return None


@attrs.frozen
class SkillContent:
    """A file of a skill that passed every check of its entry.

    Attributes:
        skill: The entry it was checked against.
        uri: The file's resource URI.
        path: Its path inside the skill.
        data: Its raw bytes.
        mime_type: Its media type as the server said, or None.
        verified: True when size and digest were checked (always, except
            for a dynamic skill, whose entry has neither).

    Example::

        content = client.skills.read("skill://pdf-processing/SKILL.md")
        print(content.text)
    """

    skill: Skill
    uri: str
    path: str
    data: bytes = attrs.field(repr=lambda data: f"<{len(data)} bytes>")
    mime_type: str | None
    verified: bool

    @property
    def text(self) -> str:
        """The content decoded as UTF-8 (undecodable bytes replaced)."""
        return self.data.decode("utf-8", errors="replace")


class Skills:
    """The Skills extension of one client: `client.skills`.

    Every method raises `ExtensionNotDeclared` (nothing sent) when the server
    did not declare the extension; the keyword options are those of
    `Client.request` (`timeout`, `meta`, `bypass_cache`, ...).

    Example::

        for skill in client.skills.list():
            print(skill.name, "-", skill.description)
        manual = client.skills.read(skill.uri)            # SKILL.md, checked
        forms = client.skills.read(skill.uri, "references/FORMS.md")
    """

    def __init__(self, client: Requester) -> None:
        # The request pipeline, never the client: a client dropped unclosed
        # must still be collectable (its finalizer closes it).
        self._client = client
        self._lock = threading.Lock()
        # Invariant: the entries of the latest complete `list()` (their keys
        # in `_listed`) plus at most MAX_UNLISTED more that `get()` obtained,
        # in the order they were obtained: what is held follows the server's
        # latest listing, so a server that renames its skills cannot grow it.
        self._held: dict[tuple[str, str], Skill] = {}
        self._listed: frozenset[tuple[str, str]] = frozenset()
        # Dynamic skills: bytes read so far, per file, for the size limit.
        self._dynamic_read: dict[tuple[str, str], dict[str, int]] = {}

    # -- the calls ------------------------------------------------------------------------

    def list(self, **options: Unpack[RequestOptions]) -> list[Skill]:
        """Every skill the server lists, following `nextCursor` (at most the
        client's `max_pages`). Reads nothing of the skills themselves. An
        entry the extension calls invalid (no file list, a bad digest, a
        file outside the skill) is left out and logged.

        Example::

            names = [skill.name for skill in client.skills.list()]

        Returns:
            The valid entries, in the server's order; reads are checked
            against them from now on. Entries held before that this
            listing leaves out are let go (a read of such a skill gets its
            entry first).

        Raises:
            ExtensionNotDeclared: The server did not declare the extension.
            InvalidResult: A page without a `skills` array.
            PaginationError: A repeated cursor, or more than `max_pages`.
        """
        client = self._connected()
        _declaration(client)
        skills: list[Skill] = []

        def fetch(cursor: str | None) -> tuple[list[Any], str | None]:
            result = _request(client, "skills/list", {} if cursor is None else {"cursor": cursor}, options)
            entries = result.get("skills")
            if not isinstance(entries, list):
                raise InvalidResult("skills/list: the result has no 'skills' array")
            return entries, pagination.next_cursor("skills/list", result)

        for entries in pagination.pages("skills/list", fetch, client.options.limits.max_pages):
            for raw in entries:
                try:
                    skills.append(_entry(client.cache_server, raw))
                except InvalidResult as exc:
                    log.warning("skills/list: an entry left out: %s", exc)
        with self._lock:
            # A complete listing (a failed page raised above, holding
            # nothing) replaces what was held: an entry it leaves out, listed
            # before or only got, is let go with its dynamic read count, and
            # a later read gets it again. A kept entry keeps its count.
            kept = {skill.key: self._held[skill.key] for skill in skills if skill.key in self._held}
            self._held = {}
            self._listed = frozenset(skill.key for skill in skills)
            for key in set(self._dynamic_read) - self._listed:
                del self._dynamic_read[key]
            for skill in skills:
                self._hold(skill, kept.get(skill.key))
        return skills

    def get(self, uri: str, **options: Unpack[RequestOptions]) -> Skill:
        """The current entry of the skill whose SKILL.md is at `uri`
        (`skills/get`), listed or not; it becomes the entry reads are
        checked against. A URI the server serves no skill at raises
        `InvalidParams`.

        Example::

            skill = client.skills.get("skill://git-workflow/SKILL.md")

        Args:
            uri: The URI of the skill's SKILL.md.

        Returns:
            The skill's current entry.

        Raises:
            ExtensionNotDeclared: The server did not declare the extension.
            InvalidParams: The server serves no skill at `uri`.
            InvalidResult: An invalid entry, or one for another URI.
        """
        _check_uri(uri)
        client = self._connected()
        _declaration(client)
        result = _request(client, "skills/get", {"uri": uri}, options)
        skill = _entry(client.cache_server, result.get("skill"))
        if skill.uri != uri:
            raise InvalidResult(f"skills/get {uri}: the server answered with the entry of {skill.uri}")
        with self._lock:
            self._hold(skill, self._held.pop(skill.key, None))  # popped: now the most recently got
            if skill.key not in self._listed:
                unlisted = [key for key in self._held if key not in self._listed]
                for key in unlisted[:max(0, len(unlisted) - MAX_UNLISTED)]:
                    del self._held[key]
                    self._dynamic_read.pop(key, None)
        return skill

    def read(self, uri: str, path: str = MANIFEST, **options: Unpack[RequestOptions]) -> SkillContent:
        """Read one file of the skill whose SKILL.md is at `uri`: `path` is
        relative to the skill's directory (default SKILL.md) or the file's
        full URI. It is checked against the skill's held entry (fetched with
        `get()` first when there is none): a file the entry does not list is
        refused before anything is sent, then size, digest and, for
        SKILL.md, the frontmatter are checked. A failed check raises
        `SkillVerificationError` and the content is never returned; call
        `get(uri)` to refresh a stale entry.

        Example::

            text = client.skills.read(skill.uri, "references/FORMS.md").text

        Args:
            uri: The URI of the skill's SKILL.md.
            path: The file, relative to the skill's directory, or its full
                URI.

        Returns:
            The file's bytes, checked against the entry.

        Raises:
            SkillVerificationError: The file is not listed, the skill is
                over the limits, or the size, digest or frontmatter fails
                its check.
            ExtensionNotDeclared: The server did not declare the extension.
            TypeError: `path` is not a non-empty string.
        """
        _check_uri(uri)
        if not isinstance(path, str) or not path:
            raise TypeError("path must be a non-empty string")
        client = self._connected()
        _declaration(client)
        with self._lock:
            skill = self._held.get((client.cache_server, uri))
        if skill is None:
            skill = self.get(uri, **options)
        file_uri, relative = _resolve(skill, path)
        listed: SkillFile | None = None
        if skill.files is not None:
            if not skill.within_limits:
                raise SkillVerificationError(
                    "limits", skill, file_uri,
                    f"{skill.uri} has {len(skill.files)} files of {skill.total_size} bytes, over the limits of "
                    f"{MAX_FILES} files and {MAX_TOTAL_SIZE} bytes per skill: it is not read")
            listed = skill.file(file_uri)
            if listed is None:
                raise SkillVerificationError(
                    "unlisted", skill, file_uri,
                    f"{file_uri} is not a file of {skill.uri} as its entry lists it; nothing was read "
                    "(call get() to refresh the entry if the skill changed)")
        manifest = file_uri == skill.uri
        yaml = _yaml(skill, file_uri) if manifest else None  # before fetching anything
        request_options = dict(options)
        result = _request(client, "resources/read", {"uri": file_uri}, request_options)
        data, mime_type = _content(result, file_uri)
        if listed is not None:
            failure = _mismatch(skill, listed, data)
            if failure is not None and client.cache is not None and not options.get("bypass_cache"):
                # A cached copy that no longer matches the entry must be
                # fetched again (the entry may have been refreshed since).
                result = _request(client, "resources/read", {"uri": file_uri},
                                  {**request_options, "bypass_cache": True})
                data, mime_type = _content(result, file_uri)
                failure = _mismatch(skill, listed, data)
            if failure is not None:
                try:
                    raise failure
                finally:
                    del failure  # its traceback holds this frame: no reference cycle through it
        else:
            self._count_dynamic(skill, file_uri, len(data))
        if yaml is not None:
            _check_frontmatter(yaml, skill, file_uri, data)
        return SkillContent(skill, file_uri, relative, data, mime_type, listed is not None)

    def read_directory(self, uri: str, **options: Unpack[RequestOptions]) -> builtins.list[Resource]:
        """The direct children of a directory resource (a skill's root such
        as ``skill://pdf-processing``, or a folder in it), every page; a
        subdirectory has `mime_type` ``"inode/directory"``. Only sent to a
        server that declared `directoryRead: true` (else
        `ExtensionNotDeclared`). A live view: a child its skill's entry does
        not list is still refused by `read()`.

        Example::

            names = [r.name for r in client.skills.read_directory("skill://pdf-processing/templates")]

        Args:
            uri: The directory resource's URI.

        Returns:
            Its direct children, every page followed.

        Raises:
            ExtensionNotDeclared: The server did not declare the extension
                or `directoryRead: true`.
            InvalidResult: A page without a `resources` array.
        """
        _check_uri(uri)
        client = self._connected()
        if _declaration(client).get("directoryRead") is not True:
            raise ExtensionNotDeclared(EXTENSION, "directoryRead",
                                       "the server did not declare directoryRead: true, so "
                                       "resources/directory/read is not sent")
        method = "resources/directory/read"

        def fetch(cursor: str | None) -> tuple[builtins.list[Resource], str | None]:
            result = _request(client, method, {"uri": uri} if cursor is None else {"uri": uri, "cursor": cursor},
                              options)
            entries = result.get("resources")
            if not isinstance(entries, list):
                raise InvalidResult(f"{method}: the result has no 'resources' array")
            return [Resource.from_wire(entry) for entry in entries], pagination.next_cursor(method, result)

        return [child for page in pagination.pages(method, fetch, client.options.limits.max_pages) for child in page]

    def held(self) -> builtins.list[Skill]:
        """The entries reads are checked against now (those `list()` and
        `get()` obtained last), without asking the server: the latest
        listing's, and at most 256 more obtained by `get()` since.

        Example::

            known = {skill.uri for skill in client.skills.held()}
        """
        with self._lock:
            return list(self._held.values())

    # -- helpers ----------------------------------------------------------------------------

    def _connected(self) -> Requester:
        return self._client

    def _hold(self, skill: Skill, old: Skill | None) -> None:
        """Under `_lock`: reads are checked against `skill` from now on
        (`old`: the entry it replaces, if any)."""
        self._held[skill.key] = skill
        if old is None or old.files != skill.files:
            self._dynamic_read.pop(skill.key, None)

    def _count_dynamic(self, skill: Skill, file_uri: str, size: int) -> None:
        """The size limit of a dynamic skill, over what was actually read."""
        with self._lock:
            sizes = self._dynamic_read.setdefault(skill.key, {})
            total = sum(sizes.values()) - sizes.get(file_uri, 0) + size
            if total > MAX_TOTAL_SIZE:
                raise SkillVerificationError(
                    "limits", skill, file_uri,
                    f"{file_uri}: reading it makes {total} bytes of the dynamic skill {skill.uri}, over the "
                    f"limit of {MAX_TOTAL_SIZE} bytes per skill; the content is not used")
            sizes[file_uri] = size


def _mismatch(skill: Skill, listed: SkillFile, data: bytes) -> SkillVerificationError | None:
    """The size or digest check `data` fails against its entry, or None."""
    if len(data) != listed.size:
        return SkillVerificationError(
            "size", skill, listed.uri,
            f"{listed.uri}: {len(data)} bytes read, the entry says {listed.size}; the content is not used "
            "(get(uri, bypass_cache=True) refreshes a stale entry)")
    import hashlib  # here: it loads OpenSSL, a cost at import for every program

    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    if digest != listed.digest:
        return SkillVerificationError(
            "digest", skill, listed.uri,
            f"{listed.uri}: content digest {digest} differs from the entry's {listed.digest}; the content is "
            "not used (get(uri, bypass_cache=True) refreshes a stale entry)")
    return None


def _check_uri(uri: Any) -> None:
    if not isinstance(uri, str) or not uri:
        raise TypeError("uri must be a non-empty string")


def _declaration(client: Requester) -> Mapping[str, Any]:
    """The server's settings of the extension; `ExtensionNotDeclared` when
    it did not declare it (then no skills request may be sent)."""
    capabilities = client.server_capabilities
    if capabilities is None and client.dialect.stateless:
        # Settled without `server/discover` (a pinned version over stdio):
        # ask once what the server declares; it is cached like any result.
        client.discover({})
        capabilities = client.server_capabilities
    extensions = (capabilities or {}).get("extensions")
    settings = extensions.get(EXTENSION) if isinstance(extensions, Mapping) else None
    if not isinstance(settings, Mapping):
        raise ExtensionNotDeclared(EXTENSION, None, "the server did not declare the skills extension, "
                                   "so no skills request is sent")
    return settings


#: What every skills request declares (`extensions=`): in its `_meta` in
#: 2026-07-28; at `initialize` in the initialize era.
_DECLARE: Mapping[str, Any] = {EXTENSION: {}}


def _request(client: Requester, method: str, params: Mapping[str, Any], options: Mapping[str, Any]) -> dict[str, Any]:
    """A request of the extension, declaring it."""
    check_options(options)
    return client.request(method, params, cast("RequestOptions", options), extensions=_DECLARE)


def _entry(server: str, raw: Any) -> Skill:
    """A `Skill` from a wire entry; `InvalidResult` for an entry the
    extension says a host must not load."""
    if not isinstance(raw, Mapping):
        raise InvalidResult("a skill entry must be an object")
    uri = raw.get("uri")
    if not isinstance(uri, str) or not uri.endswith("/" + MANIFEST) or len(uri) <= len(MANIFEST) + 1:
        raise InvalidResult(f"skill entry uri {uri!r} is not the URI of a SKILL.md")
    frontmatter = raw.get("frontmatter")
    if not isinstance(frontmatter, Mapping) or not isinstance(frontmatter.get("name"), str) \
            or not isinstance(frontmatter.get("description"), str):
        raise InvalidResult(f"{uri}: the entry's frontmatter needs a string name and description")
    root = uri[: -len(MANIFEST) - 1]
    resources = raw.get("resources")
    files: tuple[SkillFile, ...] | None
    if resources == _DYNAMIC:
        files = None
    elif isinstance(resources, list):
        found: dict[str, SkillFile] = {}
        for item in resources:
            if not isinstance(item, Mapping):
                raise InvalidResult(f"{uri}: every resources item must be an object")
            file_uri, digest, size = item.get("uri"), item.get("digest"), item.get("size")
            if not isinstance(file_uri, str) or not file_uri.startswith(root + "/") \
                    or not _plain_path(file_uri[len(root) + 1:]):
                # A host may write a skill's files by `SkillFile.path`: a
                # path with a '..' segment (or, on Windows, a drive) would
                # leave its folder.
                raise InvalidResult(f"{uri}: resource {file_uri!r} is not a file of the skill "
                                    "(a path inside it, with no empty, '.' or '..' segments and no ':')")
            if not isinstance(digest, str) or not _DIGEST.match(digest):
                raise InvalidResult(f"{uri}: resource {file_uri} has digest {digest!r}, not sha256:<64 lowercase hex>")
            if isinstance(size, bool) or not isinstance(size, int) or size < 0:
                raise InvalidResult(f"{uri}: resource {file_uri} needs a non-negative integer size")
            if file_uri in found:
                raise InvalidResult(f"{uri}: resource {file_uri} is listed twice")
            found[file_uri] = SkillFile(file_uri, file_uri[len(root) + 1:], digest, size)
        if uri not in found:
            raise InvalidResult(f"{uri}: the entry's resources do not list SKILL.md itself")
        files = tuple(found.values())
    else:
        raise InvalidResult(f"{uri}: resources must be a list of files or \"dynamic\"")
    return Skill(server, uri, dict(frontmatter), files, raw)


def _resolve(skill: Skill, path: str) -> tuple[str, str]:
    """The file URI and relative path `path` names within `skill`;
    ValueError for a path that leaves the skill's directory."""
    if "://" in path:
        if not path.startswith(skill.root + "/"):
            raise ValueError(f"{path} is not inside the skill {skill.uri}")
        relative = path[len(skill.root) + 1:]
    else:
        relative = path
    if not _plain_path(relative):
        raise ValueError(f"{path!r} is not a plain path inside the skill (no empty, '.' or '..' segments, "
                         "no ':')")
    return f"{skill.root}/{relative}", relative


def _plain_path(relative: str) -> bool:
    """Whether `relative` names a file inside a directory whichever way it
    is taken: no empty, '.' or '..' segment, no backslash and no colon (on
    Windows ``C:/x`` and ``C:x`` leave the folder for a drive, and
    ``a.md:x`` names a file's hidden stream), neither as written nor
    percent-decoded (RFC 3986 makes ``%2E`` the same as ``.``, and a host
    or server may decode ``%2F`` into a separator)."""
    for form in (relative, unquote(relative)):
        if "\\" in form or ":" in form or any(segment in ("", ".", "..") for segment in form.split("/")):
            return False
    return True


def _content(result: Mapping[str, Any], uri: str) -> tuple[bytes, str | None]:
    """The raw bytes of the file at `uri` in a resources/read result."""
    import base64
    import binascii

    contents = result.get("contents")
    if not isinstance(contents, list) or not contents:
        raise InvalidResult(f"resources/read {uri}: the result has no contents")
    items = [c for c in contents if isinstance(c, Mapping)]
    item = next((c for c in items if c.get("uri") == uri), items[0] if len(items) == 1 else None)
    if item is None:
        raise InvalidResult(f"resources/read {uri}: no content for that URI in the result")
    mime_type = item.get("mimeType") if isinstance(item.get("mimeType"), str) else None
    if isinstance(item.get("text"), str):
        return item["text"].encode("utf-8"), mime_type
    if isinstance(item.get("blob"), str):
        try:
            return base64.b64decode(item["blob"], validate=True), mime_type
        except (binascii.Error, ValueError):
            raise InvalidResult(f"resources/read {uri}: the blob is not valid base64") from None
    raise InvalidResult(f"resources/read {uri}: the content has neither text nor blob")


def _yaml(skill: Skill, uri: str) -> Any:
    """PyYAML, needed to check SKILL.md's frontmatter: without it the check
    cannot be made, so the read is refused before anything is fetched."""
    try:
        return importlib.import_module("yaml")
    except ImportError:
        raise SkillVerificationError(
            "frontmatter", skill, uri,
            "checking SKILL.md's frontmatter needs PyYAML: pip install 'mcp-sync-client[skills]'") from None


@functools.cache
def _loader(yaml: Any) -> Any:
    """PyYAML's SafeLoader without aliases and nested at most
    MAX_FRONTMATTER_DEPTH deep, so the parsed value is no bigger than the
    text and no deeper than the bound (made once, when PyYAML is first
    needed: it is not imported before).

    An alias (``*name``) shares a node: a few hundred bytes of aliases of
    aliases expand to billions of values when copied ("billion laughs"),
    and an alias inside its own anchor makes a cycle. Real frontmatter
    never needs aliases, so any alias is refused, not just costly ones. The
    depth bound keeps the composer's recursion (and `_plain`'s, `_same`'s)
    far from Python's recursion limit. The pure-Python loader, not
    libyaml's: its composer is where both are refused."""
    error = yaml.composer.ComposerError

    class Loader(yaml.SafeLoader):  # type: ignore[misc]
        depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                raise error(None, None, "found an alias: aliases are not accepted in SKILL.md frontmatter",
                            self.peek_event().start_mark)
            if self.depth >= MAX_FRONTMATTER_DEPTH:
                raise error(None, None, f"found values nested deeper than {MAX_FRONTMATTER_DEPTH} levels",
                            self.peek_event().start_mark)
            self.depth += 1
            try:
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    return Loader


def _plain(value: Any) -> Any:
    """A YAML value as JSON would carry it (YAML reads dates as dates)."""
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _same(a: Any, b: Any) -> bool:
    """JSON equality: True is not 1, 1 is 1.0, objects and arrays deeply."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if _number(a) and _number(b):
        return bool(a == b)
    return type(a) is type(b) and bool(a == b)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_frontmatter(yaml: Any, skill: Skill, uri: str, data: bytes) -> None:
    """SKILL.md's frontmatter must equal the entry's, field by field."""
    text = data.decode("utf-8", errors="replace").lstrip("\ufeff")
    match = _FRONTMATTER.match(text)
    if match is None:
        raise SkillVerificationError("frontmatter", skill, uri, f"{uri} does not begin with YAML frontmatter")
    frontmatter = match.group(1)
    if len(frontmatter) > MAX_FRONTMATTER:
        raise SkillVerificationError(
            "frontmatter", skill, uri,
            f"{uri}: its frontmatter is {len(frontmatter)} characters, over the limit of {MAX_FRONTMATTER}")
    try:
        parsed = yaml.load(frontmatter, Loader=_loader(yaml))
    except (yaml.YAMLError, ValueError, OverflowError, RecursionError) as exc:
        # PyYAML's constructors convert with Python's own (int(), datetime()),
        # which raise ValueError for what the server sent (month 13, an int
        # over 4300 digits); RecursionError only as a last line, the depth
        # being bounded. All of it is the server's bad frontmatter.
        raise SkillVerificationError("frontmatter", skill, uri,
                                     f"{uri}: its frontmatter is not valid YAML: {exc}") from None
    if not isinstance(parsed, Mapping):
        raise SkillVerificationError("frontmatter", skill, uri, f"{uri}: its frontmatter is not a mapping")
    parsed = _plain(parsed)
    fields = sorted(set(parsed) | set(skill.frontmatter))
    differ = [f for f in fields if f not in parsed or f not in skill.frontmatter
              or not _same(parsed[f], skill.frontmatter[f])]
    if differ:
        raise SkillVerificationError(
            "frontmatter", skill, uri,
            f"{uri}: its frontmatter differs from the entry's in {', '.join(differ)}; the skill is not loaded")
