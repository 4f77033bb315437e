"""Streamable HTTP header rules of MCP 2026-07-28 (`basic/transports/streamable-http.mdx`)."""

from __future__ import annotations

import base64
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_sync.protocol.headers import (
    SENTINEL_PREFIX,
    SENTINEL_SUFFIX,
    HeaderParam,
    InvalidHeaderAnnotation,
    check_user_headers,
    decode_header_value,
    encode_header_value,
    header_params,
    param_header_value,
    param_headers,
    standard_headers,
)

PV = "io.modelcontextprotocol/protocolVersion"

# -- value encoding ---------------------------------------------------------

# The "Encoding examples" table of the spec, row by row.
SPEC_EXAMPLES = [
    ("us-west1", "us-west1"),
    ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
    (" padded ", "=?base64?IHBhZGRlZCA=?="),
    ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
    ("=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
]


@pytest.mark.parametrize(("original", "encoded"), SPEC_EXAMPLES)
def test_spec_encoding_examples(original: str, encoded: str):
    assert encode_header_value(original) == encoded
    assert decode_header_value(encoded) == original


def test_sentinel_markers():
    assert (SENTINEL_PREFIX, SENTINEL_SUFFIX) == ("=?base64?", "?=")


@pytest.mark.parametrize(
    "value",
    ["a b", "!#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", "=?base64?", "?=", "x?=", "=?base64x?=", "=?BASE64?abc?="],
)
def test_plain_values_stay_plain(value: str):
    assert encode_header_value(value) == value


@pytest.mark.parametrize(
    "value",
    [" a", "a ", "\ta", "a\t", "a\tb", "a\rb", "a\x00b", "a\x7fb", "caf\u00e9", "=?base64?=", "=?base64?x?=", " "],
)
def test_unsafe_values_are_encoded(value: str):
    encoded = encode_header_value(value)
    assert encoded.startswith(SENTINEL_PREFIX) and encoded.endswith(SENTINEL_SUFFIX)
    payload = encoded[len(SENTINEL_PREFIX) : -len(SENTINEL_SUFFIX)]
    assert base64.b64decode(payload).decode("utf-8") == value


def test_empty_string_is_plain_empty():
    assert encode_header_value("") == ""
    assert decode_header_value("") == ""


_VALID_HEADER_VALUE = re.compile(r"(?:[\x21-\x7e](?:[\x20-\x7e\t]*[\x21-\x7e])?)?")


@settings(max_examples=500)
@given(st.text())
def test_encode_decode_roundtrip(value: str):
    encoded = encode_header_value(value)
    assert decode_header_value(encoded) == value
    assert _VALID_HEADER_VALUE.fullmatch(encoded), encoded


@given(st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E)))
def test_plain_ascii_left_alone_unless_ambiguous(value: str):
    encoded = encode_header_value(value)
    ambiguous = value != value.strip(" ") or (value.startswith("=?base64?") and value.endswith("?="))
    assert (encoded == value) != ambiguous


@pytest.mark.parametrize(
    "bad", ["=?base64?!!!?=", "=?base64?YQ?=", "=?base64?/w==?=", "=?base64?=", "a\nb", "caf\u00e9"]
)
def test_decode_rejects_malformed(bad: str):
    with pytest.raises(ValueError):
        decode_header_value(bad)


# -- type conversion ----------------------------------------------------------


def test_bool_before_int():
    assert param_header_value(True) == "true"
    assert param_header_value(False) == "false"
    assert param_header_value(1) == "1"
    assert param_header_value(0) == "0"


def test_param_value_conversions():
    assert param_header_value(42) == "42"
    assert param_header_value(-7) == "-7"
    assert param_header_value("us-west1") == "us-west1"
    assert param_header_value("Hello, 世界") == "=?base64?SGVsbG8sIOS4lueVjA==?="
    assert param_header_value("") == ""
    assert param_header_value(None) is None


@pytest.mark.parametrize("value", [1.5, 42.0, [1], {"a": 1}, b"x", object()])
def test_param_value_other_types_refused(value: object):
    with pytest.raises(TypeError):
        param_header_value(value)


