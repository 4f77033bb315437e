import pytest

import mcp_sync
from mcp_sync import errors
from mcp_sync.errors import server_error_from_wire


@pytest.mark.parametrize(
    "code,cls,kind",
    [
        (-32700, errors.ServerError, "json_rpc"),
        (-32600, errors.ServerError, "json_rpc"),
        (-32601, errors.MethodNotFound, "protocol"),
        (-32602, errors.InvalidParams, "protocol"),
        (-32603, errors.ServerError, "execution"),
        (-32002, errors.ResourceNotFound, "protocol"),
        (-32020, errors.HeaderMismatch, "protocol"),
        (-32021, errors.MissingClientCapability, "protocol"),
        (-32022, errors.UnsupportedProtocolVersion, "protocol"),
        (-32000, errors.ServerError, "protocol"),
        (42, errors.ServerError, "protocol"),
    ],
)
def test_codes_map_to_classes_and_kinds(code, cls, kind):
    exc = server_error_from_wire({"code": code, "message": "m", "data": {"x": 1}}, method="tools/call")
    assert type(exc) is cls
    assert (exc.code, exc.message, exc.data, exc.kind, exc.method) == (code, "m", {"x": 1}, kind, "tools/call")
    assert isinstance(exc, errors.ServerError) and isinstance(exc, mcp_sync.McpError)
    assert str(code) in str(exc) and "tools/call" in str(exc)


def test_invalid_params_on_resources_read_is_resource_not_found():
    exc = server_error_from_wire({"code": -32602, "message": "Resource not found", "data": {"uri": "a://b"}},
                                 method="resources/read")
    assert isinstance(exc, errors.ResourceNotFound) and isinstance(exc, errors.InvalidParams)
    assert exc.uri == "a://b" and "a://b" in str(exc)
    other = server_error_from_wire({"code": -32602, "message": "bad"}, method="tools/call")
    assert not isinstance(other, errors.ResourceNotFound)
    legacy = server_error_from_wire({"code": -32602, "message": "bad uri"}, method="resources/read",
                                    invalid_params_means_not_found=False)
    assert type(legacy) is errors.InvalidParams


def test_spec_error_data_accessors():
    assert server_error_from_wire({"code": -32022, "message": "v", "data": {"supported": ["a", 1, "b"]}}).supported == ["a", "b"]
    assert server_error_from_wire({"code": -32022, "message": "v"}).supported == []
    missing = server_error_from_wire({"code": -32021, "message": "c", "data": {"requiredCapabilities": {"roots": {}}}})
    assert missing.required_capabilities == {"roots": {}}


@pytest.mark.parametrize("bad", [None, "text", {"message": "no code"}, {"code": "1", "message": "x"}, {"code": True}])
def test_malformed_error_objects_still_become_server_errors(bad):
    exc = server_error_from_wire(bad)
    assert isinstance(exc, errors.ServerError) and exc.code == -32603
    assert "malformed" in exc.message


def test_local_errors_never_look_like_server_errors():
    local = [
        errors.ConnectionClosed("x"), errors.ServerExited("x", returncode=1, stderr_tail=[]),
        errors.ConnectError("x"), errors.InvalidMessage("x"), errors.MessageTooLarge("x", limit=1),
        errors.RequestTimeout("x"), errors.VersionNegotiationError("x"), errors.InvalidResult("x"),
        errors.OutputValidationError("x", result={}, errors=[]), errors.PaginationError("x"),
        errors.UnsupportedMethod("ping", "2026-07-28"), errors.InputRequired("x", result={}),
        errors.ToolError("x", result=None),
    ]
    for exc in local:
        assert isinstance(exc, mcp_sync.McpError)
        assert not isinstance(exc, errors.ServerError)
        assert not hasattr(exc, "code")


def test_hierarchy():
    assert issubclass(errors.ServerExited, errors.ConnectionClosed)
    assert issubclass(errors.ConnectionClosed, errors.TransportError)
    assert issubclass(errors.MessageTooLarge, errors.TransportError)
    assert issubclass(errors.RequestTimeout, TimeoutError)
    assert issubclass(errors.OutputValidationError, errors.InvalidResult)
    assert issubclass(errors.InvalidResult, errors.ProtocolError)
    assert issubclass(errors.VersionNegotiationError, errors.ProtocolError)
    assert issubclass(errors.PaginationError, errors.ProtocolError)


