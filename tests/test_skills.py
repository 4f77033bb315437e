"""The Skills extension (SEP-2640): `client.skills` over stdio and Streamable HTTP, both eras."""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import sys
import threading
from pathlib import Path
from typing import Any, Iterator

import attrs
import pytest

import mcp_sync
from mcp_sync import skills as skills_module
from mcp_sync.testing import HTTPServer, Server, demo_server
from tests.servers.skills import (
    DIGEST_BAD,
    DYNAMIC,
    FRONTMATTER_BAD,
    PDF,
    PDF_FILES,
    SIZE_BAD,
    TOO_BIG,
    TOO_MANY,
    UNLISTED,
    skills_server,
)

SCRIPT = str(Path(__file__).parent / "servers" / "skills.py")
ERAS = ["2026-07-28", "2025-11-25"]
TRANSPORTS = ["stdio", "http"]
EXTENSION = "io.modelcontextprotocol/skills"
LISTED = {"pdf-processing", "digest-bad", "size-bad", "frontmatter-bad", "unlisted", "daily", "too-many", "too-big"}


@contextlib.contextmanager
def connected(transport: str, era: str, *, directory_read: bool = False,
              flavour: str = "a", **options: Any) -> Iterator[tuple[mcp_sync.Client, HTTPServer | None]]:
    """A client of the skills server; the HTTP server too (it records requests), None over stdio."""
    if transport == "stdio":
        args = [sys.executable, SCRIPT] + (["--directory-read"] if directory_read else []) \
            + (["--flavour-b"] if flavour == "b" else [])
        with mcp_sync.connect(args, protocol=era, timeout=10, **options) as client:
            yield client, None
        return
    with HTTPServer(skills_server(directory_read=directory_read, flavour=flavour)) as httpd:
        with mcp_sync.connect(httpd.url, protocol=era, timeout=10, **options) as client:
            yield client, httpd


def sent(httpd: HTTPServer, method: str, uri: str | None = None) -> list[dict[str, Any]]:
    """The JSON-RPC requests of `method` (for `uri`) the HTTP server received."""
    found = []
    for request in httpd.requests:
        message = request.json
        if isinstance(message, dict) and message.get("method") == method:
            if uri is None or (message.get("params") or {}).get("uri") == uri:
                found.append(message)
    return found


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_list_follows_every_page_and_reads_nothing(transport, era):
    with connected(transport, era) as (client, httpd):
        listed = client.skills.list()
        assert {skill.name for skill in listed} == LISTED
        pdf = next(skill for skill in listed if skill.uri == PDF)
        assert pdf.description == "Extract, fill, and assemble PDF documents"
        assert pdf.frontmatter["metadata"] == {"version": "2.1.0", "count": 3}
        assert pdf.root == "skill://pdf-processing" and not pdf.dynamic
        assert sorted(f.path for f in pdf.files or ()) == sorted(["SKILL.md", *PDF_FILES])
        assert pdf.file("references/FORMS.md").size == len(PDF_FILES["references/FORMS.md"])
        if httpd is not None:
            assert len(sent(httpd, "skills/list")) == 4  # 8 skills, 2 a page
            assert sent(httpd, "resources/read") == [] and sent(httpd, "skills/get") == []


@pytest.mark.parametrize("era", ERAS)
def test_nothing_is_fetched_at_connect(era):
    with connected("http", era) as (client, httpd):
        client.list_tools()
        for method in ("skills/list", "skills/get", "resources/read", "resources/directory/read"):
            assert sent(httpd, method) == [], method


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_read_checks_and_returns_each_file(transport, era):
    with connected(transport, era) as (client, httpd):
        client.skills.list()
        manual = client.skills.read(PDF)
        assert manual.verified and manual.path == "SKILL.md" and manual.mime_type == "text/markdown"
        assert manual.text.startswith("---\n") and "Flavour a." in manual.text
        for path, text in PDF_FILES.items():
            content = client.skills.read(PDF, path)
            assert content.text == text and content.verified
            assert content.uri == f"skill://pdf-processing/{path}"
        assert client.skills.read(PDF, "skill://pdf-processing/templates/invoice.md").text == "# Invoice\n"


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("uri, path, check", [
    (DIGEST_BAD, "SKILL.md", "digest"),
    (SIZE_BAD, "notes.md", "size"),
    (FRONTMATTER_BAD, "SKILL.md", "frontmatter"),
    (UNLISTED, "extra.md", "unlisted"),
])
def test_a_failed_check_returns_nothing(transport, era, uri, path, check):
    with connected(transport, era) as (client, httpd):
        client.skills.list()
        with pytest.raises(mcp_sync.SkillVerificationError) as failed:
            client.skills.read(uri, path)
        assert failed.value.check == check
        assert failed.value.skill.uri == uri and failed.value.uri.endswith("/" + path)
        assert not hasattr(failed.value, "content")
        if httpd is not None and check == "unlisted":
            assert sent(httpd, "resources/read") == []  # refused before anything was fetched
        if check == "size":  # the skill's other file is still sound
            assert client.skills.read(uri).verified


