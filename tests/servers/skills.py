"""A test server serving skills (the Skills extension), in-process or over stdio.

`skills_server()` builds it: one sound skill with nested files, skills whose
served content breaks their entry in each way a host must catch, a dynamic
skill, and two skills over the extension's limits. Run as a script it serves
that server over stdio (`--directory-read` declares `directoryRead: true`).
"""

from __future__ import annotations

import sys

from mcp_sync.testing import Server
from mcp_sync.testing._skills import digest, skill_md

PDF = "skill://pdf-processing/SKILL.md"
PDF_FILES = {
    "references/FORMS.md": "How to fill the forms.\n",
    "templates/invoice.md": "# Invoice\n",
    "templates/regional/eu.md": "# EU invoice\n",
}
DIGEST_BAD = "skill://digest-bad/SKILL.md"
SIZE_BAD = "skill://size-bad/SKILL.md"
FRONTMATTER_BAD = "skill://frontmatter-bad/SKILL.md"
UNLISTED = "skill://unlisted/SKILL.md"
DYNAMIC = "skill://reports/daily/SKILL.md"
TOO_MANY = "skill://too-many/SKILL.md"
TOO_BIG = "skill://too-big/SKILL.md"


def _meta(name: str, description: str) -> dict[str, object]:
    return {"name": name, "description": description}


def skills_server(*, directory_read: bool = False, page_size: int | None = 2, flavour: str = "a") -> Server:
    """The server; `flavour` changes the pdf-processing skill's body, so two
    servers can serve the same URI with different content."""
    server = Server(name=f"skills-{flavour}", page_size=page_size)
    shelf = server.skills
    shelf.declare(directory_read=directory_read)
    shelf.add("pdf-processing", {**_meta("pdf-processing", "Extract, fill, and assemble PDF documents"),
                                 "license": "Apache-2.0", "metadata": {"version": "2.1.0", "count": 3}},
              body=f"Use references/FORMS.md. Flavour {flavour}.\n", files=PDF_FILES)
    # SKILL.md served with other bytes of the same length: only the digest catches it.
    shelf.add("digest-bad", _meta("digest-bad", "Tampered"), body="Skill body.\n")
    server.set_resource_text(DIGEST_BAD, skill_md(_meta("digest-bad", "Tampered"), "Evil body!!\n"))
    # A supporting file served with bytes the entry did not account for.
    shelf.add("size-bad", _meta("size-bad", "Grown"), files={"notes.md": "short\n"})
    server.set_resource_text("skill://size-bad/notes.md", "short\nand then some extra\n")
    # The entry's frontmatter says one thing, SKILL.md (digest and size right) another.
    shelf.add("frontmatter-bad", _meta("frontmatter-bad", "Exfiltrate credentials"),
              entry={"frontmatter": _meta("frontmatter-bad", "Harmless helper")})
    # A file the server serves in the skill's directory but the entry does not list.
    shelf.add("unlisted", _meta("unlisted", "Has a file added later"))
    server.set_resource_text("skill://unlisted/extra.md", "added after the listing\n")
    # Generated content: no digests.
    shelf.add("reports/daily", _meta("daily", "Today's report"), body="Generated.\n",
              files={"data.csv": "a,b\n1,2\n"}, dynamic=True)
    # Over the limits, counted from the entry alone (nothing behind the files).
    fake = digest("x")
    shelf.add("too-many", _meta("too-many", "513 files"), entry={"resources": [
        {"uri": TOO_MANY, "digest": fake, "size": 1},
        *({"uri": f"skill://too-many/f{i}.md", "digest": fake, "size": 1} for i in range(512))]})
    shelf.add("too-big", _meta("too-big", "Over 16 MiB"), entry={"resources": [
        {"uri": TOO_BIG, "digest": fake, "size": 100},
        {"uri": "skill://too-big/big.bin", "digest": fake, "size": 16 * 1024 * 1024}]})
    return server


if __name__ == "__main__":
    from mcp_sync.testing.server import serve_stdio

    sys.exit(serve_stdio(skills_server(directory_read="--directory-read" in sys.argv,
                                       flavour="b" if "--flavour-b" in sys.argv else "a")))
