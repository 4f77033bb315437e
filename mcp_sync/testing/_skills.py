"""The Skills extension (SEP-2640) served by the test server: `Server.skills`.

It owns the served skill entries (`skills/list`, `skills/get`) and the
directory listing (`resources/directory/read`, when `directory_read` is
on). Each skill file is an ordinary resource of the `Server`, so
`resources/read` serves it and `Server.set_resource_text(uri, ...)`
changes what is served without changing the entry (a tampered or stale
file, for tests). `served(method)` counts what the client asked. Nothing
here parses YAML: SKILL.md is written from the frontmatter given, as JSON
flow values (valid YAML).

Example::

    server = Server()
    server.skills.add("pdf-processing", {"name": "pdf-processing", "description": "Work with PDFs"},
                      body="Read references/FORMS.md.", files={"references/FORMS.md": "The forms."})
"""

from __future__ import annotations

import hashlib
import json
import threading
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ._context import Call
from ._features import paginate
from ._protocol import INVALID_PARAMS, METHOD_NOT_FOUND, JSONDict, RpcError

if TYPE_CHECKING:
    from ._registry import Server
    from ._session import ServerSession

EXTENSION = "io.modelcontextprotocol/skills"
DIRECTORY = "inode/directory"


def skill_md(frontmatter: Mapping[str, Any], body: str = "") -> str:
    """A SKILL.md with `frontmatter` (one JSON value a line, which YAML reads back) and `body`."""
    lines = "".join(f"{key}: {json.dumps(value)}\n" for key, value in frontmatter.items())
    return f"---\n{lines}---\n\n{body}"


def digest(data: str | bytes) -> str:
    raw = data.encode("utf-8") if isinstance(data, str) else data
    return "sha256:" + hashlib.sha256(raw).hexdigest()


class SkillShelf:
    """The skills a test `Server` serves (`server.skills`); the extension is
    declared once a skill is added or `declare()` is called.

    Example::

        entry = server.skills.add("git-workflow", {"name": "git-workflow", "description": "Our Git rules"})
        server.set_resource_text(entry["uri"], "tampered")   # the entry no longer matches
    """

    def __init__(self, server: Server) -> None:
        self._server = server
        self._lock = threading.Lock()
        self._entries: dict[str, JSONDict] = {}
        self.declared = False
        #: Declare `directoryRead: true` and serve `resources/directory/read`.
        self.directory_read = False

    def declare(self, *, directory_read: bool = False) -> None:
        """Declare the extension (even with no skill yet)."""
        self.declared = True
        self.directory_read = bool(directory_read)

    def add(
        self,
        path: str,
        frontmatter: Mapping[str, Any],
        *,
        body: str = "",
        files: Mapping[str, str | bytes] | None = None,
        dynamic: bool = False,
        entry: Mapping[str, Any] | None = None,
        scheme: str = "skill",
    ) -> JSONDict:
        """Serve a skill at `<scheme>://<path>/SKILL.md` with `frontmatter`,
        SKILL.md's `body` and further `files` (relative path -> content),
        each registered as a resource. Its entry lists every file with its
        digest and size (`dynamic=True`: ``"dynamic"``); `entry` overrides
        fields of the entry as served (a mismatch, for tests). Returns the
        entry as served."""
        root = f"{scheme}://{path}"
        uri = f"{root}/SKILL.md"
        contents: dict[str, str | bytes] = {uri: skill_md(frontmatter, body)}
        for relative, data in (files or {}).items():
            contents[f"{root}/{relative}"] = data
        for file_uri, data in contents.items():
            mime = "text/markdown" if file_uri.endswith(".md") else None
            self._server.set_resource_text(file_uri, data, name=file_uri.rsplit("/", 1)[-1], mime_type=mime)
        resources: Any = "dynamic" if dynamic else [
            {"uri": file_uri, "digest": digest(data),
             "size": len(data.encode("utf-8") if isinstance(data, str) else data)}
            for file_uri, data in contents.items()
        ]
        served: JSONDict = {"uri": uri, "frontmatter": dict(frontmatter), "resources": resources}
        served.update(entry or {})
        with self._lock:
            self._entries[uri] = served
        self.declared = True
        return served

    def remove(self, uri: str) -> None:
        """Stop listing the skill whose SKILL.md is at `uri` (its files stay resources)."""
        with self._lock:
            self._entries.pop(uri, None)

    def capability(self) -> JSONDict | None:
        """The extension's entry in the server's capabilities, or None."""
        if not self.declared:
            return None
        return {EXTENSION: {"directoryRead": True} if self.directory_read else {}}

    def _entries_now(self) -> list[JSONDict]:
        with self._lock:
            return [json.loads(json.dumps(e)) for e in self._entries.values()]


def _shelf(session: ServerSession, method: str) -> SkillShelf:
    shelf = session._server._skill_shelf
    if shelf is None or not shelf.declared:
        raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")
    return shelf


def _skills_list(session: ServerSession, call: Call) -> JSONDict:
    items = _shelf(session, call.method)._entries_now()
    try:
        page, next_cursor = paginate("skills", items, call.params.get("cursor"), session._server.page_size)
    except ValueError as exc:
        raise RpcError(INVALID_PARAMS, f"Invalid cursor: {exc}") from None
    result: JSONDict = {"skills": page}
    if next_cursor is not None:
        result["nextCursor"] = next_cursor
    return result


def _skills_get(session: ServerSession, call: Call) -> JSONDict:
    shelf = _shelf(session, call.method)
    uri = call.params.get("uri")
    if not isinstance(uri, str):
        raise RpcError(INVALID_PARAMS, "Invalid params: skills/get needs a string uri")
    for entry in shelf._entries_now():
        if entry.get("uri") == uri:
            return {"skill": entry}
    raise RpcError(INVALID_PARAMS, f"No skill is served at {uri}")


def _directory_read(session: ServerSession, call: Call) -> JSONDict:
    shelf = _shelf(session, call.method)
    if not shelf.directory_read:
        raise RpcError(METHOD_NOT_FOUND, f"Method not found: {call.method}")
    uri = call.params.get("uri")
    if not isinstance(uri, str):
        raise RpcError(INVALID_PARAMS, "Invalid params: resources/directory/read needs a string uri")
    server = session._server
    with server._lock:
        described = {u: r.describe() for u, r in server._resources.items() if u.startswith(uri + "/")}
    if not described:
        raise RpcError(INVALID_PARAMS, f"{uri} is not a directory resource")
    children: dict[str, JSONDict] = {}
    for child_uri, description in sorted(described.items()):
        head, sep, _rest = child_uri[len(uri) + 1:].partition("/")
        if sep:
            children.setdefault(head, {"uri": f"{uri}/{head}", "name": head, "mimeType": DIRECTORY})
        else:
            children[head] = description
    try:
        page, next_cursor = paginate("directory", list(children.values()), call.params.get("cursor"),
                                     server.page_size)
    except ValueError as exc:
        raise RpcError(INVALID_PARAMS, f"Invalid cursor: {exc}") from None
    result: JSONDict = {"resources": page}
    if next_cursor is not None:
        result["nextCursor"] = next_cursor
    return result


#: The extension's methods -> their handlers (merged into `HANDLERS`).
SKILL_HANDLERS: dict[str, Callable[[ServerSession, Call], JSONDict]] = {
    "skills/list": _skills_list,
    "skills/get": _skills_get,
    "resources/directory/read": _directory_read,
}
