"""FileStorage refuses token files others could have written, as ssh does for keys.

A token file that another user owns or may write could hold tokens or a
client registration planted by them; a symbolic link could point the
client's writes at any file. Real files, real modes: these tests run as
any user, and the "owned by another user" case needs root (to chown).
"""

from __future__ import annotations

import json
import os
import stat
import sys

import pytest

from mcp_sync.auth import AuthorizationError, FileStorage

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX owners and modes")

STORED = {"tokens https://mcp.example.com": {"access_token": "at", "token_type": "Bearer"}}


@pytest.fixture
def token_file(tmp_path):
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps(STORED))
    path.chmod(0o600)
    return path


def test_a_private_file_of_ours_is_read(token_file):
    assert FileStorage(token_file).load("tokens https://mcp.example.com") == STORED["tokens https://mcp.example.com"]


@pytest.mark.parametrize("mode, who", [(0o666, "other users"), (0o602, "other users"), (0o620, "its group")])
def test_a_file_others_may_write_is_refused(token_file, mode, who):
    token_file.chmod(mode)
    storage = FileStorage(token_file)
    with pytest.raises(AuthorizationError, match=f"writable by {who}") as caught:
        storage.load("tokens https://mcp.example.com")
    assert str(token_file) in str(caught.value) and "chmod 600" in str(caught.value)
    with pytest.raises(AuthorizationError):
        storage.save("tokens https://other.example.com", {"access_token": "x"})
    # Nothing was written over it either.
    assert json.loads(token_file.read_text()) == STORED and stat.S_IMODE(token_file.stat().st_mode) == mode


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="giving a file away needs root")
def test_a_file_owned_by_another_user_is_refused(token_file):
    os.chown(token_file, 65534, 65534)
    with pytest.raises(AuthorizationError, match="owned by another user") as caught:
        FileStorage(token_file).load("tokens https://mcp.example.com")
    assert "uid 65534" in str(caught.value)


def test_a_symbolic_link_is_refused_and_not_followed(tmp_path, token_file):
    link = tmp_path / "link.json"
    link.symlink_to(token_file)
    storage = FileStorage(link)
    with pytest.raises(AuthorizationError, match="symbolic link"):
        storage.load("tokens https://mcp.example.com")
    with pytest.raises(AuthorizationError, match="symbolic link"):
        storage.save("tokens https://other.example.com", {"access_token": "x"})
    assert link.is_symlink() and json.loads(token_file.read_text()) == STORED


def test_a_dangling_symbolic_link_is_refused_too(tmp_path):
    link = tmp_path / "link.json"
    link.symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(AuthorizationError, match="symbolic link"):
        FileStorage(link).save("k", {"v": 1})
    assert not (tmp_path / "elsewhere.json").exists()


def test_something_other_than_a_file_is_refused(tmp_path):
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(AuthorizationError, match="not a regular file"):
        FileStorage(tmp_path / "dir.json").load("k")


def test_a_new_file_is_created_private(tmp_path):
    storage = FileStorage(tmp_path / "sub" / "tokens.json")
    assert storage.load("k") is None
    storage.save("k", {"v": 1})
    assert stat.S_IMODE((tmp_path / "sub" / "tokens.json").stat().st_mode) == 0o600
    assert storage.load("k") == {"v": 1}
