"""The negotiation step (`mcp_sync.negotiation`) on scripted connections:
each era outcome, the era memory, the fallback target, and what is declared
when."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_sync import negotiation
from mcp_sync.errors import HTTPStatusError, VersionNegotiationError
from tests.helpers import GENEROUS
from tests.scripted_engine import (
    ScriptedTarget,
    Starter,
    initialize_era_server,
    methods,
    stateless_server,
    terms,
)


@pytest.fixture(autouse=True)
def clean_memory():
    negotiation.forget()
    yield
    negotiation.forget()


def test_a_stateless_server_settles_on_the_probe_with_what_it_discovered():
    starter, target = Starter(), ScriptedTarget(stateless_server, key="s")
    conn = starter.start(target)
    kept, settled = negotiation.settle(conn, target, terms(), starter)
    assert kept is conn and starter.abandoned == []
    assert settled.dialect.version == "2026-07-28" and settled.dialect.era == "stateless"
    assert settled.discovered is not None
    assert settled.session is None and settled.capabilities == {"tools": {}}
    assert negotiation.recall("s") is None  # a server that answered the probe is not recorded
    kept.close()


def test_an_initialize_era_server_is_initialized_on_the_same_connection_and_remembered():
    starter, target = Starter(), ScriptedTarget(initialize_era_server, key="i")
    conn = starter.start(target)
    kept, settled = negotiation.settle(conn, target, terms(), starter)
    assert kept is conn and len(starter.started) == 1
    assert methods(target.opened[0]) == ["server/discover", "initialize", "notifications/initialized"]
    assert settled.dialect.version == "2025-11-25" and settled.dialect.era == "initialize"
    assert settled.session is not None and settled.declared["extensions"] == {negotiation.SKILLS_EXTENSION: {}}
    assert negotiation.recall("i") == "initialize"
    kept.close()
    # Remembered: the next negotiation sends no probe.
    again = starter.start(target)
    kept, settled = negotiation.settle(again, target, terms(), starter)
    assert methods(target.opened[1]) == ["initialize", "notifications/initialized"]
    kept.close()


def test_a_silent_probe_costs_probe_timeout_once_then_the_era_is_remembered():
    def silent_on_probe(message: dict[str, Any]) -> dict[str, Any] | None:
        return None if message["method"] == "server/discover" else initialize_era_server(message)

    starter, target = Starter(), ScriptedTarget(silent_on_probe, key="quiet")
    kept, settled = negotiation.settle(starter.start(target), target, terms(probe_timeout=0.2), starter)
    assert settled.dialect.era == "initialize" and negotiation.recall("quiet") == "initialize"
    kept.close()


def test_a_refused_post_falls_back_to_the_targets_fallback():
    fallback = ScriptedTarget(initialize_era_server, kind="sse")

    def refusing(message: dict[str, Any]) -> dict[str, Any] | None:
        raise HTTPStatusError("405 Method Not Allowed", status=405, body=b"", headers={})

    starter, target = Starter(), ScriptedTarget(refusing, key="u", fallback_to=fallback)
    conn = starter.start(target)
    kept, settled = negotiation.settle(conn, target, terms(allowed=("2025-11-25",)), starter)
    assert kept is not conn and conn in starter.abandoned
    assert settled.target is fallback and settled.dialect.version == "2025-11-25"
    kept.close()


def test_a_pinned_stateless_version_is_confirmed_by_the_probe():
    starter, target = Starter(), ScriptedTarget(stateless_server)
    kept, settled = negotiation.settle(starter.start(target), target, terms(allowed=("2026-07-28",)), starter)
    assert methods(target.opened[0]) == ["server/discover"] and settled.dialect.version == "2026-07-28"
    assert settled.discovered is not None
    kept.close()


def test_a_pinned_stateless_version_refuses_an_initialize_era_answer():
    starter, target = Starter(), ScriptedTarget(initialize_era_server)
    conn = starter.start(target)
    with pytest.raises(VersionNegotiationError, match="does not speak the pinned protocol version 2026-07-28"):
        negotiation.settle(conn, target, terms(allowed=("2026-07-28",)), starter)
    assert methods(target.opened[0]) == ["server/discover"]  # nothing sent after the answer




def test_what_initialize_declared_is_told_before_notifications_initialized():
    # The server may ask for roots (say) as soon as it hears
    # notifications/initialized: the answerer must know by then what was declared.
    told: list[tuple[int, Any]] = []
    starter, target = Starter(), ScriptedTarget(initialize_era_server)
    conn = starter.start(target)
    sent = target.opened[0].sent
    kept, settled = negotiation.settle(
        conn, target, terms(allowed=("2025-11-25",), on_declared=lambda caps, version: told.append((len(sent), caps))),
        starter)
    assert len(told) == 1
    position, capabilities = told[0]
    assert [m["method"] for m in sent[position:]] == ["notifications/initialized"]
    assert capabilities == settled.declared
    kept.close()


def test_a_reprobe_after_a_refused_call_ends_by_that_calls_deadline():
    # A -32022 refuses a call with (say) a 0.3 s timeout; the server is then
    # silent on server/discover. The probe is made for the call, so it must
    # not wait `probe_timeout` (here 30 s) past the call's deadline.
    import time

    from mcp_sync.errors import UnsupportedProtocolVersion
    from mcp_sync.protocol.versions import dialect_for

    probes: list[dict[str, Any]] = []

    def silent_on_probe(message: dict[str, Any]) -> dict[str, Any] | None:
        probes.append(message)
        return None if message["method"] == "server/discover" else {}

    starter, target = Starter(), ScriptedTarget(silent_on_probe)
    conn = starter.start(target)
    settled = negotiation.Settled(target, dialect_for("2026-07-28"))
    refusal = UnsupportedProtocolVersion(-32022, "Unsupported protocol version",
                                         {"supported": ["2026-07-28"]}, method="tools/call")
    started = time.monotonic()
    with pytest.raises(UnsupportedProtocolVersion):
        negotiation.reprobe(conn, settled, refusal, terms(probe_timeout=30.0), deadline=started + 0.3)
    assert time.monotonic() - started < 0.3 + GENEROUS  # (the 0.3 s deadline; not the 30 s probe_timeout)
    assert [m["method"] for m in probes] == ["server/discover"]
    # A deadline already past sends no probe at all.
    with pytest.raises(UnsupportedProtocolVersion):
        negotiation.reprobe(conn, settled, refusal, terms(probe_timeout=30.0), deadline=time.monotonic() - 1)
    assert len(probes) == 1
    conn.close()


def test_what_is_declared_is_what_initialize_sent_in_a_revision_without_elicitation():
    # 2025-03-26 has no elicitation: it is not sent, so the session must not
    # count it as declared either (its answerer would take the server's
    # elicitation/create, which the server was never told the client handles).
    from mcp_sync.negotiation import Identity

    def old_server(message: dict[str, Any]) -> dict[str, Any] | None:
        if message["method"] == "initialize":
            return {"protocolVersion": "2025-03-26", "capabilities": {}, "serverInfo": {"name": "s", "version": "1"}}
        return initialize_era_server(message)

    told: list[Any] = []
    starter, target = Starter(), ScriptedTarget(old_server)
    identity = Identity({"elicitation": {"form": {}}, "roots": {}}, {"name": "t", "version": "1"}, None)
    kept, settled = negotiation.settle(
        starter.start(target), target,
        terms(allowed=("2025-03-26",), on_declared=lambda caps, version: told.append(caps))._replace(identity=lambda: identity), starter)
    sent = next(m for m in target.opened[0].sent if m.get("method") == "initialize")["params"]["capabilities"]
    assert sent == {"roots": {}}
    assert dict(settled.declared) == sent and [dict(c) for c in told] == [sent]
    kept.close()


def _strict_2024_server(message: dict[str, Any]) -> dict[str, Any] | None:
    """An initialize-era server that refuses any other version the way the
    lifecycle page's example does (-32602 with data.supported)."""
    if message["method"] == "initialize" and message["params"]["protocolVersion"] != "2024-11-05":
        return {"error": {"code": -32602, "message": "Unsupported protocol version",
                          "data": {"supported": ["2024-11-05"], "requested": message["params"]["protocolVersion"]}}}
    if message["method"] == "initialize":
        return {"protocolVersion": "2024-11-05", "capabilities": {}, "serverInfo": {"name": "s", "version": "1"}}
    return initialize_era_server(message)


