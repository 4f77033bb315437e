"""The error codes by name, and the stateless era's own range."""

import pytest

from mcp_sync.protocol import codes


def test_the_json_rpc_and_mcp_codes():
    assert (codes.PARSE_ERROR, codes.INVALID_REQUEST, codes.METHOD_NOT_FOUND, codes.INVALID_PARAMS,
            codes.INTERNAL_ERROR) == (-32700, -32600, -32601, -32602, -32603)
    assert (codes.RESOURCE_NOT_FOUND, codes.HEADER_MISMATCH, codes.MISSING_CLIENT_CAPABILITY,
            codes.UNSUPPORTED_PROTOCOL_VERSION) == (-32002, -32020, -32021, -32022)


# -32042 (URL elicitation required) lies in the range but is 2025-11-25's.
@pytest.mark.parametrize("code, ours", [(-32020, True), (-32099, True), (-32043, True), (-32042, False), (-32019, False),
                                        (-32100, False), (-32601, False), (True, False), ("-32022", False)])
def test_the_stateless_eras_range(code, ours):
    assert codes.is_stateless_era_code(code) is ours
