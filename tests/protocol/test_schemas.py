import logging
import threading
import time

import jsonschema
import pytest

from mcp_sync.protocol import schemas
from mcp_sync.protocol.schemas import SchemaCache, Unchecked
from tests.helpers import SLACK

SCHEMA = {"type": "object", "properties": {"sum": {"type": "number"}}, "required": ["sum"]}


def test_valid_and_invalid_instances():
    cache = SchemaCache()
    assert cache.errors(SCHEMA, {"sum": 3}) == []
    problems = cache.errors(SCHEMA, {"sum": "3"})
    assert problems and "sum" in problems[0]
    assert cache.errors(SCHEMA, {}) == ["(root): 'sum' is a required property"]


def test_compiled_once_per_schema():
    cache = SchemaCache()
    first = cache.validator(SCHEMA)
    assert cache.validator(dict(reversed(list(SCHEMA.items())))) is first
    assert len(cache) == 1


def test_bounded():
    cache = SchemaCache(max_entries=3)
    for i in range(10):
        cache.validator({"type": "object", "title": str(i)})
    assert len(cache) == 3


def test_network_ref_is_never_fetched_and_fails():
    problems = SchemaCache().errors({"$ref": "https://example.invalid/schema.json"}, {"a": 1})
    assert problems and "$ref" in problems[0]


def test_local_refs_work():
    schema = {"$defs": {"n": {"type": "integer"}}, "type": "object", "properties": {"x": {"$ref": "#/$defs/n"}}}
    assert SchemaCache().errors(schema, {"x": 1}) == []
    assert SchemaCache().errors(schema, {"x": "1"})


def test_invalid_schema_is_reported():
    assert SchemaCache().errors({"type": "no-such-type"}, 1)[0].startswith("the outputSchema itself is invalid")


def test_dialect_follows_dollar_schema():
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
              "dependencies": {"a": ["b"]}}
    assert SchemaCache().errors(draft7, {"a": 1})  # draft-07 'dependencies' applies
    assert SchemaCache().errors({"type": "object", "dependencies": {"a": ["b"]}}, {"a": 1}) == []  # 2020-12 ignores it


def test_thread_safe_under_contention():
    cache = SchemaCache(max_entries=8)
    failures = []

    def work(n):
        for i in range(200):
            schema = {"type": "object", "title": str((n + i) % 16)}
            if cache.errors(schema, {}) != []:
                failures.append(i)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == [] and len(cache) <= 8


# -- patterns: matched with `regex` within the call's deadline ------------------------------------

BACKTRACKS = "(x+x+)+y"  # forever in `re` on 3,000 "x", two minutes in `regex` unbounded
LONG = "x" * 3000
# The asserted bound on a cut-off, past the deadline: the library allows
# PATTERN_GRACE (0.1 s) of matching past it; the rest is the scheduling of a
# loaded two-core CI machine (on Python 3.12, beside other test runs, cut-offs
# came 0.05-0.22 s late; a pattern that is not cut off takes minutes). Tighter
# than `tests.helpers.SLACK` on purpose (the bound is on the lesser of wall and
# CPU time, see `timed`): it must tell a cut-off at the call's own deadline
# from one at a later deadline (another thread's, 0.1-0.3 s on) and from a
# budget given to each of twenty ~0.1 s matches instead of to all of them.
CUTOFF_SLACK = 0.3


def timed(call):
    """The result, the wall-clock seconds, and the seconds a cut-off is
    bounded by: `regex` counts the process's CPU time, so on a machine that
    starves the process of CPU a cut-off comes later on the clock by that
    factor (0.3 s of matching took 2.4 s in a CI run), and other busy
    threads make it come sooner. The lesser of the two is what a pattern
    that was cut off keeps small; one that was not takes minutes of both."""
    started, cpu = time.monotonic(), time.process_time()
    result = call()
    wall = time.monotonic() - started
    return result, wall, min(wall, time.process_time() - cpu)


def test_a_backtracking_pattern_is_cut_off_at_the_deadline():
    schema = {"type": "object", "properties": {"value": {"type": "string", "pattern": BACKTRACKS}}}
    problems, wall, seconds = timed(lambda: SchemaCache().errors(schema, {"value": LONG},
                                                                 deadline=time.monotonic() + 0.2))
    assert 0.2 - 0.05 < wall and seconds < 0.2 + CUTOFF_SLACK  # the pattern had its time, and no more
    assert problems == [
        "value: the pattern '(x+x+)+y' had not finished matching when the call's deadline came "
        "(a pattern that backtracks, or a value too large to check in time); the result was not checked"]
    assert isinstance(problems[0], Unchecked)