def test_integer_safe_range():
    assert param_header_value(2**53 - 1) == str(2**53 - 1)
    assert param_header_value(-(2**53 - 1)) == str(-(2**53 - 1))
    for value in (2**53, -(2**53), 10**30):
        with pytest.raises(ValueError):
            param_header_value(value)


# -- standard headers -------------------------------------------------------


def _request(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": method}
    if params is not None:
        message["params"] = params
    return message


def test_tools_call_headers_as_in_spec_example():
    body = _request(
        "tools/call",
        {"name": "get_weather", "arguments": {"location": "Seattle, WA"}, "_meta": {PV: "2026-07-28"}},
    )
    assert standard_headers(body) == {
        "Mcp-Method": "tools/call",
        "Mcp-Name": "get_weather",
        "MCP-Protocol-Version": "2026-07-28",
    }


def test_prompts_get_uses_name():
    assert standard_headers(_request("prompts/get", {"name": "greet", "uri": "ignored"})) == {
        "Mcp-Method": "prompts/get",
        "Mcp-Name": "greet",
    }


def test_resources_read_uses_uri():
    body = _request("resources/read", {"uri": "file:///projects/myapp/config.json", "name": "ignored"})
    assert standard_headers(body) == {
        "Mcp-Method": "resources/read",
        "Mcp-Name": "file:///projects/myapp/config.json",
    }


def test_resources_read_uri_needing_base64():
    uri = "file:///données/rapport été.txt"
    headers = standard_headers(_request("resources/read", {"uri": uri}))
    assert headers["Mcp-Name"] == "=?base64?" + base64.b64encode(uri.encode()).decode() + "?="
    assert decode_header_value(headers["Mcp-Name"]) == uri


def test_name_that_looks_like_sentinel_is_encoded():
    headers = standard_headers(_request("tools/call", {"name": "=?base64?abc?="}))
    assert headers["Mcp-Name"] == "=?base64?PT9iYXNlNjQ/YWJjPz0=?="
    assert decode_header_value(headers["Mcp-Name"]) == "=?base64?abc?="


@pytest.mark.parametrize("method", ["tools/list", "ping", "server/discover", "notifications/progress"])
def test_other_methods_get_only_mcp_method(method: str):
    assert standard_headers(_request(method, {"name": "x", "uri": "y"})) == {"Mcp-Method": method}


def test_notification_without_params():
    assert standard_headers({"jsonrpc": "2.0", "method": "notifications/initialized"}) == {
        "Mcp-Method": "notifications/initialized"
    }


def test_response_gets_no_headers():
    assert standard_headers({"jsonrpc": "2.0", "id": 1, "result": {}}) == {}


def test_protocol_version_only_when_present():
    assert "MCP-Protocol-Version" not in standard_headers(_request("ping", {"_meta": {}}))
    assert standard_headers(_request("ping", {"_meta": {PV: "2026-07-28"}}))["MCP-Protocol-Version"] == "2026-07-28"


@pytest.mark.parametrize(
    "body",
    [
        _request("tools/call", {}),
        _request("tools/call"),
        _request("tools/call", {"name": 5}),
        _request("resources/read", {"name": "no uri"}),
        _request("prompts/get", {"name": None}),
        {"jsonrpc": "2.0", "id": 1, "method": 5},
        _request(""),
        _request("bad\nmethod"),
        _request("ping", {"_meta": {PV: "2026\n07-28"}}),
        _request("ping", {"_meta": {PV: 20260728}}),
        _request("ping", []),  # type: ignore[arg-type]
    ],
)
def test_standard_headers_refuse_malformed(body: dict[str, Any]):
    with pytest.raises(ValueError):
        standard_headers(body)


# -- x-mcp-header annotations -------------------------------------------------


def _schema(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


def _annotated(name: Any, type_: Any = "string") -> dict[str, Any]:
    return {"type": type_, "x-mcp-header": name}


def test_spec_example_tool():
    schema = {
        "type": "object",
        "properties": {
            "region": {"type": "string", "description": "The region", "x-mcp-header": "Region"},
            "query": {"type": "string", "description": "The SQL query to execute"},
        },
        "required": ["region", "query"],
    }
    params = header_params(schema)
    assert params == (HeaderParam(path=("region",), name="Region"),)
    assert param_headers(params, {"region": "us-west1", "query": "SELECT * FROM users"}) == {
        "Mcp-Param-Region": "us-west1"
    }


def test_no_schema_or_no_annotations():
    assert header_params(None) == ()
    assert header_params({"type": "object"}) == ()
    assert header_params(_schema(a={"type": "string"})) == ()


@pytest.mark.parametrize("type_", ["string", "integer", "boolean", ["string", "null"], ["null", "integer"]])
def test_primitive_types_allowed(type_: Any):
    assert header_params(_schema(a=_annotated("A", type_))) == (HeaderParam(("a",), "A"),)


@pytest.mark.parametrize("name", ["A", "x", "Region", "tenant-id", "a.b_c", "!#$%&'*+-.^_`|~09azAZ"])
def test_token_names_allowed(name: str):
    assert header_params(_schema(a=_annotated(name)))[0].name == name


def test_nested_properties_chain_is_reachable():
    schema = _schema(
        outer=_schema(middle=_schema(leaf=_annotated("Leaf", "integer")), flag=_annotated("Flag", "boolean")),
        top=_annotated("Top"),
    )
    assert header_params(schema) == (
        HeaderParam(("outer", "middle", "leaf"), "Leaf"),
        HeaderParam(("outer", "flag"), "Flag"),
        HeaderParam(("top",), "Top"),
    )


def test_property_names_that_are_keywords():
    schema = _schema(items=_annotated("Items"), properties=_schema(anyOf=_annotated("AnyOf")))
    assert header_params(schema) == (
        HeaderParam(("items",), "Items"),
        HeaderParam(("properties", "anyOf"), "AnyOf"),
    )


def test_annotation_like_data_is_not_an_annotation():
    schema = _schema(
        a={"type": "object", "default": {"x-mcp-header": "D"}, "examples": [{"x-mcp-header": "E"}]},
        b={"type": "object", "enum": [{"x-mcp-header": "F"}], "const": {"x-mcp-header": "G"}},
    )
    assert header_params(schema) == ()


def _invalid(schema: dict[str, Any], reason: str) -> None:
    with pytest.raises(InvalidHeaderAnnotation, match=reason):
        header_params(schema)


def test_invalid_empty():
    _invalid(_schema(a=_annotated("")), "empty")


@pytest.mark.parametrize("name", ["Has Space", "a:b", "a/b", "a,b", "(x)", "a@b", "ä", 'a"b', "a=b"])
def test_invalid_not_a_token(name: str):
    _invalid(_schema(a=_annotated(name)), "not an HTTP token")


@pytest.mark.parametrize("name", ["a\rb", "a\nb", "a\x00", "\tA", "a\x7f", "a\x85"])
def test_invalid_control_characters(name: str):
    _invalid(_schema(a=_annotated(name)), "control characters")


@pytest.mark.parametrize("name", [1, True, None, ["A"], {"n": "A"}])
def test_invalid_not_a_string(name: Any):
    _invalid(_schema(a=_annotated(name)), "not a string")


def test_invalid_case_insensitive_duplicate():
    _invalid(_schema(a=_annotated("Region"), b=_annotated("REGION")), "duplicates")
    _invalid(_schema(a=_annotated("X"), b=_schema(c=_annotated("x"))), "duplicates")


def test_invalid_number_type():
    _invalid(_schema(a=_annotated("A", "number")), "type")


@pytest.mark.parametrize("type_", ["object", "array", "null"])
def test_invalid_non_primitive_type(type_: str):
    _invalid(_schema(a=_annotated("A", type_)), "type")


@pytest.mark.parametrize(
    "type_", [["string", "integer"], ["number", "null"], ["object", "null"], [], ["string", "string"], 5]
)
def test_invalid_type_lists(type_: Any):
    _invalid(_schema(a=_annotated("A", type_)), "type")


def test_invalid_missing_type():
    _invalid(_schema(a={"x-mcp-header": "A"}), "without a 'type'")
    _invalid(_schema(a={"enum": ["x", "y"], "x-mcp-header": "A"}), "without a 'type'")


def test_invalid_on_root():
    _invalid({"type": "object", "x-mcp-header": "Root"}, "root")


@pytest.mark.parametrize(
    "schema",
    [
        _schema(a={"type": "array", "items": _annotated("A")}),
        _schema(a={"type": "array", "items": [_annotated("A")]}),
        _schema(a={"type": "array", "prefixItems": [_annotated("A")]}),
        _schema(a={"type": "array", "contains": _annotated("A")}),
        _schema(a={"type": "array", "additionalItems": _annotated("A")}),
        _schema(a={"type": "array", "unevaluatedItems": _annotated("A")}),
    ],
    ids=["items", "items-list", "prefixItems", "contains", "additionalItems", "unevaluatedItems"],
)
def test_invalid_under_array_keywords(schema: dict[str, Any]):
    _invalid(schema, "not statically reachable")


@pytest.mark.parametrize("keyword", ["anyOf", "oneOf", "allOf"])
def test_invalid_under_composition(keyword: str):
    _invalid({"type": "object", keyword: [_schema(a=_annotated("A"))]}, "not statically reachable")
    _invalid(_schema(a={keyword: [_annotated("A"), {"type": "null"}]}), "not statically reachable")


def test_invalid_under_not():
    _invalid({"type": "object", "not": _schema(a=_annotated("A"))}, "not statically reachable")


@pytest.mark.parametrize("keyword", ["if", "then", "else"])
def test_invalid_under_conditionals(keyword: str):
    _invalid({"type": "object", keyword: _schema(a=_annotated("A"))}, "not statically reachable")


def test_invalid_under_defs_and_ref_targets():
    via_defs = {
        "type": "object",
        "properties": {"region": {"$ref": "#/$defs/Region"}},
        "$defs": {"Region": _annotated("Region")},
    }
    _invalid(via_defs, r"found under '\$defs'")
    via_definitions = {
        "type": "object",
        "properties": {"region": {"$ref": "#/definitions/Region"}},
        "definitions": {"Region": _annotated("Region")},
    }
    _invalid(via_definitions, "found under 'definitions'")
    # A $defs entry nobody references is still "anywhere else".
    _invalid({"type": "object", "$defs": {"X": _schema(a=_annotated("A"))}}, "not statically reachable")


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "additionalProperties": _annotated("A")},
        {"type": "object", "patternProperties": {"^a": _annotated("A")}},
        {"type": "object", "unevaluatedProperties": _annotated("A")},
        {"type": "object", "propertyNames": _annotated("A")},
        {"type": "object", "dependentSchemas": {"a": _schema(b=_annotated("B"))}},
        {"type": "object", "dependencies": {"a": _schema(b=_annotated("B"))}},
        {"type": "object", "x-vendor": {"nested": _annotated("A")}},
    ],
    ids=[
        "additionalProperties",
        "patternProperties",
        "unevaluatedProperties",
        "propertyNames",
        "dependentSchemas",
        "dependencies",
        "unknown-keyword",
    ],
)
def test_invalid_under_object_keywords(schema: dict[str, Any]):
    _invalid(schema, "not statically reachable")


