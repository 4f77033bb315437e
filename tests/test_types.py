import base64

import pytest

from mcp_sync import types
from mcp_sync.errors import InvalidResult, ToolError


def test_tool_round_trip_keeps_unknown_fields():
    wire = {"name": "t", "title": "T", "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": True}, "_meta": {"k": 1}, "x-future": [1]}
    tool = types.Tool.from_wire(wire)
    assert (tool.name, tool.title, tool.annotations, tool.meta) == ("t", "T", {"readOnlyHint": True}, {"k": 1})
    assert tool.extra == {"x-future": [1]}
    assert tool.to_wire() == wire


def test_required_fields():
    with pytest.raises(InvalidResult, match="name"):
        types.Tool.from_wire({"inputSchema": {}})
    with pytest.raises(InvalidResult):
        types.ReadResourceResult.from_wire({})
    with pytest.raises(InvalidResult):
        types.Tool.from_wire(["not", "an", "object"])
    with pytest.raises(InvalidResult, match="inputSchema"):
        types.Tool.from_wire({"name": "t", "inputSchema": "nope"})


def test_content_blocks_dispatch_on_type():
    data = base64.b64encode(b"\x89PNG...").decode()
    result = types.CallToolResult.from_wire({"content": [
        {"type": "text", "text": "a"},
        {"type": "image", "data": data, "mimeType": "image/png"},
        {"type": "audio", "data": data, "mimeType": "audio/wav"},
        {"type": "resource_link", "uri": "x://y", "name": "y"},
        {"type": "resource", "resource": {"uri": "x://z", "text": "zz"}},
        {"type": "resource", "resource": {"uri": "x://b", "blob": data}},
        {"type": "text", "text": "b"},
        {"type": "sparkles"},
    ]})
    kinds = [type(b).__name__ for b in result.content]
    assert kinds == ["TextContent", "ImageContent", "AudioContent", "ResourceLink", "EmbeddedResource",
                     "EmbeddedResource", "TextContent", "UnknownContent"]
    assert result.content[1].bytes == b"\x89PNG..."
    assert result.content[4].resource.text == "zz"
    assert result.content[5].resource.bytes == b"\x89PNG..."
    assert result.text == "a\nb"
    assert not result.is_error and result.structured_content is None


def test_raise_for_error():
    ok = types.CallToolResult.from_wire({"content": []})
    assert ok.raise_for_error() is ok
    bad = types.CallToolResult.from_wire({"content": [{"type": "text", "text": "boom"}], "isError": True})
    with pytest.raises(ToolError, match="boom"):
        bad.raise_for_error()


def test_structured_content_may_be_any_json_value():
    assert types.CallToolResult.from_wire({"content": [], "structuredContent": [1, 2]}).structured_content == [1, 2]


def test_bad_content_is_invalid_result():
    with pytest.raises(InvalidResult):
        types.CallToolResult.from_wire({"content": "text"})
    with pytest.raises(InvalidResult):
        types.ReadResourceResult.from_wire({"contents": [{"uri": "x"}]})


def test_prompt_and_completion():
    prompt = types.Prompt.from_wire({"name": "p", "arguments": [{"name": "a", "required": True}, {"name": "b"}]})
    assert [(a.name, a.required) for a in prompt.arguments] == [("a", True), ("b", False)]
    got = types.GetPromptResult.from_wire({"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}]})
    assert got.messages[0].content.text == "hi"
    done = types.CompleteResult.from_wire({"completion": {"values": ["x"], "total": 5, "hasMore": True}})
    assert (done.values, done.total, done.has_more) == (["x"], 5, True)
    with pytest.raises(InvalidResult):
        types.CompleteResult.from_wire({"completion": {}})


def test_discover_and_initialize_results():
    found = types.DiscoverResult.from_wire({"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
                                            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "s", "version": "1"}}})
    assert found.server_info.name == "s" and found.capabilities == {"tools": {}}
    assert types.DiscoverResult.from_wire({"supportedVersions": []}).server_info is None
    session = types.InitializeResult.from_wire({"protocolVersion": "2025-06-18", "capabilities": {},
                                                "serverInfo": {"name": "s", "version": "2"}, "instructions": "i"})
    assert (session.protocol_version, session.server_info.version, session.instructions) == ("2025-06-18", "2", "i")


def test_progress():
    p = types.Progress.from_wire({"progressToken": 1, "progress": 5, "total": 10, "message": "m"})
    assert (p.progress, p.total, p.message, p.fraction) == (5, 10, "m", 0.5)
    assert types.Progress.from_wire({"progress": 3}).fraction is None
    assert types.Progress.from_wire({"progress": 30, "total": 10}).fraction == 1.0


