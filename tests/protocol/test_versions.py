import pytest

from mcp_sync.errors import InvalidResult, VersionNegotiationError
from mcp_sync.protocol import versions
from mcp_sync.protocol.versions import FallBack, Reprobe, UseStateless, dialect_for, read_probe_answer

ALL = versions.SUPPORTED_VERSIONS


def discover(supported):
    return {"jsonrpc": "2.0", "id": 1, "result": {"supportedVersions": supported, "capabilities": {}}}


def error(code, data=None):
    err = {"code": code, "message": "x"}
    if data is not None:
        err["data"] = data
    return {"jsonrpc": "2.0", "id": 1, "error": err}


def test_allowed_versions_default_and_order():
    assert versions.allowed_versions(None) == ("2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
    assert versions.allowed_versions(["2025-06-18", "2026-07-28"]) == ("2026-07-28", "2025-06-18")
    assert versions.allowed_versions("2025-11-25") == ("2025-11-25",)


@pytest.mark.parametrize("bad", ["2024-10-07", "", [], ["2026-07-28", "nope"], [5]])
def test_allowed_versions_rejects_unknown(bad):
    with pytest.raises(ValueError):
        versions.allowed_versions(bad)


def test_dialect_meta_only_for_stateless():
    stateless = dialect_for("2026-07-28")
    meta = stateless.request_meta({"roots": {}}, {"name": "c", "version": "1"}, "info")
    assert meta == {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"roots": {}},
        "io.modelcontextprotocol/clientInfo": {"name": "c", "version": "1"},
        "io.modelcontextprotocol/logLevel": "info",
    }
    assert "io.modelcontextprotocol/logLevel" not in stateless.request_meta({}, {}, None)
    assert dialect_for("2025-11-25").request_meta({}, {}, "info") == {}


def test_dialect_methods():
    stateless, initialize_era = dialect_for("2026-07-28"), dialect_for("2025-06-18")
    assert not stateless.defines("ping") and initialize_era.defines("ping")
    assert stateless.defines("server/discover") and not initialize_era.defines("server/discover")
    assert not stateless.defines("logging/setLevel") and initialize_era.defines("logging/setLevel")
    assert stateless.defines("tools/call") and initialize_era.defines("tools/call")
    assert stateless.defines("x-vendor/custom") and initialize_era.defines("x-vendor/custom")


def test_initialize_may_not_be_cancelled():
    assert not dialect_for("2025-11-25").may_cancel("initialize")
    assert dialect_for("2025-11-25").may_cancel("tools/call")
    assert dialect_for("2026-07-28").may_cancel("tools/call")


def test_result_type():
    d = dialect_for("2026-07-28")
    assert d.result_type({}) == "complete"
    assert d.result_type({"resultType": "complete"}) == "complete"
    assert d.result_type({"resultType": "input_required"}) == "input_required"
    with pytest.raises(InvalidResult):
        d.result_type({"resultType": "surprise"})


def test_dialect_for_unknown():
    with pytest.raises(ValueError):
        dialect_for("1999-01-01")


# -- the probe -----------------------------------------------------------------------


def test_discover_result_selects_highest_mutual():
    verdict = read_probe_answer(discover(["2025-11-25", "2026-07-28"]), ALL)
    assert isinstance(verdict, UseStateless) and verdict.version == "2026-07-28"
    assert verdict.discover_result["supportedVersions"] == ["2025-11-25", "2026-07-28"]


def test_silence_means_the_initialize_era():
    assert isinstance(read_probe_answer(None, ALL), FallBack)


@pytest.mark.parametrize("code", [-32601, -32602, -32600, -32603, -32000, -32002, 1, -1])
def test_any_non_stateless_error_means_the_initialize_era(code):
    assert isinstance(read_probe_answer(error(code), ALL), FallBack)


def test_unsupported_version_with_mutual_reprobes():
    verdict = read_probe_answer(error(-32022, {"supported": ["2030-01-01", "2026-07-28"]}), ALL)
    assert verdict == Reprobe("2026-07-28")


def test_unsupported_version_without_mutual_never_falls_back():
    with pytest.raises(VersionNegotiationError) as info:
        read_probe_answer(error(-32022, {"supported": ["2030-01-01"], "requested": "2026-07-28"}), ALL)
    assert info.value.supported == ["2030-01-01"]


def test_unsupported_version_with_only_initialize_era_listed_never_falls_back():
    # A stateless error identifies a stateless server: the spec says do not fall back.
    with pytest.raises(VersionNegotiationError):
        read_probe_answer(error(-32022, {"supported": ["2025-11-25"]}), ALL)


def test_other_stateless_error_is_not_a_fallback():
    with pytest.raises(VersionNegotiationError):
        read_probe_answer(error(-32021, {"requiredCapabilities": {}}), ALL)


def test_result_without_supported_versions_means_the_initialize_era():
    assert isinstance(read_probe_answer({"jsonrpc": "2.0", "id": 1, "result": {}}, ALL), FallBack)


def test_discover_listing_only_initialize_era_versions_falls_back():
    assert isinstance(read_probe_answer(discover(["2025-11-25"]), ALL), FallBack)


def test_discover_listing_nothing_shared_is_an_error():
    with pytest.raises(VersionNegotiationError):
        read_probe_answer(discover(["2099-01-01"]), ALL)


def test_check_negotiated():
    assert versions.check_negotiated({"protocolVersion": "2025-06-18"}, "2025-11-25", ALL) == "2025-06-18"
    with pytest.raises(VersionNegotiationError) as info:
        versions.check_negotiated({"protocolVersion": "2024-10-07"}, "2025-11-25", ALL)
    assert info.value.negotiated == "2024-10-07" and info.value.requested == "2025-11-25"
    with pytest.raises(VersionNegotiationError):
        versions.check_negotiated({"protocolVersion": "2025-06-18"}, "2025-11-25", ("2025-11-25",))
    with pytest.raises(VersionNegotiationError):
        versions.check_negotiated({}, "2025-11-25", ALL)


@pytest.mark.parametrize("answered, advice", [
    # A revision the client speaks but was not allowed to use: allow it.
    ("2024-11-05", "allow it with protocol='2024-11-05', or protocol=None"),
    # The stateless revision has no initialize: settle it with the probe.
    ("2026-07-28", "connect with protocol='2026-07-28' to settle it with server/discover"),
    # One the client does not know: which it speaks, and to upgrade.
    ("2099-01-01", "this client speaks only 2026-07-28, 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05: "
                   "upgrade mcp_sync"),
    (20251125, "not a protocol version"),
])
def test_a_refused_initialize_answer_says_what_to_do_next(answered, advice):
    with pytest.raises(VersionNegotiationError) as info:
        versions.check_negotiated({"protocolVersion": answered}, "2025-11-25", ("2026-07-28", "2025-11-25"))
    assert advice in str(info.value)


@pytest.mark.parametrize("supported, advice", [
    (["2025-06-18"], "connect with protocol='2025-06-18', a revision both speak"),
    (["2099-01-01"], "upgrade mcp_sync"),
])
def test_no_version_in_common_says_what_to_do_next(supported, advice):
    with pytest.raises(VersionNegotiationError) as info:
        read_probe_answer(error(-32022, {"supported": supported}), ("2026-07-28", "2025-11-25"))
    assert advice in str(info.value)
    with pytest.raises(VersionNegotiationError) as info:
        read_probe_answer(discover(supported), ("2026-07-28",))
    assert advice in str(info.value)
