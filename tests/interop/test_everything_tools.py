"""A full tour of the reference `@modelcontextprotocol/server-everything`
(pinned in `everything/package.json`), over stdio and Streamable HTTP: every
tool it offers called with real arguments and its real answer checked,
the tools it shows only to clients that declare sampling, elicitation or
roots, its resources (static, templated, made by a tool, unknown), its
prompts and completions, its log messages, resource updates on a
`listen()`, and sixteen threads calling a mix of tools at once.

Left to other modules: `simulate-research-query` (a task-augmented tool),
the `trigger-url-elicitation*` tools, and roots that change. The
`trigger-*-request-async` tools appear only for a client that declares it
runs sampling or elicitation requests as tasks (`tasks.requests`, which
this client declares for the kinds it has handlers for): the server sends
its question with `params.task`, polls the client's `tasks/get` every
second and fetches the answer with `tasks/result`.

The expected answers come from the pinned server's source
(`.interop/everything-<version>/node_modules/@modelcontextprotocol/server-everything/dist/`).
"""

from __future__ import annotations

import base64
import collections
import gzip
import json
import logging
import re
import threading

import jsonschema
import pytest

import mcp_sync
from tests.helpers import next_event, wait_until
from tests.interop import everything_peer
from tests.interop.listening import free_port

#: An environment variable given to the server process, which `get-env` must show.
MARK = ("MCP_SYNC_EVERYTHING_TOUR", "tour-7f3a")

#: The tools offered to every client.
BASE_TOOLS = {
    "echo", "get-annotated-message", "get-env", "get-resource-links", "get-resource-reference",
    "get-structured-content", "get-sum", "get-tiny-image", "gzip-file-as-resource",
    "simulate-research-query", "toggle-simulated-logging", "toggle-subscriber-updates",
    "trigger-long-running-operation",
}
#: The tools offered only to a client that declares the capability of this
#: input handler kind (the `-async` ones: and runs such requests as tasks).
CONDITIONAL_TOOLS = {"sampling": {"trigger-sampling-request", "trigger-sampling-request-async"},
                     "form": {"trigger-elicitation-request", "trigger-elicitation-request-async"},
                     "roots": {"get-roots-list"}}

STATIC_DOCS = ["architecture.md", "extension.md", "features.md", "how-it-works.md", "instructions.md",
               "startup.md", "structure.md"]
TEXT_TEMPLATE = "demo://resource/dynamic/text/{resourceId}"
BLOB_TEMPLATE = "demo://resource/dynamic/blob/{resourceId}"

WEATHER = {
    "New York": {"temperature": 33, "conditions": "Cloudy", "humidity": 82},
    "Chicago": {"temperature": 36, "conditions": "Light rain / drizzle", "humidity": 82},
    "Los Angeles": {"temperature": 73, "conditions": "Sunny / Clear", "humidity": 48},
}
TEAMS = {"Engineering": ["Alice", "Bob", "Charlie"], "Sales": ["David", "Eve", "Frank"],
         "Marketing": ["Grace", "Henry", "Iris"], "Support": ["John", "Kim", "Lee"]}

ROOTS = [{"uri": "file:///srv/tour/project", "name": "project"}, {"uri": "file:///srv/tour/notes"}]
FORM = {"name": "Ada Lovelace", "check": True, "email": "ada@example.com", "integer": 7, "number": 2.5,
        "untitledSingleSelectEnum": "Joey"}

#: What `toggle-simulated-logging` sends (before its session suffix), and the
#: Python level each lands at on the `mcp_sync.server` logger.
SIMULATED_LOGS = {
    "Debug-level message": logging.DEBUG, "Info-level message": logging.INFO,
    "Notice-level message": logging.INFO, "Warning-level message": logging.WARNING,
    "Error-level message": logging.ERROR, "Critical-level message": logging.CRITICAL,
    "Alert level-message": logging.CRITICAL, "Emergency-level message": logging.CRITICAL,
}