def test_invalid_deep_under_properties_of_unreachable_schema():
    # properties chains below an array keyword do not make it reachable again.
    schema = _schema(a={"type": "array", "items": _schema(b=_schema(c=_annotated("C")))})
    _invalid(schema, "found under 'items'")


def test_valid_annotation_next_to_invalid_one_still_rejects_tool():
    schema = _schema(ok=_annotated("Ok"), bad={"type": "array", "items": _annotated("Bad")})
    _invalid(schema, "not statically reachable")


# -- extracting parameter values ---------------------------------------------

NESTED = header_params(
    _schema(
        region=_annotated("Region"),
        opts=_schema(
            tenant=_schema(id=_annotated("Tenant-Id", "integer")),
            dry=_annotated("Dry-Run", "boolean"),
        ),
    )
)


def test_extract_nested_paths():
    arguments = {"region": "eu", "opts": {"tenant": {"id": 42}, "dry": True}, "other": "x"}
    assert param_headers(NESTED, arguments) == {
        "Mcp-Param-Region": "eu",
        "Mcp-Param-Tenant-Id": "42",
        "Mcp-Param-Dry-Run": "true",
    }


def test_extract_missing_values_are_omitted():
    assert param_headers(NESTED, None) == {}
    assert param_headers(NESTED, {}) == {}
    assert param_headers(NESTED, {"opts": {}}) == {}
    assert param_headers(NESTED, {"opts": {"tenant": "not an object"}}) == {}
    assert param_headers(NESTED, {"opts": None, "region": "x"}) == {"Mcp-Param-Region": "x"}


