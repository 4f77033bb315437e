"""The error codes of JSON-RPC 2.0 and of the MCP specification, by name.

Every other module writes these names, never the numbers, so that a code's
meaning is stated once. A leaf module: it imports nothing (`errors` uses it).

    >>> METHOD_NOT_FOUND
    -32601
    >>> is_stateless_era_code(UNSUPPORTED_PROTOCOL_VERSION)
    True
"""

from __future__ import annotations

from typing import Final

# -- JSON-RPC 2.0 ----------------------------------------------------------------------

PARSE_ERROR: Final = -32700
"""The message was not valid JSON."""
INVALID_REQUEST: Final = -32600
"""The JSON was not a valid request object."""
METHOD_NOT_FOUND: Final = -32601
"""The method does not exist, or is not offered (by the server, or by this
client for a server request it did not declare)."""
INVALID_PARAMS: Final = -32602
"""The parameters were refused; on `resources/read` in 2026-07-28, also
"no such resource"."""
INTERNAL_ERROR: Final = -32603
"""The receiver failed while handling the request."""

# -- the MCP specification ---------------------------------------------------------------

RESOURCE_NOT_FOUND: Final = -32002
"""No such resource (the initialize era's code for it)."""
HEADER_MISMATCH: Final = -32020
"""An HTTP header disagreed with the request body (2026-07-28)."""
MISSING_CLIENT_CAPABILITY: Final = -32021
"""The request needs a client capability that was not declared (2026-07-28)."""
UNSUPPORTED_PROTOCOL_VERSION: Final = -32022
"""The server does not speak the protocol version the request carried (2026-07-28)."""

URL_ELICITATION_REQUIRED: Final = -32042
"""The request needs the user to complete URL-mode elicitations first
(2025-11-25 only); its `data.elicitations` lists them."""

#: The range the stateless-era specification keeps for its own codes; an
#: initialize-era server never sends one, save `URL_ELICITATION_REQUIRED`,
#: which 2025-11-25 defined inside it.
STATELESS_ERA_CODES: Final = range(-32099, -32019)


def is_stateless_era_code(code: object) -> bool:
    """Whether `code` is one the stateless-era specification keeps for itself."""
    return (isinstance(code, int) and not isinstance(code, bool) and code in STATELESS_ERA_CODES
            and code != URL_ELICITATION_REQUIRED)