# -- the server, over each transport ----------------------------------------------------------------


@pytest.fixture(scope="module")
def http_url():
    with everything_peer.http_server(free_port(), env=dict([MARK])) as url:
        yield url


@pytest.fixture(params=["stdio", "http"])
def target(request):
    if request.param == "stdio":
        return everything_peer.stdio_target(env=dict([MARK]))
    return request.getfixturevalue("http_url")


def is_http(target) -> bool:
    return isinstance(target, str)


class Answers:
    """The client's side of the server's questions: each input handler
    records what it was asked, and on which thread, and answers."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.asked: dict[str, list[tuple[dict, threading.Thread]]] = collections.defaultdict(list)
        self.form_answer: dict = {"action": "accept", "content": FORM}

    def _record(self, kind: str, params: dict) -> None:
        with self.lock:
            self.asked[kind].append((params, threading.current_thread()))

    def sampling(self, params):
        self._record("sampling", params)
        prompt = params["messages"][0]["content"]["text"]
        return {"role": "assistant", "content": {"type": "text", "text": f"model says: {prompt}"},
                "model": "tour-model", "stopReason": "endTurn"}

    def form(self, params):
        self._record("form", params)
        return self.form_answer

    def roots(self, params):
        self._record("roots", params)
        return {"roots": ROOTS}

    def handlers(self, kinds=("sampling", "form", "roots")):
        return {kind: getattr(self, kind) for kind in kinds}


#: Every input handler kind; most tests leave roots out: a stdio server that
#: asked for roots after the client closed its stdin waits for the answer
#: (and `close()` for its `shutdown_timeout`) before it exits.
ALL_KINDS = ("sampling", "form", "roots")


def connect(target, answers: Answers | None = None, kinds=("sampling", "form"), **options):
    handlers = (answers or Answers()).handlers(kinds)
    return mcp_sync.connect(target, input_handlers=handlers, **options)


def session_suffix(client) -> str:
    """How the server names the session in its texts ("undefined" over stdio)."""
    return client.session_id or "undefined"


# -- who the server is, and which tools it shows to whom -------------------------------------------------


@pytest.mark.parametrize("kinds", [(), ("sampling",), ("form",), ("roots",), ("sampling", "form", "roots")],
                         ids=["none", "sampling", "form", "roots", "all"])
def test_the_tools_offered_follow_the_declared_capabilities(target, kinds):
    answers = Answers()
    with connect(target, answers, kinds=kinds) as client:
        assert client.protocol_version == "2025-11-25"
        assert (client.server_info.name, client.server_info.version) == ("mcp-servers/everything", "2.0.0")
        assert client.server_capabilities["resources"] == {"subscribe": True, "listChanged": True}
        tools = {tool.name: tool for tool in client.list_tools()}
        assert set(tools) == BASE_TOOLS.union(*(CONDITIONAL_TOOLS[kind] for kind in kinds))
        assert tools["echo"].input_schema["required"] == ["message"]
        assert tools["echo"].annotations == {"readOnlyHint": True, "destructiveHint": False,
                                             "idempotentHint": True, "openWorldHint": False}
        assert tools["get-structured-content"].output_schema["required"] == ["temperature", "conditions", "humidity"]
        if "roots" in kinds:  # a client that declares roots is asked for them after `initialized`
            assert wait_until(lambda: answers.asked["roots"], 10)


# -- the plain tools -----------------------------------------------------------------------------------------------


def test_echo_sum_and_env(target):
    with connect(target) as client:
        assert client.call_tool("echo", {"message": "grüße, 世界 ✓"}).text == "Echo: grüße, 世界 ✓"
        assert client.call_tool("get-sum", {"a": 2.5, "b": 40}).text == "The sum of 2.5 and 40 is 42.5."
        assert client.call_tool("get-sum", {"a": -7, "b": 3}).text == "The sum of -7 and 3 is -4."
        env = json.loads(client.call_tool("get-env").text)
        assert env[MARK[0]] == MARK[1]


def test_bad_arguments_fail_the_tool_and_the_prompt(target):
    with connect(target) as client:
        refused = client.call_tool("echo", {})
        assert refused.is_error
        assert "Input validation error" in refused.text and "message" in refused.text
        with pytest.raises(mcp_sync.ToolError):
            refused.raise_for_error()
        unknown = client.call_tool("no-such-tool", {})
        assert unknown.is_error and "Tool no-such-tool not found" in unknown.text
        with pytest.raises(mcp_sync.InvalidParams, match="city"):
            client.get_prompt("args-prompt", {})


def tiny_png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_tiny_image_and_annotated_messages(target):
    with connect(target) as client:
        image = client.call_tool("get-tiny-image")
        first, picture, last = image.content
        assert (first.text, last.text) == ("Here's the image you requested:", "The image above is the MCP logo.")
        assert isinstance(picture, mcp_sync.ImageContent) and picture.mime_type == "image/png"
        assert tiny_png_size(picture.bytes) == (20, 20)

        expected = {
            "error": ("Error: Operation failed", {"priority": 1, "audience": ["user", "assistant"]}),
            "success": ("Operation completed successfully", {"priority": 0.7, "audience": ["user"]}),
            "debug": ("Debug: Cache hit ratio 0.95, latency 150ms", {"priority": 0.3, "audience": ["assistant"]}),
        }
        for kind, (text, wanted) in expected.items():
            (block,) = client.call_tool("get-annotated-message", {"messageType": kind}).content
            assert (block.text, block.annotations) == (text, wanted)
        block, annotated_image = client.call_tool("get-annotated-message",
                                                  {"messageType": "success", "includeImage": True}).content
        assert block.text == "Operation completed successfully"
        assert isinstance(annotated_image, mcp_sync.ImageContent)
        assert annotated_image.annotations == {"priority": 0.5, "audience": ["user"]}
        assert annotated_image.bytes == picture.bytes


def test_structured_content_matches_its_output_schema(target):
    with connect(target) as client:
        tool = {t.name: t for t in client.list_tools()}["get-structured-content"]
        for city, weather in WEATHER.items():
            result = client.call_tool("get-structured-content", {"location": city})
            assert result.structured_content == weather
            jsonschema.validate(result.structured_content, tool.output_schema)
            assert json.loads(result.text) == weather  # the backward-compatible text block
        # The client checks the output against the schema it knows: a schema
        # this answer does not meet fails the call.
        stricter = {**tool.to_wire(), "outputSchema": {**tool.output_schema, "required": ["windSpeed"]}}
        with pytest.raises(mcp_sync.OutputValidationError) as info:
            client.call_tool(stricter, {"location": "Chicago"})
        assert info.value.result["structuredContent"] == WEATHER["Chicago"]


def test_resource_links_and_references(target):
    with connect(target) as client:
        links = client.call_tool("get-resource-links", {"count": 4})
        intro, *blocks = links.content
        assert intro.text == "Here are 4 resource links to resources available in this server:"
        assert all(isinstance(block, mcp_sync.ResourceLink) for block in blocks)
        assert [(b.uri, b.name, b.mime_type) for b in blocks] == [
            ("demo://resource/dynamic/blob/1", "Blob Resource 1", "text/plain"),
            ("demo://resource/dynamic/text/2", "Text Resource 2", "text/plain"),
            ("demo://resource/dynamic/blob/3", "Blob Resource 3", "text/plain"),
            ("demo://resource/dynamic/text/4", "Text Resource 4", "text/plain"),
        ]
        for n, block in enumerate(blocks, 1):  # each link leads to its resource
            (part,) = client.read_resource(block.uri).contents
            assert part.uri == block.uri
            body = part.text if isinstance(part, mcp_sync.TextResourceContents) else part.bytes.decode()
            assert body.startswith(f"Resource {n}: ")

        text_ref = client.call_tool("get-resource-reference", {"resourceType": "Text", "resourceId": 5})
        before, embedded, after = text_ref.content
        assert before.text == "Returning resource reference for Resource 5:"
        assert after.text == "You can access this resource using the URI: demo://resource/dynamic/text/5"
        assert isinstance(embedded, mcp_sync.EmbeddedResource)
        assert isinstance(embedded.resource, mcp_sync.TextResourceContents)
        assert embedded.resource.uri == "demo://resource/dynamic/text/5"
        assert re.fullmatch(r"Resource 5: This is a plaintext resource created at .+", embedded.resource.text)

        (_, blob_ref, _) = client.call_tool("get-resource-reference", {"resourceType": "Blob", "resourceId": 6}).content
        assert isinstance(blob_ref.resource, mcp_sync.BlobResourceContents)
        assert blob_ref.resource.uri == "demo://resource/dynamic/blob/6"
        assert re.fullmatch(rb"Resource 6: This is a base64 blob created at .+", blob_ref.resource.bytes)


def test_gzip_file_as_resource_from_a_data_uri(target):
    original = "line of the tour\n".encode() * 40
    data_uri = "data:text/plain;base64," + base64.b64encode(original).decode()
    with connect(target) as client:
        embedded = client.call_tool("gzip-file-as-resource",
                                    {"name": "tour-embedded.txt.gz", "data": data_uri, "outputType": "resource"})
        (block,) = embedded.content
        assert isinstance(block, mcp_sync.EmbeddedResource)
        assert (block.resource.uri, block.resource.mime_type) == ("demo://resource/session/tour-embedded.txt.gz",
                                                                   "application/gzip")
        assert gzip.decompress(block.resource.bytes) == original

        # As a link: the tool registers a session resource, which the server announces.
        with client.listen(resources_list_changed=True) as sub:
            assert sub.accepted == {"resourcesListChanged": True}
            linked = client.call_tool("gzip-file-as-resource", {"name": "tour-link.txt.gz", "data": data_uri})
            event = next_event(sub, mcp_sync.Notification, 10)
            assert event.method == "notifications/resources/list_changed"
        (link,) = linked.content
        assert isinstance(link, mcp_sync.ResourceLink)
        assert (link.uri, link.name, link.mime_type) == ("demo://resource/session/tour-link.txt.gz",
                                                         "tour-link.txt.gz", "application/gzip")
        assert link.uri in {resource.uri for resource in client.list_resources()}
        (part,) = client.read_resource(link.uri).contents
        assert isinstance(part, mcp_sync.BlobResourceContents) and part.mime_type == "application/gzip"
        assert gzip.decompress(part.bytes) == original


def test_a_long_running_operation_reports_each_step(target):
    with connect(target) as client:
        seen = []
        result = client.call_tool("trigger-long-running-operation", {"duration": 0.3, "steps": 3},
                                  progress=lambda p: seen.append((p.progress, p.total, threading.current_thread())))
        assert result.text == "Long running operation completed. Duration: 0.3 seconds, Steps: 3."
        assert [(progress, total) for progress, total, _ in seen] == [(1, 3), (2, 3), (3, 3)]
        assert {thread for _, _, thread in seen} == {threading.current_thread()}


# -- the tools that ask the client back --------------------------------------------------------------------


def test_the_sampling_handler_answers_the_server(target):
    answers = Answers()
    with connect(target, answers) as client:
        result = client.call_tool("trigger-sampling-request", {"prompt": "name a prime", "maxTokens": 12})
        (params, thread), = answers.asked["sampling"]
        assert params["messages"] == [{"role": "user", "content": {
            "type": "text", "text": "Resource trigger-sampling-request context: name a prime"}}]
        assert (params["maxTokens"], params["systemPrompt"]) == (12, "You are a helpful test server.")
        # On the calling thread: over HTTP the call's own question; over stdio
        # the one call waiting adopts a question that names no call.
        assert thread is threading.current_thread()
        head, _, sampled = result.text.partition("\n")
        assert head == "LLM sampling result: "
        assert json.loads(sampled) == {
            "role": "assistant", "model": "tour-model", "stopReason": "endTurn",
            "content": {"type": "text", "text": "model says: Resource trigger-sampling-request context: name a prime"}}


def raw_result(block) -> dict:
    head, _, raw = block.text.partition("Raw result: ")
    assert head == "\n"
    return json.loads(raw)


def test_the_form_handler_answers_the_elicitation(target):
    answers = Answers()
    with connect(target, answers) as client:
        accepted = client.call_tool("trigger-elicitation-request")
        (params, thread), = answers.asked["form"]
        assert params["message"] == "Please provide inputs for the following fields:"
        assert params["requestedSchema"]["required"] == ["name"]
        # On the calling thread: over HTTP the call's own question; over stdio
        # the one call waiting adopts a question that names no call.
        assert thread is threading.current_thread()
        thanks, inputs, raw = accepted.content
        assert thanks.text == "✅ User provided the requested information!"
        assert inputs.text == ("User inputs:\n- Name: Ada Lovelace\n- Agreed to terms: true\n- Email: ada@example.com\n"
                               "- Favorite Integer: 7\n- Favorite Number: 2.5")
        assert raw_result(raw) == {"action": "accept", "content": FORM}

        answers.form_answer = {"action": "decline"}
        declined, raw = client.call_tool("trigger-elicitation-request").content
        assert declined.text == "❌ User declined to provide the requested information."
        assert raw_result(raw) == {"action": "decline"}


def task_id_and_polls(progress: str) -> tuple[str, list[str]]:
    """The task id and the polled statuses from the tool's "Progress:" lines."""
    created, *polls = progress.strip().splitlines()
    assert created.startswith("Task created: ")
    return created.removeprefix("Task created: "), [re.sub(r"^Poll \d+: ", "", line) for line in polls]