@pytest.mark.parametrize("params", [
    {"progressToken": 1, "progress": 5, "total": 10, "message": "m"},
    {"progress": 2.5}, {}, {"progress": "3", "total": "x", "message": 7}, {"progress": True, "total": None},
])
def test_progress_from_wire_is_the_object_attrs_would_build(params):
    # from_wire builds a Progress through its slots (the per-notification path):
    # the same fields, equality, hash, repr, frozenness and evolve as attrs' __init__.
    import attrs

    fast = types.Progress.from_wire(params)
    progress, total, message = params.get("progress"), params.get("total"), params.get("message")
    slow = types.Progress(progress=progress if isinstance(progress, (int, float)) else 0,
                          total=total if isinstance(total, (int, float)) else None,
                          message=message if isinstance(message, str) else None, raw=dict(params))
    assert [getattr(fast, f.name) for f in attrs.fields(types.Progress)] == \
        [getattr(slow, f.name) for f in attrs.fields(types.Progress)]
    assert fast == slow and hash(fast) == hash(slow) and repr(fast) == repr(slow)
    assert fast.raw is not params
    with pytest.raises(AttributeError):
        fast.progress = 9  # type: ignore[misc]
    assert attrs.evolve(fast, total=100).total == 100

    class Sub(types.Progress):
        pass

    # What the slots' setters would skip if attrs ran it: nothing, as long as
    # the class has no validator, converter or post-init hook.
    assert all(f.validator is None and f.converter is None for f in attrs.fields(types.Progress))
    assert not hasattr(types.Progress, "__attrs_post_init__") and not hasattr(types.Progress, "__attrs_pre_init__")
    sub = Sub.from_wire(params)
    assert type(sub) is Sub and (sub.progress, sub.total, sub.message, sub.raw) == (slow.progress, slow.total, slow.message, slow.raw)


def test_frozen():
    tool = types.Tool.from_wire({"name": "t"})
    with pytest.raises(AttributeError):
        tool.name = "other"


# -- CallToolResult.from_wire: the direct build and the generic one -----------------

_TEXT = {"type": "text", "text": "hi"}
_RESULT_SHAPES = [
    {"content": [_TEXT]},
    {"content": [_TEXT, {"type": "text", "text": "", "annotations": {"audience": ["user"]}, "_meta": {"k": 1}}]},
    {"content": [], "isError": True, "structuredContent": {"n": 1}, "_meta": {"m": None}},
    {"content": [_TEXT], "isError": False, "structuredContent": None},
    {"content": [_TEXT], "isError": None},
    {"content": [_TEXT], "isError": 0},
    {"content": [_TEXT], "isError": "yes"},
    {"content": None},
    {},
    {"content": [_TEXT], "unknown": 1},
    {"content": [{"type": "text", "text": "x", "extra": 2}]},
    {"content": [{"type": "text", "text": 5}]},
    {"content": [{"type": "text"}]},
    {"content": [{"type": "image", "data": "AAAA", "mimeType": "image/png"}, _TEXT]},
    {"content": [_TEXT, {"type": "mystery"}]},
    {"content": [_TEXT, "not a block"]},
    {"content": "not a list"},
    {"content": ({"type": "text", "text": "tuple"},)},
    {"resultType": "complete", "content": [_TEXT], "isError": False},
    {"resultType": "complete", "content": [_TEXT], "structuredContent": [1], "_meta": {}},
    {"resultType": None, "content": [_TEXT]},
    {"resultType": "complete", "content": [_TEXT], "unknown": 1},
]


def _built(build, raw):
    try:
        result = build(raw)
    except Exception as exc:  # compared below: the same error, worded the same
        return ("error", type(exc), str(exc))
    return ("ok", result, result.extra, result.raw, [(b, b.extra, b.raw) for b in result.content or []])


@pytest.mark.parametrize("raw", _RESULT_SHAPES, ids=[str(i) for i in range(len(_RESULT_SHAPES))])
def test_call_tool_result_direct_build_is_the_generic_one(raw):
    from mcp_sync.types import CallToolResult, WireModel

    generic = WireModel.from_wire.__func__  # type: ignore[attr-defined]
    assert _built(CallToolResult.from_wire, raw) == _built(lambda r: generic(CallToolResult, r), raw)


@pytest.mark.parametrize("raw", [
    {"content": [_TEXT]},
    {"content": [_TEXT, _TEXT], "isError": True, "structuredContent": {"n": 1}, "_meta": {"m": 1}},
    # 2026-07-28: every result says its resultType (the shape every call of that era gets).
    {"resultType": "complete", "content": [_TEXT], "isError": False},
])
def test_call_tool_result_usual_shapes_take_the_direct_build(raw, monkeypatch):
    from mcp_sync.types import CallToolResult, WireModel

    def generic(cls, raw):
        raise AssertionError("the generic build was used")

    monkeypatch.setattr(WireModel, "from_wire", classmethod(generic))
    result = CallToolResult.from_wire(raw)
    assert result.raw == raw and result.text == "\n".join(b["text"] for b in raw["content"])


