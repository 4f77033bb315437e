"""Answers to the server's requests follow the revision the server settled
on, end to end over stdio: a handler writes the newest shape, a server that
negotiated an older revision gets that revision's shape, or an error saying
what its revision cannot carry (and the caller an `InputHandlerError`).

The client offers 2025-11-25 and the scripted server settles on an older
revision; everything the server received is checked against the schema of
the revision it settled on (`CreateMessageResult`, `ElicitResult`, the
JSON-RPC envelopes), not only the envelope the autouse check sees.

These tests need the session's revision told to `ServerRequests.settle()`
by the request pipeline (at `initialize`, before `notifications/initialized`).
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

import pytest

import mcp_sync
from mcp_sync.protocol import codes
from tests.test_server_requests import ASKER
from tests.testing.schema_util import validate

# The asking server of test_server_requests, settling on the revision in argv[1].
SETTLER = ASKER

OLDER = ("2025-06-18", "2025-03-26", "2024-11-05")
SAMPLE = {"messages": [{"role": "user", "content": {"type": "text", "text": "Say hi"}}], "maxTokens": 20}
TEXT = {"type": "text", "text": "hi"}
TOOL_USE = {"type": "tool_use", "id": "call-1", "name": "lookup", "input": {"q": "x"}}
AUDIO = {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"}


def sampled(content: Any) -> dict[str, Any]:
    return {"role": "assistant", "model": "m1", "content": content, "stopReason": "endTurn"}


@pytest.fixture
def settling(tmp_path):
    script = tmp_path / "settler.py"
    script.write_text(SETTLER)

    def connect(version: str, handlers: dict[str, Any]) -> mcp_sync.Client:
        # Offers 2025-11-25 first (what it declares follows it); the server settles on `version`.
        return mcp_sync.connect([sys.executable, str(script), version], protocol=("2025-11-25", version),
                                input_handlers=handlers)

    return connect


def ask(client: mcp_sync.Client, method: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    asked = [{"jsonrpc": "2.0", "id": "q1", "method": method, "params": params}]
    return json.loads(client.call_tool("ask", {"send": asked}, timeout=10).text)


def check_response(version: str, result_type: str, response: dict[str, Any]) -> None:
    """`response` is what `version`'s schema allows: its envelope and, for a result, `result_type`."""
    if "error" in response:
        validate(version, "JSONRPCError" if version <= "2025-06-18" else "JSONRPCErrorResponse", response)
    else:
        validate(version, "JSONRPCResponse" if version <= "2025-06-18" else "JSONRPCResultResponse", response)
        validate(version, result_type, response["result"])


@pytest.mark.parametrize("version", OLDER)
def test_a_one_block_list_reaches_an_older_server_as_its_single_block(settling, version):
    # 2025-11-25 made `content` a block or a list of blocks; before, it is
    # one block. The list of one says no more than its block: sent as it.
    with settling(version, {"sampling": lambda params: sampled([TEXT])}) as client:
        (answer,) = ask(client, "sampling/createMessage", SAMPLE)
    check_response(version, "CreateMessageResult", answer)
    assert answer["result"] == sampled(TEXT)


def refused_here(caplog, method: str) -> str:
    """The one warning the client logged for an answer it did not send to
    the server's `method` (a request no call is named for, adopted by the
    one call waiting on stdio: the engine answers it -32603 and logs why)."""
    (record,) = [r for r in caplog.records if r.name == "mcp_sync.connection" and r.levelname == "WARNING"
                 and f"the answer to the server's {method} was not sent" in r.getMessage()]
    return record.getMessage()


@pytest.mark.parametrize("version", OLDER)
@pytest.mark.parametrize("content, said", [
    ([TEXT, {"type": "text", "text": "there"}], "not a list of 2"),
    (TOOL_USE, "has no 'tool_use' content"),
    ([TOOL_USE], "has no 'tool_use' content"),
], ids=["two blocks", "tool use", "tool use in a list"])
def test_what_an_older_revision_cannot_carry_is_an_error_to_both_sides(settling, caplog, version, content, said):
    with settling(version, {"sampling": lambda params: sampled(content)}) as client:
        (answer,) = ask(client, "sampling/createMessage", SAMPLE)
    # The server gets an error saying what its revision cannot carry,
    # nothing half-valid...
    check_response(version, "CreateMessageResult", answer)
    assert answer["error"]["code"] == codes.INTERNAL_ERROR
    assert said in answer["error"]["message"] and f"protocol {version}" in answer["error"]["message"]
    # ... and the user is told the same.
    told = refused_here(caplog, "sampling/createMessage")
    assert said in told and f"protocol {version}" in told and "the sampling handler answered" in told