def test_an_elicitation_sent_as_a_task_is_answered_through_the_client_task(target):
    answers = Answers()
    with connect(target, answers) as client:
        done, inputs, trace = client.call_tool("trigger-elicitation-request-async", timeout=60).content
        assert done.text == "[COMPLETED] User provided the requested information!"
        assert inputs.text == "User inputs:\n- Name: Ada Lovelace"
        progress, _, raw = trace.text.partition("\n\nRaw result: ")
        task_id, polls = task_id_and_polls(progress.removeprefix("\nProgress:\n"))
        # Polled each second: "working" until the handler returned (at once, so seldom seen).
        assert polls[-1] == "completed" and set(polls) <= {"working", "completed"}
        # `tasks/result` gives the handler's answer, tagged with the task it came from.
        assert json.loads(raw) == {"action": "accept", "content": FORM,
                                   "_meta": {"io.modelcontextprotocol/related-task": {"taskId": task_id}}}
        (params, thread), = answers.asked["form"]
        assert params["message"] == "Please provide inputs for the following fields (async task demo):"
        assert "task" not in params  # the handler sees the question as a plain request would
        # In the background, on a handler thread: the call's thread answers the polls meanwhile.
        assert thread.name.startswith("mcp-sync-handler-")

        answers.form_answer = {"action": "decline"}
        declined, _ = client.call_tool("trigger-elicitation-request-async", timeout=60).content
        assert declined.text == "[DECLINED] User declined to provide the requested information."


