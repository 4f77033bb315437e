"""The reference `everything` server's tools that need more of the protocol
than a call and its answer, over stdio and Streamable HTTP: 2025-11-25
tasks (`simulate-research-query`, which runs only as a task), a URL
elicitation refused with -32042 and retried, and roots that change during
the session."""

from __future__ import annotations

import threading

import pytest

import mcp_sync
from mcp_sync import Task
from tests.helpers import wait_until
from tests.interop import everything_peer
from tests.interop.listening import free_port

RESEARCH = "simulate-research-query"


@pytest.fixture(scope="module")
def http_url():
    with everything_peer.http_server(free_port()) as url:
        yield url


@pytest.fixture(params=["stdio", "http"])
def target(request):
    if request.param == "stdio":
        return everything_peer.stdio_command()
    return request.getfixturevalue("http_url")


def first_choice(asked):
    """A form handler that picks the first interpretation the server offers."""

    def form(params):
        asked.append(params["message"])
        options = params["requestedSchema"]["properties"]["interpretation"]["oneOf"]
        return {"action": "accept", "content": {"interpretation": options[0]["const"]}}

    return form


# -- tasks (2025-11-25) ----------------------------------------------------------------------


def test_a_tool_that_runs_only_as_a_task_is_run_as_one_by_a_plain_call(target):
    with mcp_sync.connect(target) as client:
        assert client.protocol_version == "2025-11-25"
        assert client.server_capabilities["tasks"]["requests"] == {"tools": {"call": {}}}
        tool = next(t for t in client.list_tools() if t.name == RESEARCH)
        assert tool.task_support == "required"
        result = client.call_tool(RESEARCH, {"topic": "tides"})
    assert not result.is_error, result.text
    assert result.text.startswith("# Research Report: tides")


def test_a_task_handle_waits_answers_the_servers_question_and_is_listed(target):
    asked = []
    with mcp_sync.connect(target, input_handlers={"form": first_choice(asked)}) as client:
        task = client.call_tool(RESEARCH, {"topic": "python", "ambiguous": True}, task=True)
        assert isinstance(task, Task) and task.id and task.status == "working"
        assert task.poll_interval == 1.0 and task.ttl == 300.0
        result = task.wait(timeout=60)
        assert task.status == "completed" and task.done
        assert task.wait(timeout=1) is result  # settled: the same result, nothing sent
        listed = {t.id: t.status for t in client.list_tasks()}
    assert "# Research Report: python (programming)" in result.text
    assert asked == ['The research query "python" could have multiple interpretations. '
                     "Please clarify what you're looking for:"]
    assert listed[task.id] == "completed"


def test_a_cancelled_task_raises_task_cancelled_and_cancel_stays_idempotent(target):
    with mcp_sync.connect(target) as client:
        task = client.call_tool(RESEARCH, {"topic": "slow"}, task=True)
        task.cancel()
        assert task.status == "cancelled"
        with pytest.raises(mcp_sync.TaskCancelled) as info:
            task.wait(timeout=10)
        assert info.value.task_id == task.id
        task.cancel()  # the server refuses a finished task with -32602: not an error here
        again = client.get_task(task.id)
        assert again.status == "cancelled"


def test_sixteen_threads_each_wait_for_their_own_task(target):
    topics = [f"topic-{n}" for n in range(16)]
    results: dict[str, str] = {}
    with mcp_sync.connect(target) as client:
        tasks = {topic: client.call_tool(RESEARCH, {"topic": topic}, task=True) for topic in topics}

        def wait(topic):
            results[topic] = tasks[topic].wait(timeout=60).text

        threads = [threading.Thread(target=wait, args=(topic,)) for topic in topics]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert sorted(results) == sorted(topics)
    for topic, text in results.items():
        assert text.startswith(f"# Research Report: {topic}\n")


# -- URL elicitation required (-32042) --------------------------------------------------------


def test_url_elicitation_required_is_answered_by_the_url_handler_and_the_call_retried_once(target):
    seen = []

    def url(params):
        seen.append((params["url"], threading.get_ident()))
        return {"action": "accept"}

    arguments = {"url": "https://example.com/consent", "errorPath": True}
    with mcp_sync.connect(target, input_handlers={"url": url}) as client:
        result = client.call_tool("trigger-url-elicitation", arguments)
    assert not result.is_error, result.text
    assert "User completed the URL elicitation flow" in result.text
    # First the prerequisite the -32042 named (on the caller's thread), then
    # the retried call's own elicitation/create for the URL it was given.
    assert [u for u, _ in seen] == ["https://modelcontextprotocol.io", "https://example.com/consent"]
    assert seen[0][1] == threading.get_ident()


def test_without_a_url_handler_the_refusal_is_typed(target):
    # A form handler declares elicitation; the url mode is declared by hand.
    with mcp_sync.connect(target, input_handlers={"form": lambda params: {"action": "cancel"}},
                          client_capabilities={"elicitation": {"url": {}}}) as client:
        with pytest.raises(mcp_sync.UrlElicitationRequired) as info:
            client.call_tool("trigger-url-elicitation", {"url": "https://example.com/x", "errorPath": True})
    assert info.value.code == -32042
    assert [e["url"] for e in info.value.elicitations] == ["https://modelcontextprotocol.io"]
    assert info.value.elicitations[0]["elicitationId"]


# -- roots that change -------------------------------------------------------------------------


def test_roots_that_change_are_fetched_again_by_the_server(target):
    folders = ["file:///srv/project"]
    handlers = {"roots": lambda params: {"roots": [{"uri": uri, "name": uri.rsplit("/", 1)[1]} for uri in folders]}}
    with mcp_sync.connect(target, input_handlers=handlers,
                          client_capabilities={"roots": {"listChanged": True}}) as client:
        before = client.call_tool("get-roots-list").text
        assert "file:///srv/project" in before and "file:///srv/data" not in before
        folders.append("file:///srv/data")
        assert client.roots_changed() is True
        wait_until(lambda: "file:///srv/data" in client.call_tool("get-roots-list").text)
        assert "file:///srv/project" in client.call_tool("get-roots-list").text


# -- a pin the server does not speak ---------------------------------------------------------


def test_a_stateless_pin_is_refused_at_connect_naming_the_servers_answer(target):
    # The server speaks only the initialize era, but serves requests without
    # initialize under its own rules: before the probe confirmed pins, this
    # connect() succeeded and listed its tools.
    with pytest.raises(mcp_sync.VersionNegotiationError) as info:
        mcp_sync.connect(target, protocol="2026-07-28")
    said = str(info.value)
    assert "does not speak the pinned protocol version 2026-07-28" in said
    if target == everything_peer.stdio_command():
        assert "server/discover answered error -32601: Method not found" in said
    else:  # the TS SDK's 400 for a request without a session, with its JSON-RPC error
        assert "server/discover answered error -32000: Bad Request" in said
    assert "protocol=None" in said