def test_extract_null_is_omitted():
    assert param_headers(NESTED, {"region": None, "opts": {"tenant": {"id": None}, "dry": None}}) == {}


def test_extract_falsy_values_are_sent():
    assert param_headers(NESTED, {"region": "", "opts": {"tenant": {"id": 0}, "dry": False}}) == {
        "Mcp-Param-Region": "",
        "Mcp-Param-Tenant-Id": "0",
        "Mcp-Param-Dry-Run": "false",
    }


def test_extract_unicode_needs_base64():
    assert param_headers(NESTED, {"region": "Hello, 世界"}) == {"Mcp-Param-Region": "=?base64?SGVsbG8sIOS4lueVjA==?="}


def test_extract_integer_outside_safe_range():
    with pytest.raises(ValueError, match="Tenant-Id"):
        param_headers(NESTED, {"opts": {"tenant": {"id": 2**53}}})
    with pytest.raises(ValueError):
        param_headers(NESTED, {"opts": {"tenant": {"id": -(2**53)}}})
    assert param_headers(NESTED, {"opts": {"tenant": {"id": -(2**53) + 1}}}) == {
        "Mcp-Param-Tenant-Id": str(-(2**53) + 1)
    }


def test_extract_wrong_kind_of_value():
    with pytest.raises(TypeError, match="region"):
        param_headers(NESTED, {"region": ["eu"]})


