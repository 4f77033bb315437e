import pytest

from mcp_sync.protocol import inputs


def test_kind_of():
    assert inputs.kind_of("elicitation/create", {"mode": "form"}) == "form"
    assert inputs.kind_of("elicitation/create", {}) == "form"
    assert inputs.kind_of("elicitation/create", {"mode": "url"}) == "url"
    assert inputs.kind_of("elicitation/create", {"mode": "telepathy"}) is None
    assert inputs.kind_of("sampling/createMessage", {}) == "sampling"
    assert inputs.kind_of("roots/list", None) == "roots"
    assert inputs.kind_of("tools/call", {}) is None


def test_capabilities_follow_the_handlers():
    assert inputs.capabilities_for([]) == {}
    assert inputs.capabilities_for(["form", "url", "sampling", "roots"]) == {
        "elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {"listChanged": False}}
    assert inputs.capabilities_for(["url"]) == {"elicitation": {"url": {}}}


def test_merge_is_deep_and_explicit_wins():
    merged = inputs.merge_capabilities({"elicitation": {"form": {}}, "sampling": {}},
                                       {"elicitation": {"url": {}}, "sampling": {"tools": {}}, "x": 1})
    assert merged == {"elicitation": {"form": {}, "url": {}}, "sampling": {"tools": {}}, "x": 1}


def test_declared():
    caps = {"elicitation": {"form": {}}, "sampling": {}}
    assert inputs.declared("form", caps) and not inputs.declared("url", caps)
    assert inputs.declared("sampling", caps) and not inputs.declared("roots", caps)
    assert inputs.declared("form", {"elicitation": {}})  # 2025-06-18 style: no modes means form


@pytest.mark.parametrize("kind,params", [
    ("form", None), ("form", {"message": "m"}), ("url", {"message": "m"}),
    ("sampling", {"messages": [], "maxTokens": "5"}), ("sampling", {"maxTokens": 5}), ("roots", [1]),
])
def test_bad_requests(kind, params):
    with pytest.raises(inputs.BadInput):
        inputs.check_request(kind, params)