def test_a_backtracking_pattern_properties_name_is_cut_off_at_the_deadline():
    schema = {"type": "object", "properties": {"o": {"patternProperties": {BACKTRACKS: {"type": "integer"}}}}}
    problems, _, seconds = timed(lambda: SchemaCache().errors(schema, {"o": {"ok": 1, LONG: 2}},
                                                           deadline=time.monotonic() + 0.2))
    assert seconds < 0.2 + CUTOFF_SLACK
    assert len(problems) == 1 and isinstance(problems[0], Unchecked)
    # The path names the object and (cut) the name being matched, then the pattern.
    assert problems[0].startswith("o/" + "x" * 40 + "...: the pattern '(x+x+)+y' had not finished matching")


def test_the_patterns_additional_properties_consults_are_bounded_too():
    # jsonschema matches patternProperties again (joined) to find the additional properties.
    schema = {"additionalProperties": False, "patternProperties": {BACKTRACKS: {}}}
    problems, _, seconds = timed(lambda: SchemaCache().errors(schema, {LONG: 1}, deadline=time.monotonic() + 0.1))
    assert seconds < 0.1 + CUTOFF_SLACK
    assert "the pattern '(x+x+)+y' had not finished matching" in problems[0]


def test_a_pattern_reached_through_a_ref_to_a_root_with_its_own_dialect_is_bounded():
    # jsonschema picks the validator class again for a subschema with
    # `$schema`, the root reached through "#" included.
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
              "properties": {"child": {"$ref": "#"}, "value": {"type": "string", "pattern": BACKTRACKS}}}
    problems, _, seconds = timed(lambda: SchemaCache().errors(schema, {"child": {"child": {"value": LONG}}},
                                                           deadline=time.monotonic() + 0.1))
    assert seconds < 0.1 + CUTOFF_SLACK
    assert problems[0].startswith("child/child/value: the pattern '(x+x+)+y' had not finished matching")


@pytest.mark.parametrize("schema", [
    {"properties": {"v": {"$schema": "http://json-schema.org/draft-07/schema#", "pattern": BACKTRACKS}}},
    {"patternProperties": {BACKTRACKS: {}}, "unevaluatedProperties": False},
])
def test_a_schema_where_jsonschema_would_match_with_re_is_not_used(schema):
    problems, _, seconds = timed(lambda: SchemaCache().errors(schema, {"v": LONG, LONG: 1}))
    assert seconds < SLACK  # refused, not matched with `re` (forever on LONG)
    assert len(problems) == 1 and isinstance(problems[0], Unchecked)
    assert problems[0].startswith("the schema cannot be used: ") and "cannot be bounded in time" in problems[0]


PLAIN_CASES = [
    ({"type": "string", "pattern": "^x"}, "abc"),
    ({"type": "string", "pattern": "^x"}, "xyz"),
    ({"properties": {"a": {"pattern": r"^\d+$"}, "b": {"pattern": "é$"}}}, {"a": "12a", "b": "café"}),
    ({"patternProperties": {"^s_": {"type": "string"}, "^i_": {"type": "integer"}}},
     {"s_1": 1, "i_1": "x", "other": None}),
    ({"patternProperties": {"^a": {}}, "additionalProperties": False}, {"a1": 1, "b": 2, "c": 3}),
    ({"patternProperties": {"^a": {}}, "additionalProperties": False}, {"b": 2}),
    ({"properties": {"p": {}}, "additionalProperties": False}, {"p": 1, "q": 2, "r": 3}),
    ({"properties": {"p": {}}, "additionalProperties": {"type": "string"}}, {"p": 1, "q": 2}),
    ({"propertyNames": {"pattern": "^[a-z]+$"}}, {"ok": 1, "Not-OK": 2}),
    ({"items": {"pattern": "^(a|b)*$"}, "type": "array"}, ["ab", "abc", 3]),
    ({"not": {"pattern": "^x"}}, "xyz"),
    ({"$schema": "http://json-schema.org/draft-07/schema#",
      "properties": {"a": {"pattern": "^x"}}, "patternProperties": {"^z": {"type": "null"}}}, {"a": "b", "z": 1}),
    ({"$schema": "http://json-schema.org/draft-04/schema#", "additionalProperties": False,
      "patternProperties": {"^a": {}, "^b": {}}}, {"c": 1, "d": 2}),
]