def test_a_sampling_request_sent_as_a_task_is_answered_through_the_client_task(target):
    answers = Answers()
    with connect(target, answers) as client:
        text = client.call_tool("trigger-sampling-request-async", {"prompt": "name a prime", "maxTokens": 12},
                                timeout=60).text
        head, _, rest = text.partition("\n\n**Progress:**\n")
        assert head == "[COMPLETED] Async sampling completed!"
        progress, _, raw = rest.partition("\n\n**Result:**\n")
        task_id, polls = task_id_and_polls(progress)
        assert polls[-1] == "completed" and set(polls) <= {"working", "completed"}
        assert json.loads(raw) == {
            "role": "assistant", "model": "tour-model", "stopReason": "endTurn",
            "content": {"type": "text",
                        "text": "model says: Resource trigger-sampling-request-async context: name a prime"},
            "_meta": {"io.modelcontextprotocol/related-task": {"taskId": task_id}}}
        (params, _), = answers.asked["sampling"]
        assert params["maxTokens"] == 12 and "task" not in params


def test_the_roots_given_at_connect_come_back(target):
    answers = Answers()
    with connect(target, answers, ALL_KINDS) as client:
        result = client.call_tool("get-roots-list")
        assert result.text.startswith(
            "Current MCP Roots (2 total):\n\n"
            "1. project\n   URI: file:///srv/tour/project\n\n"
            "2. Unnamed Root\n   URI: file:///srv/tour/notes\n\n"
            "Note: This server demonstrates the roots protocol capability")
        # The server asked (350 ms after `initialized`, and for this call if
        # that had not come yet) and keeps the answer.
        assert client.call_tool("get-roots-list").text == result.text
        asked = [params for params, _ in answers.asked["roots"]]
        assert asked and all(params == {} for params in asked)


