"""Server config files: `load_config()`, `find_config()`, `connect_configured()`.

Each format is tested with a file shaped like the ones the hosts write.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

import mcp_sync
from mcp_sync.testing import HTTPServer, demo_server
from tests.servers.http_sse import SSEServer

DEMO = [sys.executable, "-m", "mcp_sync.testing"]


def write(path: Path, data: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data, indent=2), encoding="utf-8")
    return path


# -- formats ----------------------------------------------------------------------------


def test_claude_desktop_file(tmp_path, monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_secret")
    path = write(tmp_path / "claude_desktop_config.json", {
        "mcpServers": {
            "filesystem": {
                "command": "npx",
                "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/ada/Desktop"],
            },
            "github": {
                "command": "docker",
                "args": ["run", "-i", "--rm", "-e", "GITHUB_PERSONAL_ACCESS_TOKEN", "ghcr.io/github/github-mcp-server"],
                "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}"},
            },
        },
        "globalShortcut": "Ctrl+Space",
    })
    config = mcp_sync.load_config(path)
    assert config.path == path
    assert list(config) == ["filesystem", "github"]
    fs = config["filesystem"]
    assert isinstance(fs, mcp_sync.Stdio)
    assert (fs.command, fs.args, fs.env, fs.cwd) == (
        "npx", ["-y", "@modelcontextprotocol/server-filesystem", "/Users/ada/Desktop"], None, None)
    gh = config["github"]
    assert isinstance(gh, mcp_sync.Stdio)
    assert gh.env == {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_secret"}
    assert gh.inherit_env  # hosts pass the environment on; the file adds to it


def test_claude_code_mcp_json_with_http_headers_and_substitution(tmp_path, monkeypatch):
    monkeypatch.setenv("API_KEY", "k-123")
    monkeypatch.setenv("API_HOST", "api.example.com")
    monkeypatch.delenv("API_REGION", raising=False)
    path = write(tmp_path / ".mcp.json", {
        "mcpServers": {
            "api": {
                "type": "http",
                "url": "https://${API_HOST}/mcp?region=${API_REGION:-eu}",
                "headers": {"Authorization": "Bearer ${API_KEY}", "X-Team": "core"},
            },
            "legacy": {"type": "sse", "url": "https://${env:API_HOST}/sse",
                       "headers": {"X-API-Key": "${env:API_KEY}"}},
            "local": {"type": "stdio", "command": "python", "args": ["server.py", "--key", "${API_KEY}"],
                      "env": {"LEVEL": "debug"}},
        }
    })
    config = mcp_sync.load_config(path)
    api = config["api"]
    assert type(api) is mcp_sync.HTTP
    assert api.url == "https://api.example.com/mcp?region=eu"
    assert api.headers == {"Authorization": "Bearer k-123", "X-Team": "core"}
    legacy = config["legacy"]
    assert isinstance(legacy, mcp_sync.SSE)
    assert (legacy.url, legacy.headers) == ("https://api.example.com/sse", {"X-API-Key": "k-123"})
    local = config["local"]
    assert isinstance(local, mcp_sync.Stdio)
    assert local.args == ["server.py", "--key", "k-123"] and local.env == {"LEVEL": "debug"}


def test_cursor_and_windsurf_url_entries(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKEN", "t")
    cursor = mcp_sync.load_config(write(tmp_path / "cursor" / "mcp.json", {"mcpServers": {
        "remote": {"url": "http://127.0.0.1:9/mcp", "headers": {"API_KEY": "${env:TOKEN}"}},
    }}))
    assert type(cursor["remote"]) is mcp_sync.HTTP
    assert cursor["remote"].headers == {"API_KEY": "t"}
    windsurf = mcp_sync.load_config(write(tmp_path / "windsurf" / "mcp_config.json", {"mcpServers": {
        "remote": {"serverUrl": "https://example.com/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
        "off": {"command": "server", "disabled": True},
    }}))
    assert windsurf["remote"].url == "https://example.com/mcp"
    assert "off" not in windsurf and windsurf.disabled == {"off"}
    with pytest.raises(mcp_sync.ConfigError, match="'off' is disabled"):
        windsurf["off"]


@pytest.mark.parametrize("comment", ["// [optional]", "// the first {one}", "/* a */ /* ] */"])
def test_a_bracket_in_a_comment_after_a_comma_is_no_closer(tmp_path, comment):
    # The comma before it was taken for a trailing one and dropped: the
    # file was refused as not valid JSON.
    path = write(tmp_path / ".vscode" / "mcp.json", f"""{{
  "servers": {{
    "a": {{"command": "server-a"}}, {comment}
    "b": {{"command": "server-b", "args": ["x", /* ] */ "y",]}},
  }},
}}""")
    config = mcp_sync.load_config(path)
    assert list(config) == ["a", "b"] and config["b"].args == ["x", "y"]


def test_an_env_file_value_in_quotes_may_have_a_comment_after_it(tmp_path):
    (tmp_path / ".env").write_text('TOKEN="abc123" # my token\nSINGLE=\'a # b\'  # note\nOPEN="x\n',
                                   encoding="utf-8")
    path = write(tmp_path / "mcp.json", {"mcpServers": {"db": {"command": "db", "envFile": str(tmp_path / ".env")}}})
    assert mcp_sync.load_config(path)["db"].env == {"TOKEN": "abc123", "SINGLE": "a # b", "OPEN": '"x'}


def test_vscode_file_with_comments_inputs_and_env_file(tmp_path, monkeypatch):
    monkeypatch.setenv("PERPLEXITY_API_KEY", "pplx")
    (tmp_path / ".env").write_text(
        "# secrets\nexport DB_URL=postgres://localhost/db\nQUOTED=\"a b\"  \nPLAIN=x # note\nSHARED=from-file\n",
        encoding="utf-8")
    path = write(tmp_path / ".vscode" / "mcp.json", """{
  // VS Code writes comments and trailing commas
  "inputs": [{"type": "promptString", "id": "api-key", "description": "Key", "password": true}],
  "servers": {
    "db": {
      "type": "stdio",
      "command": "uvx",
      "args": ["db-server", "--cache", "${userHome}/.cache",],
      "envFile": "${workspaceFolder}/.env",
      "env": {"SHARED": "from-env", "KEY": "${env:PERPLEXITY_API_KEY}"},
      "cwd": "${workspaceFolder}/tools",
      "dev": {"watch": "src/**/*.ts"},   /* unknown keys are ignored */
    },
    "github": {"type": "http", "url": "https://api.githubcopilot.com/mcp/"},
    "prompted": {"type": "http", "url": "https://example.com/mcp", "headers": {"Key": "${input:api-key}"}},
  },
}""")
    config = mcp_sync.load_config(path)
    db = config["db"]
    assert isinstance(db, mcp_sync.Stdio)
    assert db.env == {"DB_URL": "postgres://localhost/db", "QUOTED": "a b", "PLAIN": "x",
                      "SHARED": "from-env", "KEY": "pplx"}
    assert db.cwd == str(tmp_path / "tools")
    assert db.args == ["db-server", "--cache", f"{Path.home()}/.cache"]
    assert config.entries["db"]["dev"] == {"watch": "src/**/*.ts"}  # kept as written
    assert type(config["github"]) is mcp_sync.HTTP
    with pytest.raises(mcp_sync.ConfigError, match=r"'prompted'.*\$\{input:api-key\}"):
        config["prompted"]


def test_vscode_settings_and_plain_mappings():
    settings = mcp_sync.load_config({"editor.fontSize": 14, "mcp": {"servers": {"a": {"command": "a"}}}})
    assert list(settings) == ["a"] and settings.path is None
    bare = mcp_sync.load_config({"demo": {"command": "python", "args": ["-m", "mcp_sync.testing"]}})
    assert bare["demo"].args == ["-m", "mcp_sync.testing"]
    assert len(mcp_sync.load_config({})) == 0
    assert mcp_sync.load_config(bare) is bare
    assert 42 not in bare and ["unhashable"] not in bare


# -- errors -----------------------------------------------------------------------------


def test_missing_variable_names_it_and_the_server(tmp_path, monkeypatch):
    monkeypatch.delenv("NOPE_TOKEN", raising=False)
    path = write(tmp_path / ".mcp.json", {"mcpServers": {
        "ok": {"command": "server"},
        "api": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ${env:NOPE_TOKEN}"}},
    }})
    config = mcp_sync.load_config(path)  # loading does not need the variable ...
    assert config["ok"].command == "server"  # ... nor does another server
    with pytest.raises(mcp_sync.ConfigError) as caught:
        config["api"]
    message = str(caught.value)
    assert "NOPE_TOKEN" in message and "'api'" in message and str(path) in message
    with pytest.raises(mcp_sync.ConfigError, match="NOPE_TOKEN"):
        dict(config)


def test_bad_json_names_the_file_and_line(tmp_path):
    path = write(tmp_path / "mcp.json", '{\n  "mcpServers": {\n    "a": {"command": npx}\n  }\n}\n')
    with pytest.raises(mcp_sync.ConfigError, match=r"mcp\.json is not valid JSON: .* line 3 column 22") as caught:
        mcp_sync.load_config(path)
    assert isinstance(caught.value, mcp_sync.McpError)


@pytest.mark.parametrize("entry, message", [
    ({"mcpServers": {"a": {"args": ["x"]}}}, "server 'a' has neither \"command\" nor \"url\""),
    ({"servers": {"a": {"type": "websocket", "url": "ws://x"}}}, "server 'a' has unknown type 'websocket'"),
    ({"servers": {"a": {"type": "stdio", "url": "http://x"}}}, "type stdio but has no \"command\""),
    ({"servers": {"a": {"type": "http", "command": "x"}}}, "type http but has no \"url\""),
    ({"mcpServers": {"a": {"command": "x", "args": "--flag"}}}, "\"args\" must be a list of strings"),
    ({"mcpServers": {"a": {"command": "x", "env": {"K": None}}}}, "env 'K' must be a string"),
    ({"mcpServers": {"a": {"url": "https://x", "headers": ["A: b"]}}}, "\"headers\" must be an object"),
    ({"mcpServers": {"a": {"command": 5}}}, "\"command\" must be a string, not a number"),
    ({"mcpServers": {"a": "python server.py"}}, "server 'a' must be an object, not a string"),
])
def test_an_entry_of_the_wrong_shape_is_set_aside_and_the_others_work(tmp_path, entry, message, caplog):
    # One such entry (a file shared with hosts that know other transports
    # or keys) made the whole file unusable: every server in it failed.
    # It is left out, with a warning; asking for it raises why.
    (block, servers), = entry.items()
    path = write(tmp_path / "c.json", {block: {**servers, "demo": {"command": "demo-server"}}})
    config = mcp_sync.load_config(path)
    assert list(config) == ["demo"] and "a" not in config
    assert config["demo"].command == "demo-server"
    assert message in config.unusable["a"] and str(path) in config.unusable["a"]
    with pytest.raises(mcp_sync.ConfigError) as caught:
        config["a"]
    assert str(caught.value) == config.unusable["a"] and not isinstance(caught.value, KeyError)
    assert [r.getMessage() for r in caplog.records if r.name == "mcp_sync.config"] == [
        f"{config.unusable['a']} (left out: the file's other servers can be used)"]


@pytest.mark.parametrize("data, message", [
    ({"mcpServers": ["a"]}, "\"mcpServers\" must be an object"),
    ({"mcpServers": {"a": {"command": "x"}}, "servers": {"a": {"command": 5}}}, "server 'a' is defined twice"),
    ({"mcpServers": {}, "servers": {}, "x": 1}, None),
    ({"name": "not a config"}, "no \"mcpServers\" or \"servers\" object"),
    ([1, 2], "the top level must be a JSON object"),
])
def test_a_file_that_cannot_be_read_as_a_whole_is_refused(tmp_path, data, message):
    path = write(tmp_path / "c.json", data)
    if message is None:
        assert len(mcp_sync.load_config(path)) == 0
        return
    with pytest.raises(mcp_sync.ConfigError) as caught:
        mcp_sync.load_config(path)
    assert message in str(caught.value) and str(path) in str(caught.value)


def test_find_config_for_a_server_no_file_defines_lists_the_ones_they_do(tmp_path, monkeypatch):
    for variable in ("HOME", "XDG_CONFIG_HOME", "APPDATA"):  # (no file of the person running the tests)
        monkeypatch.setenv(variable, str(tmp_path / "home"))
    write(tmp_path / ".mcp.json", {"mcpServers": {"a": {"command": "x"}, "b": {"url": "http://127.0.0.1:9/mcp"}}})
    with pytest.raises(mcp_sync.ConfigError) as caught:
        mcp_sync.find_config("c", cwd=tmp_path)
    assert str(caught.value).endswith("; the files found define: a, b")


def test_a_mapping_whose_server_names_are_not_strings_is_refused():
    # Built in Python: `config[1]` and every message listing the names
    # raised TypeError (from str.join) instead.
    with pytest.raises(mcp_sync.ConfigError, match="the config: server names must be strings, not 1"):
        mcp_sync.load_config({"mcpServers": {1: {"command": "x"}, "b": {"command": "y"}}})


def test_find_config_finds_the_file_defining_an_unusable_entry_and_says_what_is_wrong(tmp_path, monkeypatch):
    write(tmp_path / ".mcp.json", {"mcpServers": {"a": {"type": "websocket", "url": "ws://x"}}})
    assert mcp_sync.find_config("a", cwd=tmp_path) == tmp_path / ".mcp.json"
    with pytest.raises(mcp_sync.ConfigError, match="unknown type 'websocket'"):
        mcp_sync.connect_configured("a", config=tmp_path / ".mcp.json")


def test_a_disabled_entry_is_not_checked(tmp_path):
    # One disabled entry of a shape the library cannot use (another host's
    # transport, say) made the whole file unusable.
    path = write(tmp_path / ".mcp.json", {"mcpServers": {
        "future": {"type": "websocket", "url": "ws://x", "disabled": True},
        "demo": {"command": "demo-server"},
    }})
    config = mcp_sync.load_config(path)
    assert list(config) == ["demo"] and config.disabled == {"future"}


def test_unknown_server_lists_the_known_ones(tmp_path):
    config = mcp_sync.load_config(write(tmp_path / ".mcp.json", {"mcpServers": {"b": {"command": "b"},
                                                                               "a": {"command": "a"}}}))
    with pytest.raises(mcp_sync.ConfigError, match=r"no server named 'zz' in .*\(servers: a, b\)") as caught:
        config["zz"]
    assert isinstance(caught.value, KeyError)  # what a mapping raises
    assert config.get("zz") is None and "zz" not in config


def test_bad_header_value_becomes_config_error(monkeypatch):
    monkeypatch.setenv("EVIL", "a\r\nInjected: yes")
    config = mcp_sync.load_config({"mcpServers": {"x": {"url": "https://e.com/mcp", "headers": {"K": "${EVIL}"}}}})
    with pytest.raises(mcp_sync.ConfigError, match="server 'x'"):
        config["x"]


def test_missing_file_and_missing_env_file(tmp_path):
    with pytest.raises(mcp_sync.ConfigError, match="no config file at"):
        mcp_sync.load_config(tmp_path / "absent.json")
    config = mcp_sync.load_config({"servers": {"s": {"command": "x", "envFile": str(tmp_path / "none.env")}}})
    with pytest.raises(mcp_sync.ConfigError, match="cannot read envFile"):
        config["s"]
    with pytest.raises(TypeError):
        mcp_sync.load_config(42)  # type: ignore[arg-type]


# -- finding files ----------------------------------------------------------------------


def test_find_config_looks_in_the_usual_places(tmp_path, monkeypatch):
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("APPDATA", str(home / "AppData"))
    from mcp_sync.config import config_locations

    places = config_locations(project)
    assert places[:3] == [project / ".mcp.json", project / ".vscode" / "mcp.json", project / ".cursor" / "mcp.json"]
    assert home / ".cursor" / "mcp.json" in places
    assert any(p.name == "claude_desktop_config.json" and str(p).startswith(str(home)) for p in places)

    with pytest.raises(mcp_sync.ConfigError, match="no MCP config file found .*mcp.json"):
        mcp_sync.find_config(cwd=project)
    cursor = write(home / ".cursor" / "mcp.json", {"mcpServers": {"user-server": {"command": "u"}}})
    vscode = write(project / ".vscode" / "mcp.json", {"servers": {"project-server": {"command": "p"}}})
    assert mcp_sync.find_config(cwd=project) == vscode
    assert mcp_sync.find_config("user-server", cwd=project) == cursor
    assert mcp_sync.find_config("project-server", cwd=project) == vscode
    with pytest.raises(mcp_sync.ConfigError, match="defining server 'nobody'") as info:
        mcp_sync.find_config("nobody", cwd=project)
    assert "disabled" not in str(info.value)
    # A server found disabled is said to be: "no file defining it" sent the user looking elsewhere.
    dot = write(project / ".mcp.json", {"mcpServers": {"off": {"command": "o", "disabled": True}}})
    with pytest.raises(mcp_sync.ConfigError) as info:
        mcp_sync.find_config("off", cwd=project)
    assert str(info.value).endswith(f"; it is disabled in {dot} (its \"disabled\": true)")


# -- connecting -------------------------------------------------------------------------


def test_connect_configured_runs_a_stdio_entry(tmp_path, monkeypatch):
    monkeypatch.setenv("DEMO_NAME", "configured-demo")
    path = write(tmp_path / ".mcp.json", {"mcpServers": {"demo": {
        "command": sys.executable, "args": ["-m", "mcp_sync.testing", "--name", "${DEMO_NAME}"],
        "env": {"PYTHONPATH": os.pathsep.join(sys.path)},
    }}})
    with mcp_sync.connect_configured("demo", config=path, timeout=10) as client:
        assert client.server_info.name == "configured-demo"
        assert client.call_tool("echo", {"text": "from a config file"}).text == "from a config file"
    # With no config given, the usual places are searched (the project's .mcp.json here).
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "nohome"))
    with mcp_sync.connect_configured("demo", timeout=10) as client:
        assert client.transport_kind == "stdio"
    with pytest.raises(mcp_sync.ConfigError, match="servers: demo"):
        mcp_sync.connect_configured("other", config=path)


def test_http_entry_sends_the_substituted_headers(monkeypatch):
    monkeypatch.setenv("SECRET_TOKEN", "s3cret")
    with HTTPServer(demo_server()) as http:
        config = mcp_sync.load_config({"mcpServers": {"web": {
            "type": "http", "url": http.url, "headers": {"Authorization": "Bearer ${env:SECRET_TOKEN}"},
        }}})
        with mcp_sync.connect_configured("web", config=config, timeout=10) as client:
            assert client.call_tool("echo", {"text": "over http"}).text == "over http"
        sent = [r.headers.get("Authorization") for r in http.requests if r.method == "POST"]
    assert sent and set(sent) == {"Bearer s3cret"}


def test_sse_entry_connects_over_the_old_transport(monkeypatch):
    monkeypatch.setenv("SSE_KEY", "k")
    with SSEServer(demo_server()) as sse:
        config = mcp_sync.load_config({"mcpServers": {"old": {"type": "sse", "url": sse.url,
                                                               "headers": {"X-Key": "${SSE_KEY}"}}}})
        with mcp_sync.connect(config["old"], timeout=10) as client:
            assert client.transport_kind == "sse"
            assert client.call_tool("echo", {"text": "old"}).text == "old"
        keys = {r.headers.get("X-Key") for r in sse.requests}
    assert keys == {"k"}


def test_http_options_apply_to_a_configured_url_server_and_not_to_a_program(tmp_path):
    # connect_configured(name, verify=...) raised "only apply to a URL
    # target; set them on the HTTP(...) or Stdio(...) target instead", and
    # the integrations' MCP_CLIENT_OPTIONS made every request fail.
    from mcp_sync.contrib._clients import Clients

    with HTTPServer(demo_server()) as http:
        path = write(tmp_path / ".mcp.json", {"mcpServers": {
            "remote": {"url": http.url, "headers": {"X-Team": "file", "X-Entry": "kept"}},
            "local": {"command": sys.executable, "args": ["-m", "mcp_sync.testing.server"]},
        }})
        options = {"timeout": 10, "headers": {"x-team": "given"}, "connect_timeout": 5}
        with mcp_sync.connect_configured("remote", config=path, **options) as client:
            assert client.call_tool("echo", {"text": "hi"}).text == "hi"
        clients = Clients(lambda: (mcp_sync.load_config(path), options))
        try:
            assert clients.get("remote").call_tool("echo", {"text": "web"}).text == "web"
            assert clients.get("local").call_tool("echo", {"text": "program"}).text == "program"
        finally:
            clients.close()
        sent = [(r.headers.get("X-Team"), r.headers.get("X-Entry")) for r in http.requests]
    assert sent and set(sent) == {("given", "kept")}


def test_http_options_of_the_integrations_are_checked_at_start():
    from mcp_sync.contrib._clients import problems

    found = problems({"d": {"command": "x"}}, None, {"timeout": 5, "connect_timeout": -1})
    assert [problem.id for problem in found] == ["E004"]
    assert "connect_timeout must be a positive, finite number of seconds" in found[0].msg


def test_a_utf16_file_is_read_and_other_text_is_told_to_be_utf8(tmp_path):
    # PowerShell's `>` writes UTF-16 with a BOM: it was refused with a
    # codec's words ("'utf-8' codec can't decode byte 0xff ...").
    text = json.dumps({"mcpServers": {"demo": {"command": "demo-server"}}})
    path = tmp_path / "mcp.json"
    path.write_bytes(text.encode("utf-16"))
    assert list(mcp_sync.load_config(path)) == ["demo"]
    path.write_bytes(json.dumps({"mcpServers": {"demo": {"command": "d\u00e9mo"}}}, ensure_ascii=False).encode("latin-1"))
    with pytest.raises(mcp_sync.ConfigError, match=r"is not UTF-8 text \(invalid continuation byte at byte \d+\): "
                                                   r"save it as UTF-8"):
        mcp_sync.load_config(path)