@pytest.mark.parametrize(("schema", "instance"), PLAIN_CASES)
def test_ordinary_patterns_give_jsonschemas_own_results(schema, instance):
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    expected = ["/".join(str(p) for p in e.absolute_path) + ": " + e.message if e.absolute_path
                else "(root): " + e.message for e in cls(schema).iter_errors(instance)]
    assert SchemaCache().errors(schema, instance, deadline=time.monotonic() + 5) == expected
    assert SchemaCache().errors(schema, instance) == expected


def test_the_known_message_is_unchanged():
    assert SchemaCache().errors({"type": "string", "pattern": "^x"}, "abc") == ["(root): 'abc' does not match '^x'"]


def test_ordinary_patterns_are_checked_when_the_deadline_has_passed():
    # PATTERN_GRACE: an answer that came at the last moment is still checked.
    schema = {"type": "object", "properties": {"v": {"pattern": "^[a-z]+$"}, "w": {"pattern": "^x"}}}
    assert SchemaCache().errors(schema, {"v": "abc", "w": "y"}, deadline=time.monotonic() - 5) == [
        "w: 'y' does not match '^x'"]


def test_without_a_deadline_patterns_get_pattern_seconds(monkeypatch):
    monkeypatch.setattr(schemas, "PATTERN_SECONDS", 0.2)
    problems, _, seconds = timed(lambda: SchemaCache().errors({"pattern": BACKTRACKS}, LONG))
    assert seconds < 0.2 + CUTOFF_SLACK
    assert problems == ["(root): the pattern '(x+x+)+y' had not finished matching after 0.2 s, the most one "
                        "validation may spend on patterns (a pattern that backtracks); the value was not checked"]


def test_the_cap_is_one_budget_for_the_whole_validation(monkeypatch):
    monkeypatch.setattr(schemas, "PATTERN_SECONDS", 0.2)
    # Twenty strings that take ~0.1 s each in `regex`: the second or third is cut off, not each given 0.2 s.
    problems, _, seconds = timed(lambda: SchemaCache().errors({"items": {"pattern": BACKTRACKS}}, ["x" * 700] * 20))
    assert seconds < 0.2 + CUTOFF_SLACK
    assert "had not finished matching after 0.2 s" in problems[0]


@pytest.mark.parametrize(("pattern", "why"), [
    ("{i", "the regex module cannot compile it"),  # literal in `re`, fuzzy-match syntax in `regex`
    ("x{100000000}", "its repetitions would compile to more than 10,000 items"),  # `regex` would take GBs
    ("(?:(?:x{1000}){1000}){1000}", "its repetitions would compile to more than 10,000 items"),
])
def test_a_pattern_regex_cannot_compile_is_a_problem_not_an_exception(pattern, why):
    problems, _, seconds = timed(lambda: SchemaCache().errors({"properties": {"v": {"pattern": pattern}}}, {"v": "x"}))
    assert seconds < SLACK  # at once, not a compile into GBs
    assert len(problems) == 1 and isinstance(problems[0], Unchecked)
    assert problems[0].startswith(f"v: the pattern {pattern!r} cannot be used: {why}")


def test_one_warning_per_pattern(caplog):
    cache = SchemaCache()
    schema = {"pattern": BACKTRACKS}
    with caplog.at_level(logging.WARNING, logger="mcp_sync.client"):
        for _ in range(3):
            assert cache.errors(schema, LONG, deadline=time.monotonic() + 0.05)
    assert [r.getMessage() for r in caplog.records].count(
        "(root): the pattern '(x+x+)+y' had not finished matching when the call's deadline came "
        "(a pattern that backtracks, or a value too large to check in time); the result was not checked") == 1