def test_a_read_before_any_listing_gets_the_entry_first():
    with connected("http", "2026-07-28") as (client, httpd):
        assert client.skills.read(PDF, "references/FORMS.md").text == PDF_FILES["references/FORMS.md"]
        assert len(sent(httpd, "skills/get", PDF)) == 1 and sent(httpd, "skills/list") == []
        with pytest.raises(mcp_sync.SkillVerificationError) as failed:
            client.skills.read(PDF, "references/MISSING.md")
        assert failed.value.check == "unlisted"


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_get_returns_one_entry(transport, era):
    with connected(transport, era) as (client, _):
        listed = {skill.uri: skill for skill in client.skills.list()}
        got = client.skills.get(PDF)
        assert got == listed[PDF] and got.key == listed[PDF].key
        with pytest.raises(mcp_sync.InvalidParams):
            client.skills.get("skill://nobody/SKILL.md")


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_dynamic_skill_is_read_unverified_but_its_frontmatter_is_checked(transport, era):
    with connected(transport, era) as (client, _):
        skill = client.skills.get(DYNAMIC)
        assert skill.dynamic and skill.files is None and skill.total_size is None and skill.within_limits
        manual = client.skills.read(DYNAMIC)
        assert not manual.verified and "Generated." in manual.text
        assert client.skills.read(DYNAMIC, "data.csv").data == b"a,b\n1,2\n"
        with pytest.raises(ValueError):
            client.skills.read(DYNAMIC, "../pdf-processing/SKILL.md")


def test_a_dynamic_skill_is_held_to_the_size_limit(monkeypatch):
    monkeypatch.setattr(skills_module, "MAX_TOTAL_SIZE", 70)  # what was read counts, per file
    with connected("http", "2026-07-28") as (client, _):
        client.skills.read(DYNAMIC)  # 64 bytes
        client.skills.read(DYNAMIC)  # the same file again does not count twice
        with pytest.raises(mcp_sync.SkillVerificationError) as failed:
            client.skills.read(DYNAMIC, "data.csv")
        assert failed.value.check == "limits"


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_directory_read_only_when_declared(transport, era):
    with connected(transport, era) as (client, httpd):
        with pytest.raises(mcp_sync.ExtensionNotDeclared) as refused:
            client.skills.read_directory("skill://pdf-processing")
        assert refused.value.setting == "directoryRead"
        if httpd is not None:
            assert sent(httpd, "resources/directory/read") == []
    with connected(transport, era, directory_read=True) as (client, _):
        children = {r.name: r for r in client.skills.read_directory("skill://pdf-processing")}
        assert set(children) == {"SKILL.md", "references", "templates"}
        assert children["templates"].mime_type == "inode/directory"
        nested = client.skills.read_directory("skill://pdf-processing/templates")
        assert sorted((r.name, r.mime_type) for r in nested) == [("invoice.md", "text/markdown"),
                                                                   ("regional", "inode/directory")]
        with pytest.raises(mcp_sync.InvalidParams):
            client.skills.read_directory(PDF)


def test_directory_read_follows_pages():
    server = skills_server(directory_read=True, page_size=1)
    with HTTPServer(server) as httpd, mcp_sync.connect(httpd.url, timeout=10) as client:
        assert len(client.skills.read_directory("skill://pdf-processing")) == 3
        assert len(sent(httpd, "resources/directory/read")) == 3


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("uri, reason", [(TOO_MANY, "513 files"), (TOO_BIG, "over 16 MiB")])
def test_skills_over_the_limits_are_listed_but_not_read(era, uri, reason):
    with connected("http", era) as (client, httpd):
        skill = next(s for s in client.skills.list() if s.uri == uri)
        assert not skill.within_limits, reason
        with pytest.raises(mcp_sync.SkillVerificationError) as failed:
            client.skills.read(uri)
        assert failed.value.check == "limits"
        assert sent(httpd, "resources/read") == []