# -- what the server sends of its own accord ----------------------------------------------------------------------


def test_simulated_logging_reaches_the_server_logger(target, caplog):
    answers = Answers()
    with caplog.at_level(logging.DEBUG, logger="mcp_sync.server"), \
            connect(target, answers, ALL_KINDS, log_level="debug") as client:
        def server_logs():
            return [(r.levelno, r.getMessage()) for r in caplog.records if r.name.startswith("mcp_sync.server") and r.name != "mcp_sync.server.stderr"]

        # The server logs the roots it got; over HTTP that comes on the
        # session's GET stream, as the simulated messages will.
        roots_logged = (logging.INFO, "[everything-server] Roots updated: 2 root(s) received from client")
        assert wait_until(lambda: roots_logged in server_logs(), 10), server_logs()

        suffix = f" - SessionId {client.session_id}" if client.session_id else ""
        expected = {text + suffix: level for text, level in SIMULATED_LOGS.items()}
        started = client.call_tool("toggle-simulated-logging").text
        assert started.startswith(f"Started simulated, random-leveled logging for session {session_suffix(client)} ")
        # One message at once, then one every 5 seconds.
        assert wait_until(lambda: any(text in expected for _, text in server_logs()), 12), server_logs()
        level, text = next((level, text) for level, text in server_logs() if text in expected)
        assert level == expected[text]
        stopped = client.call_tool("toggle-simulated-logging").text
        assert stopped == f"Stopped simulated logging for session {session_suffix(client)}"


