"""The router on plain data: every routing rule, and properties that hold
for any sequence of messages (hypothesis)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_sync import router as routes
from mcp_sync.protocol import codes
from mcp_sync.router import Router


def response(request_id, result=None):
    return {"jsonrpc": "2.0", "id": request_id, "result": result or {}}


def note(method, params=None):
    message = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return message


def server_request(request_id, method="elicitation/create"):
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {}}


def test_a_response_goes_to_its_call_once():
    router = Router()
    router.add_call(1, "a")
    router.add_call(2, "b")
    assert router.receive(response(2))[:3] == (routes.CALL, "b", routes.RESPONSE)
    assert router.calls == {1: "a"}
    assert router.receive(response(2))[0] == routes.DROP  # a second answer crosses nothing


def test_a_response_for_a_forgotten_call_is_dropped():
    router = Router()
    router.add_call(1, "a")
    assert router.remove_call(1) == "a"
    assert router.receive(response(1))[0] == routes.DROP
    assert router.remove_call(1) is None


def test_an_id_in_flight_cannot_be_registered_twice():
    router = Router()
    router.add_call(1, "a")
    for add in (router.add_call, router.add_subscription):
        try:
            add(1, "b")
        except ValueError:
            pass
        else:
            raise AssertionError("a second registration of id 1 was accepted")


def test_progress_goes_by_token_and_never_ends_the_call():
    router = Router()
    router.add_call(7, "a")
    route = router.receive(note("notifications/progress", {"progressToken": 7, "progress": 1}))
    assert route[:3] == (routes.CALL, "a", routes.PROGRESS)
    assert 7 in router.calls
    assert router.receive(note("notifications/progress", {"progressToken": 8, "progress": 1}))[0] == routes.DROP


def test_a_log_or_server_request_goes_to_a_call_only_when_related():
    router = Router()
    router.add_call(1, "only call in flight")
    log = note("notifications/message", {"level": "info", "data": "x"})
    assert router.receive(log)[0] == routes.CLIENT_LOG
    assert router.receive(log, related_to=1)[:3] == (routes.CALL, "only call in flight", routes.LOG)
    assert router.receive(server_request("s1"))[0] == routes.HANDLERS
    assert router.receive(server_request("s2"), related_to=1)[:3] == (
        routes.CALL, "only call in flight", routes.SERVER_REQUEST)
    assert router.owed == {"s1", "s2"}


def test_a_server_request_related_to_a_finished_call_goes_to_the_handlers():
    router = Router()
    router.add_call(1, "a")
    router.receive(response(1))
    assert router.receive(server_request("late"), related_to=1)[0] == routes.HANDLERS


def test_an_owed_answer_is_settled_once_and_never_after_a_withdrawal():
    router = Router()
    router.receive(server_request("s1"))
    router.receive(server_request("s2"))
    assert router.settle("s1") is True
    assert router.settle("s1") is False
    route = router.receive(note("notifications/cancelled", {"requestId": "s2"}))
    assert route[0] == routes.DROP
    assert router.settle("s2") is False
    assert router.owed == set()


def test_subscription_routing():
    router = Router()
    router.add_subscription(5, "sub")
    listed = note("notifications/tools/list_changed", {"_meta": {routes.SUBSCRIPTION_ID: 5}})
    assert router.receive(listed)[:3] == (routes.SUBSCRIPTION, "sub", "notification")
    assert router.receive(note("notifications/resources/updated"), related_to=5)[:3] == (
        routes.SUBSCRIPTION, "sub", "notification")
    assert router.receive(note("notifications/tools/list_changed"))[0] == routes.NOTIFICATION
    assert router.receive(response(5))[:3] == (routes.SUBSCRIPTION, "sub", "end")
    assert router.subscriptions == {}
    router.add_subscription(6, "other")
    assert router.receive(note("notifications/cancelled", {"requestId": 6}))[:3] == (
        routes.SUBSCRIPTION, "other", "cancelled")
    assert router.subscriptions == {}


def test_invalid_messages_are_reported_not_routed():
    router = Router()
    router.add_call(1, "a")
    assert router.receive({"jsonrpc": "2.0", "id": 1})[0] == routes.INVALID
    assert router.receive({"id": 1, "result": {}})[0] == routes.INVALID
    assert router.receive([1, 2])[0] == routes.INVALID
    assert router.calls == {1: "a"}
    # A request whose id cannot be answered is dropped, not owed.
    assert router.receive({"jsonrpc": "2.0", "id": None, "method": "x"})[0] == routes.DROP
    assert router.owed == set()


# -- malformed requests: JSON-RPC, answered (or dropped), never the channel's end -----------

NOT_AN_OBJECT = "Invalid params: params must be an object, not an array"


def test_a_request_whose_params_is_not_an_object_is_owed_invalid_params_once():
    router = Router()
    router.add_call(1, "a")
    dest, owner, reason, answer = router.receive({"jsonrpc": "2.0", "id": 7, "method": "roots/list", "params": [1]})
    assert (dest, owner) == (routes.MALFORMED, None)
    assert answer == (7, {"code": codes.INVALID_PARAMS, "message": NOT_AN_OBJECT})
    assert "params is not an object" in reason
    assert router.owed == {7}
    assert router.settle(7) is True and router.settle(7) is False  # its one answer
    # The call in flight is untouched and still gets its response.
    assert router.receive(response(1))[:3] == (routes.CALL, "a", routes.RESPONSE)


def test_params_of_every_other_json_type_are_invalid_params():
    for params, kind in (("x", "a string"), (3, "a number"), (2.5, "a number"), (True, "a boolean"),
                         (None, "null"), ([], "an array")):
        router = Router()
        answer = router.receive({"jsonrpc": "2.0", "id": "q", "method": "ping", "params": params})[3]
        assert answer == ("q", {"code": codes.INVALID_PARAMS,
                                "message": f"Invalid params: params must be an object, not {kind}"})


def test_a_request_whose_method_is_not_a_string_is_owed_invalid_request():
    for method, kind in ((5, "a number"), (["m"], "an array"), ({"m": 1}, "an object"), (False, "a boolean")):
        router = Router()
        route = router.receive({"jsonrpc": "2.0", "id": 8, "method": method, "params": [1]})
        assert route[0] == routes.MALFORMED
        # The method is judged first: without one, params mean nothing.
        assert route[3] == (8, {"code": codes.INVALID_REQUEST,
                                "message": f"Invalid Request: method must be a string, not {kind}"})
        assert router.owed == {8}


def test_a_malformed_message_nobody_can_be_answered_about_is_dropped_not_owed():
    router = Router()
    router.add_call(1, "a")
    router.add_subscription(2, "s")
    for message in (
        {"jsonrpc": "2.0", "method": "notifications/message", "params": [1]},
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": "x"},
        {"jsonrpc": "2.0", "method": 5},
        {"jsonrpc": "2.0", "id": None, "method": "roots/list", "params": [1]},
        {"jsonrpc": "2.0", "id": 1.5, "method": 5},
        {"jsonrpc": "2.0", "id": True, "method": "ping", "params": "x"},
        {"jsonrpc": "2.0", "id": {"n": 1}, "method": "ping", "params": [1]},
        {"jsonrpc": "2.0", "id": [1], "method": "ping", "params": [1]},
    ):
        dest, owner, reason, answer = router.receive(message)
        assert (dest, owner, answer) == (routes.MALFORMED, None, None), message
        assert "dropped" in reason
    assert router.owed == set()
    assert (router.calls, router.subscriptions) == ({1: "a"}, {2: "s"})


def test_a_malformed_request_with_the_id_of_one_owed_already_leaves_that_answer_alone():
    router = Router()
    router.receive(server_request("s1"))
    route = router.receive({"jsonrpc": "2.0", "id": "s1", "method": "ping", "params": [1]})
    assert route[0] == routes.MALFORMED and route[3] is None
    assert router.settle("s1") is True  # the valid request's answer
    assert router.settle("s1") is False


def test_a_withdrawn_malformed_request_is_not_answered():
    router = Router()
    router.receive({"jsonrpc": "2.0", "id": "s1", "method": "ping", "params": [1]})
    assert router.receive(note("notifications/cancelled", {"requestId": "s1"}))[0] == routes.DROP
    assert router.settle("s1") is False


def test_what_is_not_shaped_as_a_request_is_still_invalid():
    router = Router()
    router.add_call(7, "a")
    for message in (
        {"jsonrpc": "2.0", "id": 7, "params": {}},               # no method: as much a broken response
        {"jsonrpc": "2.0", "id": 7, "method": None, "params": {}},
        {"jsonrpc": "2.0", "id": 7, "method": 5, "result": {}},  # may be a response to call 7
        {"jsonrpc": "2.0", "id": 7, "method": 5, "error": {"code": 1, "message": "x"}},
        {"jsonrpc": "2.0", "id": 7, "method": "ping", "params": [1], "result": {}},
        {"jsonrpc": "1.0", "id": 7, "method": "ping", "params": [1]},
        {"id": 7, "method": 5},
    ):
        assert router.receive(message)[0] == routes.INVALID, message
    assert router.owed == set() and router.calls == {7: "a"}


def test_clear_empties_everything():
    router = Router()
    router.add_call(1, "a")
    router.add_subscription(2, "s")
    router.receive(server_request("x"))
    assert router.clear() == (["a"], ["s"])
    assert not router.calls and not router.subscriptions and not router.owed


# -- properties -----------------------------------------------------------------------

ids = st.integers(min_value=1, max_value=6)
messages = st.one_of(
    st.builds(response, ids),
    st.builds(lambda i: note("notifications/progress", {"progressToken": i, "progress": 1}), ids),
    st.builds(lambda: note("notifications/message", {"level": "info", "data": 0})),
    st.builds(lambda i: server_request(f"s{i}"), ids),
    st.builds(lambda i: note("notifications/cancelled", {"requestId": f"s{i}"}), ids),
    st.builds(lambda: note("notifications/tools/list_changed")),
    st.builds(lambda i, params: {"jsonrpc": "2.0", "id": f"s{i}", "method": "roots/list", "params": params},
              ids, st.sampled_from([[1], "x", 3])),
    st.builds(lambda i: {"jsonrpc": "2.0", "id": f"s{i}", "method": 5}, ids),
    st.builds(lambda: note("notifications/progress", [1])),
)
steps = st.lists(st.tuples(
    st.sampled_from(["add", "remove", "receive", "settle"]), ids, messages, st.one_of(st.none(), ids)),
    max_size=60)


@settings(max_examples=300, deadline=None)
@given(steps)
def test_no_message_ever_reaches_a_call_it_does_not_belong_to(script):
    """For any interleaving: a response reaches only the call with its id
    and only once; nothing reaches a call after it left; a server request
    or log reaches a call only when related to it; an answer is owed once."""
    router = Router()
    live = set()
    used = set()  # the client's ids come from one counter: an id is never added twice
    answered = set()
    for action, number, message, related in script:
        if action == "add":
            if number not in used:
                router.add_call(number, number)
                live.add(number)
                used.add(number)
        elif action == "remove":
            router.remove_call(number)
            live.discard(number)
        elif action == "settle":
            request_id = f"s{number}"
            owed_before = request_id in router.owed
            assert router.settle(request_id) is owed_before
            assert request_id not in router.owed
        else:
            owed_before = set(router.owed)
            dest, owner, event, payload = router.receive(message, related)
            if dest == routes.MALFORMED:
                # Owed its error only when no answer under its id was owed.
                if "id" in message and message["id"] not in owed_before:
                    assert payload[0] == message["id"]
                else:
                    assert payload is None
            if dest == routes.CALL:
                assert owner in live
                if event == routes.RESPONSE:
                    assert message["id"] == owner
                    assert (owner, "response") not in answered
                    answered.add((owner, "response"))
                    live.discard(owner)
                elif event == routes.PROGRESS:
                    assert payload["progressToken"] == owner
                else:
                    assert related == owner
            if "method" in message and "id" in message:
                assert message["id"] in router.owed
        assert set(router.calls) == live


def test_a_cancellation_on_a_subscription_stream_about_another_request_follows_the_general_rules():
    router = Router()
    router.add_subscription(1, "A")
    router.add_subscription(2, "B")
    router.receive(server_request("srv-9"))
    route = router.receive(note("notifications/cancelled", {"requestId": "srv-9"}), related_to=1)
    assert route[0] == routes.DROP and router.owed == set()
    route = router.receive(note("notifications/cancelled", {"requestId": 2}), related_to=1)
    assert route[:3] == (routes.SUBSCRIPTION, "B", "cancelled")
    assert router.subscriptions == {1: "A"}


# `receive()` takes a shortcut for the commonest messages (a waiting call's
# result, its progress, a log message for no call, a notification tagged
# for an open subscription),
# with the checks of the general rules written inline; `route()` is the
# general rules alone. They must never disagree.
any_id = st.one_of(st.integers(min_value=1, max_value=4), st.sampled_from(["1", 1.0, True, None]))
tagged_meta = st.one_of(st.none(), st.builds(lambda i: {routes.SUBSCRIPTION_ID: i}, any_id),
                        st.just({"other": 1}), st.just("not a dict"))


def _with_meta(params, meta):
    return params if meta is None else {**params, "_meta": meta}


shortcut_messages = st.one_of(
    st.builds(lambda i, version: {"jsonrpc": version, "id": i, "result": {}}, any_id, st.sampled_from(["2.0", "1.0"])),
    st.builds(lambda i: {"jsonrpc": "2.0", "id": i, "result": {}, "method": "x"}, any_id),
    st.builds(lambda i, meta: note("notifications/progress", _with_meta({"progressToken": i, "progress": 1}, meta)),
              any_id, tagged_meta),
    st.builds(lambda method, meta: note(method, _with_meta({"uri": "u"}, meta)),
              st.sampled_from(["notifications/resources/updated", "notifications/cancelled",
                               "notifications/message"]), tagged_meta),
    st.builds(lambda i: {"method": "notifications/progress", "params": {"progressToken": i}}, any_id),
    st.builds(lambda: note("notifications/progress", "not a dict")),
    st.builds(lambda meta: note("notifications/message", _with_meta({"level": "info", "data": {"n": 1}}, meta)),
              tagged_meta),
    # Malformed (`route` answers or drops them): the shortcut must leave them.
    st.builds(lambda i, params: {"jsonrpc": "2.0", "id": i, "method": "roots/list", "params": params},
              any_id, st.sampled_from([[1], "x"])),
    st.builds(lambda i, method: {"jsonrpc": "2.0", "id": i, "method": method, "result": {}}, any_id,
              st.sampled_from([5, None])),
    st.builds(lambda method, params: {"jsonrpc": "2.0", "method": method, "params": params},
              st.sampled_from(["notifications/progress", "notifications/message", 5]),
              st.sampled_from([[1], "x", {"progressToken": 1}])),
)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=4), max_size=3),
       st.lists(st.integers(min_value=1, max_value=4), max_size=3),
       shortcut_messages, st.one_of(st.none(), st.integers(min_value=1, max_value=4)))
def test_the_shortcut_of_receive_agrees_with_the_general_rules(calls, subscriptions, message, related):
    routers = Router(), Router()
    for router in routers:
        for call in set(calls):
            router.add_call(call, f"call {call}")
        for subscription in set(subscriptions) - set(calls):
            router.add_subscription(subscription, f"subscription {subscription}")
    fast, general = routers
    assert fast.receive(message, related) == general.route(message, related)
    assert (fast.calls, fast.subscriptions, fast.owed) == (general.calls, general.subscriptions, general.owed)


# `run_for()` says, without routing, how far a run of messages goes to one
# subscription as notifications: exactly as far as `receive()` routes them
# there (for the messages its shortcut takes), and it changes nothing.
tagged_notes = st.builds(
    lambda method, tag, version: {**note(method, {"uri": "u", "_meta": {routes.SUBSCRIPTION_ID: tag}}),
                                  "jsonrpc": version},
    st.sampled_from(["notifications/resources/updated", "notifications/cancelled", "notifications/progress"]),
    st.sampled_from([1, 1, 1, 2, 3, "1", 1.0, True]), st.sampled_from(["2.0", "2.0", "2.0", "1.0"]))


progress_notes = st.builds(
    lambda token, request_id, meta: {**note("notifications/progress", _with_meta({"progressToken": token}, meta)),
                                     **({} if request_id is None else {"id": request_id})},
    st.sampled_from([3, 3, 3, 4, 3.0, True, "3"]), st.sampled_from([None, None, None, 5]),
    st.sampled_from([None, None, None, {routes.SUBSCRIPTION_ID: 1}, {"other": 1}]))
tagged_requests = st.builds(lambda method: {**note(method, {"_meta": {routes.SUBSCRIPTION_ID: 1}}), "id": 9},
                            st.sampled_from(["notifications/resources/updated", "sampling/createMessage"]))


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.one_of(tagged_notes, tagged_notes, progress_notes, progress_notes, tagged_requests,
                          shortcut_messages), max_size=8),
       st.integers(min_value=0, max_value=3), st.booleans(), st.booleans())
def test_a_run_for_a_subscription_or_a_call_is_what_receive_routes_to_it(messages, start, for_the_call, also_a_call):
    router = Router()
    owners = {1: "subscription 1", 2: "subscription 2", 3: "call 3"}
    for subscription in (1, 2):
        router.add_subscription(subscription, owners[subscription])
    router.add_call(3, owners[3])
    if also_a_call:
        router.add_call(4, "call 4")
    owner, event = (owners[3], (routes.CALL, "progress")) if for_the_call else (owners[1], (routes.SUBSCRIPTION,
                                                                                              "notification"))
    table = (dict(router.calls), dict(router.subscriptions), set(router.owed))
    end = router.run_for(owner, messages, start)  # (owners are compared by identity, as the engine's are)
    assert (router.calls, router.subscriptions, router.owed) == table  # no side effect
    expected = start
    while expected < len(messages):
        route = router.receive(messages[expected])
        if (route[0], route[1], route[2]) != (event[0], owner, event[1]):
            break
        expected += 1  # (routing these changes nothing either)
    # The run stops where `receive` routes elsewhere, or earlier at a
    # message its shortcut leaves to the general rules (a call's progress
    # that carries a `_meta`), which `deliver` then routes on its own.
    assert end == expected or (start <= end < expected and messages[end]["params"].get("_meta") is not None)
    if start < len(messages):
        assert router.run_for(owner, messages, start, start) == start  # `stop` bounds it