def test_the_limits_are_inclusive():
    fake = "sha256:" + "0" * 64
    files = [{"uri": "skill://s/SKILL.md", "digest": fake, "size": 1}]
    files += [{"uri": f"skill://s/{i}", "digest": fake, "size": 1} for i in range(511)]
    entry = {"uri": "skill://s/SKILL.md", "frontmatter": {"name": "s", "description": "d"}, "resources": files}
    assert skills_module._entry("x", entry).within_limits
    files[1]["size"] = 16 * 1024 * 1024 - 511
    assert skills_module._entry("x", entry).within_limits
    files[1]["size"] += 1
    assert not skills_module._entry("x", entry).within_limits


def test_a_skill_is_identified_by_server_and_uri():
    with connected("http", "2026-07-28") as (a, _), connected("http", "2026-07-28", flavour="b") as (b, _):
        skill_a, skill_b = a.skills.get(PDF), b.skills.get(PDF)
        assert skill_a.uri == skill_b.uri and skill_a.key != skill_b.key and skill_a != skill_b
        # Each read is checked against its own server's entry.
        assert "Flavour a." in a.skills.read(PDF).text and "Flavour b." in b.skills.read(PDF).text
        # b's entry held under a's identity: a's content fails the check against it.
        a.skills._held[skill_a.key] = attrs.evolve(skill_b, server=skill_a.server)
        with pytest.raises(mcp_sync.SkillVerificationError) as failed:
            a.skills.read(PDF)
        assert failed.value.check == "digest"


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_many_threads_read_at_once(transport):
    with connected(transport, "2026-07-28") as (client, _):
        client.skills.list()
        results: list[Any] = []
        lock = threading.Lock()
        start = threading.Barrier(8)

        def work(i: int) -> None:
            start.wait(timeout=10)
            got: list[Any] = []
            for path in ["SKILL.md", *PDF_FILES]:
                got.append(client.skills.read(PDF, path).data)
            try:
                client.skills.read(DIGEST_BAD)
            except mcp_sync.SkillVerificationError as exc:
                got.append(exc.check)
            with lock:
                results.append(got)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=20)
        assert len(results) == 8 and all(r == results[0] for r in results)
        assert results[0][-1] == "digest"
        assert [hashlib.sha256(d).hexdigest() for d in results[0][1:-1]] == \
            [hashlib.sha256(t.encode()).hexdigest() for t in PDF_FILES.values()]


def test_the_extension_is_declared_per_request_in_2026_07_28():
    with connected("http", "2026-07-28") as (client, httpd):
        client.list_tools()
        client.skills.list()
        client.skills.read(PDF)
        key = "io.modelcontextprotocol/clientCapabilities"
        for method in ("skills/list", "resources/read"):
            capabilities = sent(httpd, method)[0]["params"]["_meta"][key]
            assert capabilities["extensions"] == {EXTENSION: {}}, method
        assert "extensions" not in sent(httpd, "tools/list")[0]["params"]["_meta"][key]


@pytest.mark.parametrize("era, declared", [("2025-11-25", True), ("2025-06-18", False)])
def test_the_extension_is_declared_at_initialize(era, declared):
    with connected("http", era) as (client, httpd):
        client.skills.list()
        capabilities = sent(httpd, "initialize")[0]["params"]["capabilities"]
        assert (capabilities.get("extensions") == {EXTENSION: {}}) is declared
        assert "_meta" not in (sent(httpd, "skills/list")[0].get("params") or {})


def test_a_server_without_the_extension_gets_no_skills_request():
    server = demo_server()
    with HTTPServer(server) as httpd, mcp_sync.connect(httpd.url, timeout=10) as client:
        for call in (client.skills.list, lambda: client.skills.get(PDF), lambda: client.skills.read(PDF)):
            with pytest.raises(mcp_sync.ExtensionNotDeclared):
                call()
        assert sent(httpd, "skills/list") == [] and sent(httpd, "skills/get") == []


def test_the_listing_goes_through_the_cache():
    server = skills_server(page_size=None)
    with HTTPServer(server) as httpd, mcp_sync.connect(httpd.url, timeout=10, cache=True) as client:
        first = client.skills.list()
        assert client.skills.list() == first
        client.skills.get(PDF)
        client.skills.get(PDF)
        assert len(sent(httpd, "skills/list")) == 1 and len(sent(httpd, "skills/get")) == 1
        client.skills.list(bypass_cache=True)
        assert len(sent(httpd, "skills/list")) == 2


