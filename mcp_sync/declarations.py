"""What the client declares at `initialize` for the extensions it
implements (the Skills extension), kept apart from `skills`, which loads on
first use: every initialize-era handshake needs the declaration, few
programs need the rest of the extension.

What it must not know: how skills are listed or read (`skills`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .protocol.inputs import merge_capabilities

__all__ = ["SKILLS_EXTENSION", "initialize_capabilities"]

#: The Skills extension's identifier, as declared in capabilities.
SKILLS_EXTENSION = "io.modelcontextprotocol/skills"
# Extensions came to the initialize handshake's capabilities with 2025-11-25;
# older revisions keep their own capability shapes.
_INITIALIZE_EXTENSIONS_SINCE = "2025-11-25"
#: The capabilities that declare the extensions this client implements.
DECLARATION: Mapping[str, Any] = {"extensions": {SKILLS_EXTENSION: {}}}


def initialize_capabilities(capabilities: Mapping[str, Any], version: str) -> dict[str, Any]:
    """The capabilities an `initialize` for `version` sends: `capabilities`
    with the extension declared, in the revisions that have extensions.

    Example::

        >>> initialize_capabilities({}, "2025-11-25")
        {'extensions': {'io.modelcontextprotocol/skills': {}}}
    """
    if version < _INITIALIZE_EXTENSIONS_SINCE:  # revisions are ISO dates
        return dict(capabilities)
    return merge_capabilities(capabilities, DECLARATION)