def test_an_initialize_refused_with_the_versions_the_server_supports_is_asked_again_in_one_of_them():
    from mcp_sync.negotiation import Identity

    identity = Identity({"elicitation": {"form": {}}}, {"name": "t", "version": "1"}, None)
    starter, target = Starter(), ScriptedTarget(_strict_2024_server)
    kept, settled = negotiation.settle(starter.start(target), target, terms()._replace(identity=lambda: identity),
                                       starter)
    asked = [m["params"]["protocolVersion"] for m in target.opened[0].sent if m.get("method") == "initialize"]
    assert asked == ["2025-11-25", "2024-11-05"] and kept is starter.started[0]
    assert settled.dialect.version == "2024-11-05" and settled.session is not None
    # Declared: what the initialize the server accepted sent (2024-11-05 has no elicitation).
    sent = [m for m in target.opened[0].sent if m.get("method") == "initialize"][-1]["params"]["capabilities"]
    assert dict(settled.declared) == sent == {}
    assert methods(target.opened[0])[-1] == "notifications/initialized"
    kept.close()


def test_an_initialize_refused_with_no_allowed_version_listed_is_raised_after_one_request():
    from mcp_sync.errors import InvalidParams

    starter, target = Starter(), ScriptedTarget(_strict_2024_server)
    with pytest.raises(InvalidParams):
        negotiation.settle(starter.start(target), target, terms(allowed=("2025-11-25", "2025-06-18")), starter)
    assert methods(target.opened[0]) == ["initialize"]
