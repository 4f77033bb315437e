"""Answers to the server's requests in the shape of the session's revision
(`ServerRequests.settle()`, `Dialect.input_answer`), on plain data: every
answer a handler may write, on every revision, is either sent valid for
that revision's schema or refused saying why, and refused only when the
revision truly cannot carry it. (End to end over stdio and HTTP:
`test_server_requests_settled_revision.py`.)"""

from __future__ import annotations

from typing import Any

import pytest

from mcp_sync.errors import InputHandlerError
from mcp_sync.protocol import codes
from mcp_sync.protocol.jsonrpc import Refusal
from mcp_sync.protocol.schemas import SchemaCache
from mcp_sync.protocol.versions import SUPPORTED_VERSIONS, NotInRevision, dialect_for
from mcp_sync.server_requests import ServerRequests
from tests.testing.schema_util import is_valid, validate

INITIALIZE_ERA = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
SAMPLE = {"messages": [{"role": "user", "content": {"type": "text", "text": "Say hi"}}], "maxTokens": 20}
TEXT = {"type": "text", "text": "hi"}
IMAGE = {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
AUDIO = {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"}
TOOL_USE = {"type": "tool_use", "id": "call-1", "name": "lookup", "input": {"q": "x"}}
TOOL_RESULT = {"type": "tool_result", "toolUseId": "call-1", "content": [TEXT]}
UNKNOWN = {"type": "hologram", "data": "x"}

CONTENTS = {
    "text": TEXT, "image": IMAGE, "audio": AUDIO, "tool use": TOOL_USE, "tool result": TOOL_RESULT,
    "[text]": [TEXT], "[audio]": [AUDIO], "[tool use]": [TOOL_USE], "[text, text]": [TEXT, TEXT],
    "[tool use, text]": [TOOL_USE, TEXT], "unknown type": UNKNOWN, "[unknown type]": [UNKNOWN],
}


def sampled(content: Any) -> dict[str, Any]:
    return {"role": "assistant", "model": "m1", "content": content, "stopReason": "endTurn"}


def settled(handlers: dict[str, Any], declared: dict[str, Any], version: str | None) -> ServerRequests:
    requests = ServerRequests(handlers, SchemaCache())
    requests.settle(declared, version)
    return requests


def request(method: str, params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
@pytest.mark.parametrize("name", list(CONTENTS))
def test_a_sampling_answer_is_sent_valid_for_its_revision_or_refused_only_when_it_cannot_be(version, name):
    answer = sampled(CONTENTS[name])
    as_written = is_valid(version, "CreateMessageResult", answer)
    try:
        shaped = dialect_for(version).input_answer("sampling", answer)
    except NotInRevision as exc:
        # Refused only when the revision truly cannot carry it: not as
        # written, and not as a single block when it was a list of one.
        content = answer["content"]
        alone = content[0] if isinstance(content, list) and len(content) == 1 else content
        assert not as_written and not is_valid(version, "CreateMessageResult", {**answer, "content": alone}), exc
        assert version in str(exc) or "no revision" in str(exc)
    else:
        validate(version, "CreateMessageResult", shaped)
        if as_written:
            assert shaped == answer  # nothing changed that needed no change


@pytest.mark.parametrize("version", INITIALIZE_ERA[1:])
def test_a_list_of_one_block_is_sent_as_that_block_to_an_older_server(version):
    requests = settled({"sampling": lambda params: sampled([TEXT])}, {"sampling": {}}, version)
    answer = requests.result(request("sampling/createMessage", SAMPLE), requests.handlers)
    assert answer == sampled(TEXT)
    validate(version, "CreateMessageResult", answer)


def test_the_newest_shapes_go_as_written_to_a_2025_11_25_server():
    for content in ([TEXT, TEXT], TOOL_USE, [TOOL_USE, TEXT]):
        requests = settled({"sampling": lambda params, c=content: sampled(c)}, {"sampling": {}}, "2025-11-25")
        answer = requests.result(request("sampling/createMessage", SAMPLE), requests.handlers)
        assert answer == sampled(content)
        validate("2025-11-25", "CreateMessageResult", answer)


@pytest.mark.parametrize("version, content, said", [
    ("2025-06-18", [TEXT, TEXT], "protocol 2025-06-18 carries exactly one content block in a sampling answer, "
                                 "not a list of 2 (lists came with 2025-11-25)"),
    ("2025-03-26", TOOL_USE, "protocol 2025-03-26 has no 'tool_use' content in a sampling answer (it came with "
                             "2025-11-25)"),
    ("2024-11-05", [AUDIO], "protocol 2024-11-05 has no 'audio' content in a sampling answer (it came with "
                            "2025-03-26)"),
    ("2025-11-25", UNKNOWN, "a 'hologram' content block is in no revision's sampling answer"),
])
def test_what_the_revision_cannot_carry_fails_the_handler_saying_what(version, content, said):
    requests = settled({"sampling": lambda params: sampled(content)}, {"sampling": {}}, version)
    with pytest.raises(InputHandlerError) as info:
        requests.result(request("sampling/createMessage", SAMPLE), requests.handlers)
    assert info.value.handler == "sampling" and said in info.value.problem
    assert "the sampling handler answered something the server's protocol cannot carry" in str(info.value)


def test_an_unknown_revision_sends_the_answer_as_the_handler_wrote_it():
    # `declared =` alone (no revision told): as before, nothing shaped.
    requests = ServerRequests({"sampling": lambda params: sampled([TEXT, TEXT])}, SchemaCache())
    requests.declared = {"sampling": {}}
    assert requests.dialect is None
    answer = requests.result(request("sampling/createMessage", SAMPLE), requests.handlers)
    assert answer == sampled([TEXT, TEXT])


MULTI = {"message": "Pick", "requestedSchema": {"type": "object", "properties": {
    "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}}}}}


def test_a_multi_select_answer_is_refused_before_2025_11_25_and_sent_from_it():
    def form(params):
        return {"action": "accept", "content": {"tags": ["a"]}}

    older = settled({"form": form}, {"elicitation": {}}, "2025-06-18")
    with pytest.raises(InputHandlerError) as info:
        older.result(request("elicitation/create", MULTI), older.handlers)
    assert "protocol 2025-06-18 has no multi-select answers" in info.value.problem and "'tags'" in info.value.problem
    newer = settled({"form": form}, {"elicitation": {"form": {}}}, "2025-11-25")
    answer = newer.result(request("elicitation/create", MULTI), newer.handlers)
    validate("2025-11-25", "ElicitResult", answer)
    assert not is_valid("2025-06-18", "ElicitResult", answer)  # why it is refused there


def test_input_the_settled_revision_does_not_have_is_refused_though_declared():
    # Declared at an initialize for 2025-11-25; the server settled on an
    # older revision that has no such request, nor a result to answer with.
    asked = []

    def handler(params):
        asked.append(params)
        return {"action": "accept"}

    handlers = {"form": handler, "url": handler}
    declared = {"elicitation": {"form": {}, "url": {}}}
    on_2025_03_26 = settled(handlers, declared, "2025-03-26")
    form = {"message": "Name?", "requestedSchema": {"type": "object", "properties": {}}}
    with pytest.raises(Refusal) as info:
        on_2025_03_26.result(request("elicitation/create", form), handlers)
    assert info.value.code == codes.METHOD_NOT_FOUND and "protocol 2025-03-26" in info.value.error()["message"]
    on_2025_06_18 = settled(handlers, declared, "2025-06-18")
    url = {"mode": "url", "message": "Log in", "url": "https://example.com", "elicitationId": "e1"}
    with pytest.raises(Refusal) as info:
        on_2025_06_18.result(request("elicitation/create", url), handlers)
    # The method exists there, the mode does not: -32602, as for an undeclared mode.
    assert info.value.code == codes.INVALID_PARAMS and "protocol 2025-06-18 has no elicitation mode 'url'" in \
        info.value.error()["message"]
    assert asked == []


@pytest.mark.parametrize("version", INITIALIZE_ERA)
def test_roots_go_as_written_on_every_revision(version):
    # Not a defect: ListRootsResult is the same in every revision but for
    # Root's optional `_meta` (2025-06-18), and no revision forbids members
    # it does not name.
    roots = {"roots": [{"uri": "file:///srv", "name": "srv", "_meta": {"k": 1}}]}
    requests = settled({"roots": lambda params: roots}, {"roots": {}}, version)
    answer = requests.result(request("roots/list", {}), requests.handlers)
    assert answer == roots
    validate(version, "ListRootsResult", answer)


def test_a_new_session_answers_in_its_own_revision():
    requests = settled({"sampling": lambda params: sampled([TEXT])}, {"sampling": {}}, "2025-06-18")
    assert requests.dialect is not None and requests.dialect.version == "2025-06-18"
    requests.settle({"sampling": {}}, "2025-11-25")
    assert requests.result(request("sampling/createMessage", SAMPLE), requests.handlers) == sampled([TEXT])