def test_threads_each_keep_their_own_deadline():
    # One cache (one compiled validator per schema) shared by 8 threads: a
    # near deadline on one thread never cuts another's far one short.
    cache = SchemaCache()
    slow = {"type": "object", "properties": {"v": {"pattern": BACKTRACKS}}}
    fast = {"type": "object", "properties": {"v": {"pattern": "^x+$"}}}
    outcomes: dict[int, list] = {}

    def work(n):
        results = []
        for _ in range(3):
            if n % 2:
                budget = 0.05 * (n + 1)  # 0.1, 0.2, 0.3, 0.4 s
                problems, _, seconds = timed(lambda: cache.errors(slow, {"v": LONG},
                                                                  deadline=time.monotonic() + budget))
            else:
                budget = 30.0
                problems, _, seconds = timed(lambda: cache.errors(fast, {"v": "x" * 100_000},
                                                                  deadline=time.monotonic() + budget))
            results.append((problems, seconds, budget))
        outcomes[n] = results

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for n, results in outcomes.items():
        for problems, seconds, budget in results:
            if n % 2:
                assert len(problems) == 1 and "had not finished matching when the call's deadline" in problems[0]
                # Not later than its own deadline (earlier is possible: `regex`
                # counts the process's CPU time, which four matching threads
                # spend faster than the clock goes).
                assert seconds < budget + CUTOFF_SLACK, (n, seconds)
            else:
                assert problems == [], (n, problems)
                assert seconds < SLACK, (n, seconds)  # a cheap match, not held up by the others' cut-offs


def test_only_matching_time_is_charged_to_the_budget():
    budget = schemas._Budget(None)
    budget.charge(10.0, 10.25)
    assert budget.left(99.0) == pytest.approx(schemas.PATTERN_SECONDS - 0.25)
    late = schemas._Budget(100.0)
    late.charge(99.0, 99.5)  # before the deadline: free
    assert late.left(99.5) == pytest.approx(0.5 + schemas.PATTERN_GRACE)
    late.charge(99.98, 100.03)  # 30 ms of it past the deadline
    assert late.left(100.03) == pytest.approx(schemas.PATTERN_GRACE - 0.03)


def test_a_large_value_with_cheap_patterns_is_not_refused_for_the_rest_of_the_validation(monkeypatch):
    # 80,000 rows: jsonschema's own work takes far longer than the matching.
    # A first run, with room to spare, measures both: the matching time the
    # budget was charged, and the whole validation. The cap is then set
    # half-way between them: a budget that counted jsonschema's work would
    # run out, one that counts only matching has the difference (seconds)
    # to spare. No fixed number of seconds: each bounded match costs what
    # the `regex` release and the machine make it cost.
    schema = {"type": "object", "properties": {"rows": {"type": "array", "items": {
        "type": "object", "properties": {"id": {"type": "string", "pattern": "^[a-z0-9-]+$"}}}}}}
    rows = [{"id": f"row-{n}"} for n in range(80_000)]
    charged = []
    charge = schemas._Budget.charge

    def counting(self, started, ended):
        charged.append(ended - started)
        charge(self, started, ended)

    monkeypatch.setattr(schemas._Budget, "charge", counting)
    monkeypatch.setattr(schemas, "PATTERN_SECONDS", 3600.0)
    problems, whole, _ = timed(lambda: SchemaCache().errors(schema, {"rows": rows}))
    matching = sum(charged)
    assert problems == [] and len(charged) == len(rows)
    assert whole > 2 * matching, (whole, matching)  # else the test shows nothing

    monkeypatch.setattr(schemas, "PATTERN_SECONDS", (whole + matching) / 2)
    problems, _, _ = timed(lambda: SchemaCache().errors(schema, {"rows": rows}))
    assert problems == []


@pytest.mark.parametrize("reference", [
    {"$ref": "https://json-schema.org/draft/2020-12/schema"},
    {"$ref": "HTTP://JSON-SCHEMA.ORG/draft-07/schema#"},
    {"$id": "https://json-schema.org/draft/2020-12/x", "properties": {"a": {"$ref": "schema"}}},
])
def test_a_schema_that_leads_into_the_meta_schemas_is_not_used(reference):
    # The meta-schema runs under jsonschema's own class, and its
    # $dynamicRef "#meta" comes back to the server's root: `re` again.
    schema = {"pattern": "^(a|a)*$", "$id": "urn:evil", "$dynamicAnchor": "meta", **reference}
    problems, _, seconds = timed(lambda: SchemaCache().errors(schema, {"not": "a" * 40 + "!"},
                                                           deadline=time.monotonic() + 0.5))
    assert seconds < SLACK  # refused, not matched with `re` (2**40 steps)
    assert len(problems) == 1 and isinstance(problems[0], Unchecked)
    assert "refers into json-schema.org" in problems[0]
