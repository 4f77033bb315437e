import pytest

from mcp_sync.protocol.meta import merge_meta, validate_trace_context

PARENT = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"


def test_valid_trace_context_passes_through():
    assert validate_trace_context({"traceparent": PARENT}) == {"traceparent": PARENT}
    full = {"traceparent": PARENT, "tracestate": "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE", "baggage": "k=v"}
    assert validate_trace_context(full) == full
    assert validate_trace_context({"traceparent": PARENT, "tracestate": "tenant@vendor=x"})["tracestate"] == "tenant@vendor=x"


@pytest.mark.parametrize(
    "bad",
    [
        {},
        {"traceparent": 1},
        {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7"},
        {"traceparent": "00-0AF7651916CD43DD8448EB211C80319C-00f067aa0ba902b7-01"},
        {"traceparent": "00-00000000000000000000000000000000-00f067aa0ba902b7-01"},
        {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01"},
        {"traceparent": "ff-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"},
        {"traceparent": PARENT + "-extra"},
        {"traceparent": PARENT, "tracestate": "no-equals"},
        {"traceparent": PARENT, "tracestate": "Upper=x"},
        {"traceparent": PARENT, "tracestate": "a=1,a=2"},
        {"traceparent": PARENT, "tracestate": ",".join(f"k{i}=v" for i in range(33))},
        {"traceparent": PARENT, "baggage": "bad\nvalue"},
        {"traceparent": PARENT, "other": "x"},
    ],
)
def test_invalid_trace_context(bad):
    with pytest.raises(ValueError):
        validate_trace_context(bad)


def test_future_version_may_carry_more_fields():
    assert validate_trace_context({"traceparent": "01-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01-zz"})


def test_merge_order_later_layers_win_and_token_last():
    meta = merge_meta(
        {"a": "dialect", "b": "dialect", "c": "dialect", "progressToken": "x"},
        {"b": "params", "c": "params"},
        {"c": "option", "traceparent": "option"},
        {"traceparent": "trace"},
        17,
    )
    assert meta == {"a": "dialect", "b": "params", "c": "option", "traceparent": "trace", "progressToken": 17}


def test_merge_without_layers():
    assert merge_meta({}, None, None, None, None) == {}


def test_the_related_task_key_is_the_one_the_clients_tasks_answer_with():
    from mcp_sync import client_tasks
    from mcp_sync.protocol.meta import META_RELATED_TASK

    assert client_tasks.RELATED_TASK == META_RELATED_TASK == "io.modelcontextprotocol/related-task"