def test_subscribed_resource_updates_arrive_on_listen(target):
    answers = Answers()
    uri = "demo://resource/dynamic/text/7"
    with connect(target, answers, ALL_KINDS) as client:
        # Over HTTP the updates come on the session's GET stream: the
        # server's roots request came the same way, so it is open.
        assert wait_until(lambda: answers.asked["roots"], 10)
        with client.listen(resource_subscriptions=[uri], tools_list_changed=True) as sub:
            assert sub.accepted == {"resourceSubscriptions": [uri], "toolsListChanged": True}
            started = client.call_tool("toggle-subscriber-updates").text
            assert started.startswith(f"Started simulated resource updated notifications for session "
                                      f"{session_suffix(client)} ")
            event = next_event(sub, mcp_sync.Notification, 12)
            assert (event.method, event.params) == ("notifications/resources/updated", {"uri": uri})
            stopped = client.call_tool("toggle-subscriber-updates").text
            assert stopped == f"Stopped simulated resource updates for session {session_suffix(client)}"
        assert client.read_resource(uri).text.startswith("Resource 7: ")


# -- resources, prompts, completions ------------------------------------------------------------------------


def test_resources_listed_and_read(target):
    with connect(target) as client:
        listed = client.list_resources()
        assert [(r.uri, r.name, r.mime_type) for r in listed] == [
            (f"demo://resource/static/document/{name}", name, "text/markdown") for name in STATIC_DOCS]
        templates = client.list_resource_templates()
        assert [(t.uri_template, t.name, t.mime_type) for t in templates] == [
            (TEXT_TEMPLATE, "Dynamic Text Resource", "text/plain"),
            (BLOB_TEMPLATE, "Dynamic Blob Resource", "application/octet-stream")]

        # The static instructions document is what the server said at initialize.
        (doc,) = client.read_resource("demo://resource/static/document/instructions.md").contents
        assert isinstance(doc, mcp_sync.TextResourceContents) and doc.mime_type == "text/markdown"
        assert doc.text == client.instructions and len(doc.text) > 100

        (text,) = client.read_resource("demo://resource/dynamic/text/12").contents
        assert (text.uri, text.mime_type) == ("demo://resource/dynamic/text/12", "text/plain")
        assert re.fullmatch(r"Resource 12: This is a plaintext resource created at .+", text.text)
        (blob,) = client.read_resource("demo://resource/dynamic/blob/13").contents
        assert isinstance(blob, mcp_sync.BlobResourceContents) and blob.uri == "demo://resource/dynamic/blob/13"
        assert re.fullmatch(rb"Resource 13: This is a base64 blob created at .+", blob.bytes)