def test_without_pyyaml_skill_md_is_refused_before_it_is_read(monkeypatch):
    real = importlib.import_module

    def no_yaml(name: str, *args: Any) -> Any:
        if name == "yaml":
            raise ImportError("No module named 'yaml'")
        return real(name, *args)

    with connected("http", "2026-07-28") as (client, httpd):
        client.skills.list()
        monkeypatch.setattr(skills_module.importlib, "import_module", no_yaml)
        with pytest.raises(mcp_sync.SkillVerificationError) as failed:
            client.skills.read(PDF)
        assert failed.value.check == "frontmatter" and "pip install 'mcp-sync-client[skills]'" in str(failed.value)
        assert sent(httpd, "resources/read") == []
        assert client.skills.read(PDF, "references/FORMS.md").verified  # other files need no YAML


@pytest.mark.parametrize("change, message", [
    ({"resources": None}, "resources must be"),
    ({"resources": [{"uri": "skill://s/SKILL.md", "digest": "sha256:ABC", "size": 1}]}, "digest"),
    ({"resources": [{"uri": "skill://other/x", "digest": "sha256:" + "0" * 64, "size": 1}]}, "not a file of"),
    ({"resources": [{"uri": "skill://s/x", "digest": "sha256:" + "0" * 64, "size": 1}]}, "SKILL.md itself"),
    ({"frontmatter": {"name": "s"}}, "description"),
    ({"uri": "skill://s/README.md"}, "not the URI of a SKILL.md"),
])
def test_invalid_entries_are_refused(change, message):
    entry = {"uri": "skill://s/SKILL.md", "frontmatter": {"name": "s", "description": "d"}, "resources": "dynamic"}
    entry.update(change)
    with pytest.raises(mcp_sync.InvalidResult, match=message):
        skills_module._entry("x", entry)


def test_frontmatter_is_compared_as_json_values():
    entry = {"uri": "skill://s/SKILL.md", "frontmatter": {"name": "s", "description": "d", "n": 1, "flag": True,
                                                          "date": "2026-01-02"}, "resources": "dynamic"}
    skill = skills_module._entry("x", entry)
    yaml = importlib.import_module("yaml")
    good = b"---\nname: s\ndescription: d\nn: 1.0\nflag: true\ndate: 2026-01-02\n---\nbody"
    skills_module._check_frontmatter(yaml, skill, skill.uri, good)
    for bad in (b"---\nname: s\ndescription: d\nn: true\nflag: true\ndate: 2026-01-02\n---\n",
                b"---\nname: s\ndescription: d\nn: 1\nflag: true\ndate: 2026-01-02\nextra: 1\n---\n",
                b"no frontmatter at all", b"---\n: [\n---\n"):
        with pytest.raises(mcp_sync.SkillVerificationError) as failed:
            skills_module._check_frontmatter(yaml, skill, skill.uri, bad)
        assert failed.value.check == "frontmatter"


def test_bad_arguments_are_refused_at_once():
    with connected("http", "2026-07-28") as (client, httpd):
        with pytest.raises(TypeError):
            client.skills.get("")
        with pytest.raises(TypeError):
            client.skills.read(PDF, "")
        for path in ("../x", "a//b", "./SKILL.md", "skill://elsewhere/SKILL.md"):
            with pytest.raises(ValueError):
                client.skills.read(PDF, path)


@pytest.mark.parametrize("cache", [False, True])
def test_a_stale_entry_is_refreshed_with_get(cache):
    server = skills_server()
    forms = "skill://pdf-processing/references/FORMS.md"
    with HTTPServer(server) as httpd, mcp_sync.connect(httpd.url, timeout=10, cache=cache) as client:
        client.skills.list()
        assert client.skills.read(PDF, "references/FORMS.md").text == PDF_FILES["references/FORMS.md"]
        # The skill changes on the server: new content, new entry.
        server.skills.add("pdf-processing", {"name": "pdf-processing", "description": "New"},
                          files={**PDF_FILES, "references/FORMS.md": "The forms, revised.\n"})
        if cache:  # the cached copy still matches the entry held: consistent, so served
            assert client.skills.read(PDF, "references/FORMS.md").text == PDF_FILES["references/FORMS.md"]
        else:
            with pytest.raises(mcp_sync.SkillVerificationError) as failed:
                client.skills.read(PDF, "references/FORMS.md")  # checked against the entry held
            assert failed.value.check == "size"
        refreshed = client.skills.get(PDF, bypass_cache=True)
        assert refreshed.description == "New"
        # A cached copy of the old content does not match the new entry: fetched again.
        assert client.skills.read(PDF, "references/FORMS.md").text == "The forms, revised.\n"
        assert len(sent(httpd, "resources/read", forms)) == (2 if cache else 3)