@pytest.mark.parametrize("raw", [
    {"content": [_TEXT]},
    {"content": [_TEXT, {"type": "text", "text": "", "annotations": {"priority": 1}, "_meta": {"k": 1}}],
     "isError": True, "structuredContent": {"n": 1}, "_meta": {"m": 1}},
    {"resultType": "complete", "content": [_TEXT], "isError": False},
])
def test_call_tool_result_slot_built_is_the_object_attrs_would_build(raw):
    # The direct build sets the result's and its text blocks' slots itself
    # (every call builds them): what attrs' __init__ would build, field by
    # field, in repr, frozen, and through attrs.evolve.
    import attrs

    from mcp_sync.types import CallToolResult, TextContent, WireModel

    fast = CallToolResult.from_wire(raw)
    slow = WireModel.from_wire.__func__(CallToolResult, raw)  # type: ignore[attr-defined]
    for cls, a, b in [(CallToolResult, fast, slow)] + [(TextContent, x, y) for x, y in zip(fast.content, slow.content)]:
        assert type(a) is cls and type(b) is cls
        assert [getattr(a, f.name) for f in attrs.fields(cls)] == [getattr(b, f.name) for f in attrs.fields(cls)]
        assert repr(a) == repr(b) and a == b
        # Nothing attrs' __init__ runs that the slots' setters would skip.
        assert all(f.validator is None and f.converter is None for f in attrs.fields(cls))
        assert not hasattr(cls, "__attrs_post_init__") and not hasattr(cls, "__attrs_pre_init__")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        fast.is_error = True  # type: ignore[misc]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        fast.content[0].text = "x"  # type: ignore[misc]
    assert attrs.evolve(fast, is_error=True).is_error is True
    assert attrs.evolve(fast.content[0], text="y").text == "y"


def test_call_tool_results_blocks_are_copied_as_the_generic_build_copies_them():
    from mcp_sync.types import CallToolResult

    block = {"type": "text", "text": "hi"}
    result = CallToolResult.from_wire({"content": [block]})
    block["text"] = "changed"
    assert result.text == "hi" and result.content[0].raw == {"type": "text", "text": "hi"}


@pytest.mark.parametrize("content", [
    [],
    [{"type": "text", "text": "one"}],
    [{"type": "text", "text": ""}],
    [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
    [{"type": "image", "data": "AA==", "mimeType": "image/png"}],
    [{"type": "image", "data": "AA==", "mimeType": "image/png"}, {"type": "text", "text": "after"}],
    [{"type": "text", "text": "a"}, {"type": "resource_link", "uri": "file:///x", "name": "x"}],
])
def test_text_is_the_text_blocks_joined_whatever_the_shortcut(content):
    # `text` takes a single text block's text without the join: the same
    # string the join gives, for one block and for any other shape.
    from mcp_sync.types import CallToolResult, TextContent

    result = CallToolResult.from_wire({"content": content})
    assert result.text == "\n".join(b.text for b in result.content if isinstance(b, TextContent))
    assert result.text == "\n".join(b["text"] for b in content if b["type"] == "text")


def test_text_of_a_block_without_a_string_fails_as_the_join_does():
    # A text block whose text is null (built by the generic path, which
    # keeps None) is no string to return: the shortcut leaves it to the
    # join, which raises, rather than hand back None as the text.
    from mcp_sync.types import CallToolResult

    result = CallToolResult.from_wire({"content": [{"type": "text", "text": None}]})
    assert result.content[0].text is None
    with pytest.raises(TypeError):
        result.text


def test_progress_numbers_are_always_finite():
    # A server's 10**400 is valid JSON but no float; NaN and Infinity are not
    # JSON at all, though Python's json reads them. from_wire never raises on
    # them, and what it keeps is finite, so `fraction` and a callback's own
    # arithmetic (int(p.progress), p.progress / p.total) cannot raise either.
    import math
    import sys

    biggest = sys.float_info.max
    p = types.Progress.from_wire({"progressToken": 1, "progress": 10**400, "total": 10})
    assert (p.progress, p.total, p.fraction) == (biggest, 10, 1.0)
    p = types.Progress.from_wire({"progress": -10**400, "total": 10**400})
    assert (p.progress, p.total, p.fraction) == (-biggest, biggest, 0.0)
    p = types.Progress.from_wire({"progress": float("inf"), "total": float("-inf")})
    assert (p.progress, p.total, p.fraction) == (biggest, -biggest, None)
    p = types.Progress.from_wire({"progress": float("nan"), "total": float("nan")})
    assert (p.progress, p.total, p.fraction) == (0, None, None)
    # Numbers a float holds are kept as sent (an int stays an int).
    p = types.Progress.from_wire({"progress": 10**300, "total": 2.5})
    assert (type(p.progress), p.progress, p.total) == (int, 10**300, 2.5)
    # fraction copes with what only a hand-made Progress holds.
    assert types.Progress(progress=10**400, total=10).fraction == 1.0
    assert 0 <= types.Progress(progress=5, total=10**400).fraction < 1e-300
    assert types.Progress(progress=math.nan, total=10).fraction is None
    assert types.Progress(progress=1, total=math.nan).fraction is None
    assert types.Progress(progress=math.inf, total=math.inf).fraction is None
    assert types.Progress(progress=1, total=-2).fraction is None