def test_an_unknown_resource_raises_resource_not_found(target):
    uri = "demo://resource/static/document/no-such-file.md"
    with connect(target) as client:
        with pytest.raises(mcp_sync.ResourceNotFound) as info:
            client.read_resource(uri)
        assert info.value.uri == uri


def test_prompts_listed_and_rendered(target):
    with connect(target) as client:
        prompts = {p.name: p for p in client.list_prompts()}
        assert {name: [(a.name, a.required) for a in p.arguments] for name, p in prompts.items()} == {
            "simple-prompt": [],
            "args-prompt": [("city", True), ("state", False)],
            "completable-prompt": [("department", True), ("name", True)],
            "resource-prompt": [("resourceType", True), ("resourceId", True)],
        }

        def texts(name, arguments=None):
            return [(m.role, m.content.text) for m in client.get_prompt(name, arguments).messages]

        assert texts("simple-prompt") == [("user", "This is a simple prompt without arguments.")]
        assert texts("args-prompt", {"city": "Lisbon"}) == [("user", "What's weather in Lisbon?")]
        assert texts("args-prompt", {"city": "Austin", "state": "Texas"}) == [
            ("user", "What's weather in Austin, Texas?")]
        assert texts("completable-prompt", {"department": "Sales", "name": "Eve"}) == [
            ("user", "Please promote Eve to the head of the Sales team.")]

        intro, embedded = client.get_prompt("resource-prompt", {"resourceType": "Text", "resourceId": "4"}).messages
        assert intro.content.text == ("This prompt includes the Text resource with id: 4. "
                                      "Please analyze the following resource:")
        assert embedded.role == "user" and isinstance(embedded.content, mcp_sync.EmbeddedResource)
        assert embedded.content.resource.uri == "demo://resource/dynamic/text/4"
        assert embedded.content.resource.text.startswith("Resource 4: This is a plaintext resource")
        _, blob = client.get_prompt("resource-prompt", {"resourceType": "Blob", "resourceId": "9"}).messages
        assert isinstance(blob.content.resource, mcp_sync.BlobResourceContents)
        assert blob.content.resource.bytes.startswith(b"Resource 9: This is a base64 blob")