def test_every_exported_error_is_documented_in_the_module_tree():
    doc = errors.__doc__
    for name in errors.__all__:
        if name != "server_error_from_wire":
            assert name in doc, name
            assert name in mcp_sync.__all__, name


def test_unsupported_method_message():
    exc = errors.UnsupportedMethod("ping", "2026-07-28", "use discover()")
    assert str(exc) == "ping is not part of protocol version 2026-07-28; use discover()"


@pytest.mark.parametrize("error", [
    {"code": -32602, "message": "Resource demo://x not found"},               # TypeScript SDK
    {"code": -32602, "message": "Unknown resource: demo://x"},                # FastMCP
    {"code": -32602, "message": "bad", "data": {"uri": "demo://x"}},          # names the URI
    {"code": -32002, "message": "gone"},                                      # the initialize era's code
])
def test_an_initialize_era_not_found_is_resource_not_found_with_the_uri_asked_for(error):
    exc = server_error_from_wire(error, method="resources/read", params={"uri": "demo://x", "_meta": {}},
                                 invalid_params_means_not_found=False)
    assert type(exc) is errors.ResourceNotFound
    assert exc.uri == "demo://x" and "demo://x" in str(exc)
    assert errors.copy_error(exc).uri == "demo://x"


def test_an_initialize_era_invalid_params_that_is_not_about_a_missing_resource_stays_invalid_params():
    exc = server_error_from_wire({"code": -32602, "message": "uri must be absolute"}, method="resources/read",
                                 params={"uri": "x"}, invalid_params_means_not_found=False)
    assert type(exc) is errors.InvalidParams
    found = server_error_from_wire({"code": -32602, "message": "Tool x not found"}, method="tools/call",
                                   params={"name": "x"}, invalid_params_means_not_found=False)
    assert type(found) is errors.InvalidParams


def test_the_servers_uri_wins_over_the_one_asked_for():
    exc = server_error_from_wire({"code": -32002, "message": "gone", "data": {"uri": "demo://canonical"}},
                                 method="resources/read", params={"uri": "demo://alias"})
    assert exc.uri == "demo://canonical"


def test_a_copy_has_notes_of_its_own():
    """Copies go to different threads: a note one adds stays off the others
    and off the kept original (they shared one list)."""
    kept = errors.RequestTimeout("no answer", timeout=1.0)
    kept.__notes__ = ["while reading demo://x"]  # what add_note() (3.11+) makes
    first, second = errors.copy_error(kept), errors.copy_error(kept)
    first.__notes__.append("in thread 1")
    assert first.__notes__ == ["while reading demo://x", "in thread 1"]
    assert second.__notes__ == kept.__notes__ == ["while reading demo://x"]
    assert errors.copy_error(errors.RequestTimeout("plain", timeout=1.0)).__dict__.get("__notes__") is None


@pytest.mark.parametrize("declared, version, capability", [
    ({"tools": {}}, "2025-11-25", "prompts"),
    ({"prompts": None}, "2025-11-25", "prompts"),   # null is not a declaration (the schema wants an object)
    ({"prompts": {}}, "2025-11-25", None),
    ({"prompts": {}}, None, None),
    (None, "2025-11-25", None),                     # capabilities unknown: nothing to say
])
def test_method_not_found_names_the_capability_only_when_it_is_undeclared(declared, version, capability):
    exc = server_error_from_wire({"code": -32601, "message": "Method not found"}, method="prompts/list",
                                 server_capabilities=declared, protocol_version=version)
    assert isinstance(exc, mcp_sync.MethodNotFound) and exc.capability == capability
    assert ("does not declare the 'prompts' capability" in str(exc)) is (capability is not None)


def test_a_copy_of_an_exception_not_the_packages_is_made_by_its_constructor():
    """A resolver's or a callback's exception, handed to several threads:
    each gets its own, built-in state included (`copy.copy` calls the
    constructor, where `SystemExit` keeps its code)."""
    refused = OSError(111, "Connection refused")
    copied = errors.copy_error(refused)
    assert copied is not refused and type(copied) is type(refused) is ConnectionRefusedError
    assert (copied.errno, copied.strerror, copied.args) == (111, "Connection refused", refused.args)
    assert errors.copy_error(SystemExit(3)).code == 3


def test_an_exception_that_cannot_be_copied_is_given_as_it_is():
    class Odd(Exception):
        def __init__(self, needed):  # its args do not rebuild it
            super().__init__()
            self.needed = needed

    odd = Odd("x")
    assert errors.copy_error(odd) is odd