# -- a server's SKILL.md is untrusted: no frontmatter costs more than linear work ----------------


def _bomb(levels: int, width: int = 10) -> str:
    """A "billion laughs": each level aliases the one before `width` times (width**levels copies)."""
    lines = ["name: x", "description: y", "l0: &l0 [" + ",".join(['"lol"'] * width) + "]"]
    lines += [f"l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * width) + "]" for i in range(1, levels + 1)]
    return "\n".join(lines)


@pytest.mark.parametrize("frontmatter, entry, refused", [
    # An alias whose expansion the entry matches: accepted before, refused now (no alias at all).
    ("name: x\ndescription: y\na: &v 1\nb: *v", {"a": 1, "b": 1}, "alias"),
    ("name: x\ndescription: y\nloop: &a [*a]", {}, "alias"),            # was RecursionError
    ("name: x\ndescription: y\nm:\n  <<: *v", {}, "alias"),               # a merge key is an alias
    (_bomb(7), {}, "alias"),                                               # was a minute and 2.3 GB
    ("name: x\ndescription: y\ndeep: " + "[" * 2000 + "]" * 2000, {}, "deeper than"),  # was RecursionError
    ("name: x\ndescription: y\nwhen: 2026-13-45", {}, "not valid YAML"),   # was ValueError (month)
    ("name: x\ndescription: y\nn: " + "1" * 5000, {}, "not valid YAML"),  # was ValueError (int digits)
    # Sexagesimal ints cost quadratic time in their length: no frontmatter is long enough to matter.
    ("name: x\ndescription: y\nn: 1" + ":0" * 40_000, {}, "over the limit"),
])
def test_bad_yaml_in_frontmatter_is_a_verification_error(frontmatter, entry, refused):
    skill = skills_module._entry("x", {"uri": "skill://s/SKILL.md", "resources": "dynamic",
                                       "frontmatter": {"name": "x", "description": "y", **entry}})
    yaml = importlib.import_module("yaml")
    with pytest.raises(mcp_sync.SkillVerificationError, match=refused) as failed:
        skills_module._check_frontmatter(yaml, skill, skill.uri, f"---\n{frontmatter}\n---\nbody\n".encode())
    assert failed.value.check == "frontmatter"


def test_frontmatter_without_aliases_within_the_limits_is_read():
    nested = "[" * (skills_module.MAX_FRONTMATTER_DEPTH - 2) + "1" + "]" * (skills_module.MAX_FRONTMATTER_DEPTH - 2)
    value: Any = 1
    for _ in range(skills_module.MAX_FRONTMATTER_DEPTH - 2):
        value = [value]
    pad = "p: " + "a" * (skills_module.MAX_FRONTMATTER - 200)
    skill = skills_module._entry("x", {"uri": "skill://s/SKILL.md", "resources": "dynamic", "frontmatter": {
        "name": "x", "description": "y", "anchored": 1, "deep": value, "p": pad[3:]}})
    yaml = importlib.import_module("yaml")
    text = f"---\nname: x\ndescription: y\nanchored: &unused 1\ndeep: {nested}\n{pad}\n---\n"
    assert len(text) < skills_module.MAX_FRONTMATTER
    skills_module._check_frontmatter(yaml, skill, skill.uri, text.encode())  # an anchor alone is harmless


def test_a_frontmatter_bomb_from_a_server_is_refused():
    server = Server()
    server.skills.add("bomb", {"name": "x", "description": "y"}, dynamic=True)
    server.set_resource_text("skill://bomb/SKILL.md", f"---\n{_bomb(9)}\n---\nbody\n")
    with HTTPServer(server) as httpd, mcp_sync.connect(httpd.url, timeout=10) as client:
        with pytest.raises(mcp_sync.SkillVerificationError, match="alias") as failed:
            client.skills.read("skill://bomb/SKILL.md")
        assert failed.value.check == "frontmatter"