def test_completions_for_prompts_and_templates(target):
    with connect(target) as client:
        prompts = {p.name: p for p in client.list_prompts()}
        team = prompts["completable-prompt"]
        assert client.complete(team, "department", "S").values == ["Sales", "Support"]
        assert client.complete(team, "department", "").values == list(TEAMS)
        # The second argument's suggestions depend on the first, given as context.
        assert client.complete(team, "name", "", context={"department": "Engineering"}).values == TEAMS["Engineering"]
        assert client.complete(team, "name", "E", context={"department": "Sales"}).values == ["Eve"]
        assert client.complete(team, "name", "", context={}).values == []
        by_name = {"type": "ref/prompt", "name": "resource-prompt"}
        assert client.complete(by_name, "resourceType", "B").values == ["Blob"]
        assert client.complete(prompts["resource-prompt"], "resourceId", "17").values == ["17"]

        text_template = next(t for t in client.list_resource_templates() if t.uri_template == TEXT_TEMPLATE)
        assert client.complete(text_template, "resourceId", "42").values == ["42"]
        assert client.complete(text_template, "resourceId", "forty-two").values == []


# -- sixteen threads at once ----------------------------------------------------------------------------


def test_sixteen_threads_each_get_their_own_answers(target):
    """Each thread calls a mix of tools (and a read, a completion), each
    with arguments of its own, and checks every answer is its own: nothing
    crossed, lost or duplicated, and the server's sampling requests were
    each answered with the prompt that caused them."""
    threads, calls = 16, 8
    answers = Answers()
    cities = list(WEATHER)
    departments = list(TEAMS)

    def one_call(client, n, i):
        """(what came back, what should have)"""
        tag = f"t{n}c{i}"
        ident = n * 100 + i + 1
        kind = (n + i) % 8
        if kind == 0:
            return client.call_tool("echo", {"message": tag}).text, f"Echo: {tag}"
        if kind == 1:
            return (client.call_tool("get-sum", {"a": n, "b": i * 1000}).text,
                    f"The sum of {n} and {i * 1000} is {n + i * 1000}.")
        if kind == 2:
            city = cities[(n + i) % 3]
            return client.call_tool("get-structured-content", {"location": city}).structured_content, WEATHER[city]
        if kind == 3:
            text = client.call_tool("trigger-sampling-request", {"prompt": tag}).text
            return (json.loads(text.partition("\n")[2])["content"]["text"],
                    f"model says: Resource trigger-sampling-request context: {tag}")
        if kind == 4:
            block = client.call_tool("get-resource-reference", {"resourceType": "Text", "resourceId": ident}).content[1]
            return block.resource.uri, f"demo://resource/dynamic/text/{ident}"
        if kind == 5:
            return (client.read_resource(f"demo://resource/dynamic/text/{ident}").text.split(":")[0],
                    f"Resource {ident}")
        if kind == 6:
            steps = []
            text = client.call_tool("trigger-long-running-operation", {"duration": 0.02, "steps": 2},
                                    progress=lambda p: steps.append(p.progress)).text
            return (text, steps), ("Long running operation completed. Duration: 0.02 seconds, Steps: 2.", [1, 2])
        department = departments[n % 4]
        return (client.complete({"type": "ref/prompt", "name": "completable-prompt"}, "name", "",
                                context={"department": department}).values, TEAMS[department])

    results = collections.defaultdict(list)
    errors = []
    barrier = threading.Barrier(threads)
    with connect(target, answers) as client:
        def worker(n):
            barrier.wait()
            try:
                for i in range(calls):
                    results[n].append(one_call(client, n, i))
            except Exception as exc:  # collected and asserted on below
                errors.append((n, exc))

        pool = [threading.Thread(target=worker, args=(n,), name=f"tour-{n}") for n in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in pool), "deadlock: some callers never returned"
    assert errors == []
    assert sorted(results) == list(range(threads))
    for n, pairs in results.items():
        assert len(pairs) == calls
        for got, expected in pairs:
            assert got == expected
    sampled = sorted(params["messages"][0]["content"]["text"] for params, _ in answers.asked["sampling"])
    assert sampled == sorted(f"Resource trigger-sampling-request context: t{n}c{i}"
                             for n in range(threads) for i in range(calls) if (n + i) % 8 == 3)