def test_audio_is_an_error_on_2024_11_05_and_is_sent_on_2025_03_26(settling, caplog):
    with settling("2024-11-05", {"sampling": lambda params: sampled(AUDIO)}) as client:
        (refused,) = ask(client, "sampling/createMessage", SAMPLE)
    check_response("2024-11-05", "CreateMessageResult", refused)
    assert refused["error"]["code"] == codes.INTERNAL_ERROR
    assert "protocol 2024-11-05 has no 'audio' content" in refused_here(caplog, "sampling/createMessage")
    with settling("2025-03-26", {"sampling": lambda params: sampled([AUDIO])}) as client:
        (answer,) = ask(client, "sampling/createMessage", SAMPLE)
    check_response("2025-03-26", "CreateMessageResult", answer)
    assert answer["result"]["content"] == AUDIO


MULTI = {"message": "Pick", "requestedSchema": {"type": "object", "properties": {
    "name": {"type": "string"},
    "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}}}}}


def test_a_multi_select_answer_is_an_error_on_2025_06_18_and_a_plain_one_is_sent(settling, caplog):
    # Lists in an elicitation's content came with 2025-11-25.
    def form(params):
        return {"action": "accept", "content": {"name": "Ada", "tags": ["a"]}}

    with settling("2025-06-18", {"form": form}) as client:
        (refused,) = ask(client, "elicitation/create", MULTI)
    check_response("2025-06-18", "ElicitResult", refused)
    assert refused["error"]["code"] == codes.INTERNAL_ERROR and "'tags'" in refused["error"]["message"]
    assert "no multi-select answers" in refused_here(caplog, "elicitation/create")
    with settling("2025-06-18", {"form": lambda params: {"action": "accept", "content": {"name": "Ada"}}}) as client:
        (answer,) = ask(client, "elicitation/create", MULTI)
    check_response("2025-06-18", "ElicitResult", answer)
    assert answer["result"] == {"action": "accept", "content": {"name": "Ada"}}


def test_elicitation_from_a_2025_03_26_server_is_refused_though_declared_for_2025_11_25(settling):
    # The client declared elicitation at an initialize for 2025-11-25; the
    # server settled on 2025-03-26, which has no elicitation/create (nor an
    # ElicitResult to answer with): a method the client does not handle.
    asked_the_handler = []

    def form(params):
        asked_the_handler.append(params)
        return {"action": "accept", "content": {"name": "Ada"}}

    with settling("2025-03-26", {"form": form}) as client:
        (answer,) = ask(client, "elicitation/create", MULTI)
    validate("2025-03-26", "JSONRPCError", answer)
    assert answer["error"]["code"] == codes.METHOD_NOT_FOUND and "protocol 2025-03-26" in answer["error"]["message"]
    assert asked_the_handler == []


def test_roots_are_sent_as_the_handler_wrote_them_on_every_revision(settling):
    # Not a defect, checked: ListRootsResult and Root are the same in every
    # revision but for Root's optional `_meta` (2025-06-18), and no revision
    # forbids other members, so the newest shape is valid on 2024-11-05 too.
    roots = {"roots": [{"uri": "file:///srv", "name": "srv", "_meta": {"k": 1}}]}
    with settling("2024-11-05", {"roots": lambda params: roots}) as client:
        (answer,) = ask(client, "roots/list", {})
    check_response("2024-11-05", "ListRootsResult", answer)
    assert answer["result"] == roots


def test_over_streamable_http_the_call_that_was_asked_fails_with_what_cannot_be_carried():
    # Over Streamable HTTP the server's question comes on the call's own
    # stream, and is answered by the call's handlers: the call raises.
    from mcp_sync.testing import ClientError, HTTPServer, RequestCancelled, Server

    server = Server(name="sampler", versions=("2025-06-18",))
    got: list[Any] = []
    ended = threading.Semaphore(0)

    @server.tool()
    def summarize(args, ctx):
        try:
            got.append(ctx.sample(SAMPLE["messages"], 20))
        except (ClientError, RequestCancelled) as exc:
            got.append(exc)
        finally:
            ended.release()
        return "done"

    blocks = iter([[TEXT], [TEXT, TEXT], [TEXT]])
    with HTTPServer(server) as httpd:
        with mcp_sync.connect(httpd.url, protocol=("2025-11-25", "2025-06-18"),
                              input_handlers={"sampling": lambda params: sampled(next(blocks))}) as client:
            assert client.call_tool("summarize", {}, timeout=10).text == "done"
            with pytest.raises(mcp_sync.InputHandlerError, match="protocol 2025-06-18 carries exactly one content "
                                                                 "block in a sampling answer, not a list of 2"):
                client.call_tool("summarize", {}, timeout=10)
            assert ended.acquire(timeout=10) and ended.acquire(timeout=10)  # both tools done, in order
            assert client.call_tool("summarize", {}, timeout=10).text == "done"  # the session goes on
    shaped, refused, again = got
    for answer in (shaped, again):
        validate("2025-06-18", "CreateMessageResult", answer)
        assert answer["content"] == TEXT
    # The refusal and the call's cancellation (the call raised, so the
    # client withdraws it) are two POSTs, sent in parallel: the tool meets
    # whichever the server reads first. The refusal, when first, names what
    # the revision cannot carry.
    if isinstance(refused, ClientError):
        assert refused.code == codes.INTERNAL_ERROR and "not a list of 2" in refused.message
    else:
        assert isinstance(refused, RequestCancelled), refused