# -- an entry lists files inside its skill only -------------------------------------------------------


@pytest.mark.parametrize("relative", ["../outside.md", "a/../../outside.md", "./x", "a//x", "a/", "..\\x",
                                      "%2e%2e/outside.md", "a/%2E%2e/%2e%2E/x", "..%2F..%2Fx", "%2e",
                                      # Windows: a drive (absolute or drive-relative), an alternate data stream
                                      "C:/Windows/evil.md", "C:evil.md", "a/notes.md:hidden", "C%3A/evil.md"])
def test_an_entry_listing_a_file_outside_its_skill_is_refused(relative):
    fake = "sha256:" + "0" * 64
    entry = {"uri": "skill://s/SKILL.md", "frontmatter": {"name": "s", "description": "d"},
             "resources": [{"uri": "skill://s/SKILL.md", "digest": fake, "size": 1},
                           {"uri": f"skill://s/{relative}", "digest": fake, "size": 1}]}
    with pytest.raises(mcp_sync.InvalidResult, match="not a file of"):
        skills_module._entry("x", entry)


def test_list_leaves_out_a_skill_with_a_file_outside_it():
    server = Server()
    server.skills.add("pdf", {"name": "pdf", "description": "PDFs"}, body="x\n",
                      files={"../../outside.md": "evil\n"})
    server.skills.add("sound", {"name": "sound", "description": "Sound"}, files={"a/b.md": "fine\n"})
    with HTTPServer(server) as httpd, mcp_sync.connect(httpd.url, timeout=10) as client:
        assert [skill.name for skill in client.skills.list()] == ["sound"]
        with pytest.raises(mcp_sync.InvalidResult, match="not a file of"):
            client.skills.get("skill://pdf/SKILL.md")
        assert [skill.name for skill in client.skills.held()] == ["sound"]


# -- what the client holds follows the server's latest listing --------------------------------------


def test_the_entries_held_follow_the_latest_listing():
    server = Server()
    server.skills.add("s-1", {"name": "first", "description": "d"}, dynamic=True)
    with HTTPServer(server) as httpd, mcp_sync.connect(httpd.url, timeout=10) as client:
        for i in range(50):  # a server that renames its skill every time
            server.skills.add(f"s{i}", {"name": f"s{i}", "description": "d"}, dynamic=True)
            server.skills.remove(f"skill://s{i - 1}/SKILL.md")
            listed = client.skills.list()
            assert [skill.key for skill in client.skills.held()] == [skill.key for skill in listed]
            assert [skill.name for skill in listed] == [f"s{i}"]


def test_a_skill_no_longer_listed_is_got_again_before_it_is_read():
    server = skills_server(page_size=None)
    with HTTPServer(server) as httpd, mcp_sync.connect(httpd.url, timeout=10) as client:
        client.skills.list()
        assert client.skills.read(DYNAMIC).text.endswith("Generated.\n")
        assert sent(httpd, "skills/get") == []  # held from the listing
        server.skills.remove(DYNAMIC)
        client.skills.list()
        assert DYNAMIC not in {skill.uri for skill in client.skills.held()}
        with pytest.raises(mcp_sync.InvalidParams):  # the server serves it no more
            client.skills.read(DYNAMIC)
        assert len(sent(httpd, "skills/get", DYNAMIC)) == 1


def test_entries_got_but_not_listed_are_bounded(monkeypatch):
    monkeypatch.setattr(skills_module, "MAX_UNLISTED", 3)
    server = Server()
    uris = [server.skills.add(f"s{i}", {"name": f"s{i}", "description": "d"}, dynamic=True)["uri"]
            for i in range(3)]
    with HTTPServer(server) as httpd, mcp_sync.connect(httpd.url, timeout=10) as client:
        client.skills.list()
        more = [server.skills.add(f"t{i}", {"name": f"t{i}", "description": "d"}, dynamic=True)["uri"]
                for i in range(5)]
        for uri in more:
            client.skills.get(uri)
        client.skills.get(more[2])  # got again: the most recent
        # Every listed entry stays; of the others, the 3 got last.
        assert [skill.uri for skill in client.skills.held()] == uris + [more[3], more[4], more[2]]
        client.skills.read(more[0])  # an entry let go is got again before a read
        assert len(sent(httpd, "skills/get", more[0])) == 2
