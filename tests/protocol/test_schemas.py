import threading

from mcp_sync.protocol.schemas import SchemaCache

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
