"""What a per-call input handler the connection did not declare is told
(`pipeline._check_declarable`), by whether the settled revision has the
kind at all: a kind it has was only not declared at connect(), and
connect() is the advice; a kind it lacks (elicitation before 2025-06-18,
its url mode before 2025-11-25) no server of that revision can ask for, so
the advice must not send the user to connect() in a circle.

Needs the change to `pipeline._check_declarable` that asks
`Dialect.has_input` (`mcp_sync.protocol.versions`).
"""

from __future__ import annotations

import pytest

import mcp_sync
from mcp_sync.testing import Server

OLD_AND_NEW = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")


def answer(params):
    return {"action": "decline"}


@pytest.fixture(scope="module")
def server():
    server = Server(name="plain", versions=OLD_AND_NEW)

    @server.tool()
    def echo(args, ctx):
        return "echo"

    return server


def refused(server, version: str, handlers: dict) -> str:
    with mcp_sync.connect(server, protocol=version) as client:
        with pytest.raises(ValueError) as info:
            client.call_tool("echo", {}, input_handlers=handlers)
        assert client.call_tool("echo", {}).text == "echo"  # nothing was sent for the refused call
    return str(info.value)


@pytest.mark.parametrize("version", ["2025-03-26", "2024-11-05"])
def test_a_form_handler_on_a_revision_without_elicitation_is_not_sent_to_connect(server, version):
    message = refused(server, version, {"form": answer})
    # Before: "... pass input_handlers={'form': ...} to connect() instead",
    # which on this revision declares nothing and is never asked.
    assert "to connect() instead" not in message
    assert f"settled on protocol {version}, which has no 'form' input requests (they came with 2025-06-18)" \
        in message
    assert "allowing 2025-06-18 (or newer)" in message


def test_a_url_handler_on_2025_06_18_names_the_revision_of_url_mode(server):
    message = refused(server, "2025-06-18", {"url": answer})
    assert "to connect() instead" not in message
    assert "no 'url' input requests (they came with 2025-11-25)" in message
    assert "allowing 2025-11-25 (or newer)" in message


def test_form_and_url_on_2025_03_26_ask_for_the_revision_that_has_both(server):
    message = refused(server, "2025-03-26", {"form": answer, "url": answer})
    assert "'form' input requests (they came with 2025-06-18)" in message
    assert "'url' input requests (they came with 2025-11-25)" in message
    assert "allowing 2025-11-25 (or newer)" in message


@pytest.mark.parametrize("version, kind", [("2025-03-26", "sampling"), ("2024-11-05", "roots"),
                                           ("2025-06-18", "form")])
def test_a_kind_the_revision_has_is_still_sent_to_connect(server, version, kind):
    # The revision has it: declaring it at connect() is the way, as before.
    message = refused(server, version, {kind: answer})
    assert f"pass input_handlers={{{kind!r}: ...}} to connect() instead" in message