def test_header_param_header_name():
    assert HeaderParam(("a",), "Region").header == "Mcp-Param-Region"


# -- user headers -------------------------------------------------------------


def test_good_user_headers_pass_and_are_copied():
    given_headers = {"Authorization": "Bearer abc", "X-Trace": "", "User-Agent": "me/1.0 (x; y)", "X-U": "caf\u00e9"}
    out = check_user_headers(given_headers)
    assert out == given_headers
    assert out is not given_headers
    assert type(out) is dict


@pytest.mark.parametrize("value", ["a\rb", "a\nb", "a\x00b", "\r\n", "x\r\nInjected: 1"])
def test_user_header_values_without_cr_lf_nul(value: str):
    with pytest.raises(ValueError, match="X-Custom"):
        check_user_headers({"X-Custom": value})


@pytest.mark.parametrize("name", ["", "Bad Name", "a:b", "X-Ä", "a\nb", "(x)"])
def test_user_header_names_must_be_tokens(name: str):
    with pytest.raises(ValueError):
        check_user_headers({name: "v"})


@pytest.mark.parametrize(
    "name",
    [
        "Accept",
        "content-type",
        "CONTENT-LENGTH",
        "host",
        "Transfer-Encoding",
        "connection",
        "mcp-protocol-version",
        "MCP-Protocol-Version",
        "Mcp-Method",
        "mcp-name",
        "MCP-SESSION-ID",
        "last-event-id",
        "accept-encoding",
        "Mcp-Param-X",
        "mcp-param-region",
        "MCP-PARAM-anything",
    ],
)
def test_owned_headers_refused_in_any_case(name: str):
    with pytest.raises(ValueError, match="set by the transport"):
        check_user_headers({name: "v"})


def test_user_headers_similar_to_owned_ones_pass():
    ok = {"Mcp-Parameter": "1", "X-Mcp-Method": "2", "Accept-Language": "en", "Mcp-Name-Hint": "3"}
    assert check_user_headers(ok) == ok


def test_user_headers_duplicate_ignoring_case():
    with pytest.raises(ValueError, match="twice"):
        check_user_headers({"X-A": "1", "x-a": "2"})


def test_user_header_types():
    with pytest.raises(TypeError):
        check_user_headers({"X-A": 1})  # type: ignore[dict-item]
    with pytest.raises(TypeError):
        check_user_headers({b"X-A": "1"})  # type: ignore[dict-item]
