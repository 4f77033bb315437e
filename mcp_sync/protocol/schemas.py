"""JSON Schema validation of tool output, with compiled validators cached.

A tool's `outputSchema` is compiled once (per distinct schema, keyed by its
canonical JSON) and reused for every call; compiling per call would cost
more than the call. The dialect follows `$schema`, defaulting to 2020-12 as
the spec requires. References are never fetched from the network: a `$ref`
that is not inside the schema fails validation instead of passing silently.

Depth. jsonschema recurses, several frames per level of schema, so a schema
nested a few hundred deep (or an instance that deep under a recursive
`$ref`) would raise `RecursionError`. A schema nested deeper than
`MAX_SCHEMA_DEPTH` is refused before any work (`nesting_depth` measures it
without recursing; `mcp_sync.types.Tool` applies the same limit), and a
`RecursionError` that still happens is reported as a validation problem,
never raised.

Patterns. The schema is the server's, and jsonschema matches `pattern` and
`patternProperties` with Python's `re`, which backtracks: `"(x+x+)+y"`
against 30 "x" takes 40 s, twice that with each more, and a match in `re`
cannot be interrupted. So every pattern of a schema is matched here with
the `regex` package instead (the same syntax for ordinary patterns, and a
`timeout=`), within a budget that counts only the time spent matching:
until the call's deadline when there is one (`errors(..., deadline=)`),
plus at most `PATTERN_GRACE` of matching past it, else at most
`PATTERN_SECONDS` of matching for one validation. A match still running
then is cut off (`regex` counts the process's CPU time, so a process
starved of CPU overshoots by that factor, and other busy threads make it
cut earlier) and the value is reported as not checked, naming the
pattern; never raised, never hung on. The same holds for the patterns
`additionalProperties` consults. A pattern whose repetitions would make
`regex` build an oversized program (`"x{100000000}"`; it expands them when
it compiles) is not compiled, and a schema in which jsonschema itself
would still match patterns with `re` (`unevaluatedProperties` beside
`patternProperties`; patterns under a subschema with its own `$schema`;
a reference or `$id` into json-schema.org, whose meta-schemas jsonschema
validates with its own classes and whose `$dynamicRef` can lead back into
the server's schema) is reported as unusable: no pattern of a server's
schema ever reaches `re`'s matcher.
"""

from __future__ import annotations

import collections
import contextvars
import functools
import json
import logging
import threading
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import referencing
    import regex

log = logging.getLogger("mcp_sync.client")

_MAX_ERRORS = 5

#: With no deadline, the most time the patterns of one `SchemaCache.errors`
#: call may spend matching, in seconds, all matches together (only the time
#: inside matches counts: a large value with cheap patterns is not refused
#: for the time the rest of the validation took).
PATTERN_SECONDS = 1.0

#: With a deadline, the most time the matches of one validation may spend
#: past it, all together: ordinary patterns (microseconds each) are still
#: checked when the answer came at the last moment, and a match still
#: running is cut off within this of the deadline.
PATTERN_GRACE = 0.1

#: The most items `regex` may make of one pattern when it compiles it: it
#: writes out the required copies of a repetition (``"a{1000000}"`` takes a
#: third of a second and ``"a{4000000000}"`` all the memory there is). Ten
#: thousand compile in a few milliseconds; real patterns stay far below.
MAX_PATTERN_SIZE = 10_000

#: The deepest JSON nesting a tool's `inputSchema` or `outputSchema` may have
#: (``{"type": "object"}`` is 1 deep; each `properties` level adds 2). Real
#: schemas stay far below it; deeper ones are what a hostile server sends.
MAX_SCHEMA_DEPTH = 64

# jsonschema is imported on first use, not with the package: most programs
# never validate a schema, and the import costs about 30 ms.


def _no_retrieve(uri: str) -> referencing.Resource[Any]:
    import referencing.exceptions

    raise referencing.exceptions.NoSuchResource(ref=uri)  # type: ignore[call-arg]


@functools.lru_cache(maxsize=None)
def _empty_registry() -> referencing.Registry[Any]:
    import referencing

    return referencing.Registry(retrieve=_no_retrieve)  # type: ignore[call-arg]


def nesting_depth(value: Any, limit: int | None = None) -> int:
    """How deeply `value` nests objects and arrays: 0 for a scalar, 1 for
    ``{}`` or ``[]``, 2 for ``{"a": []}``, and so on.

    Any depth is measured without running out of stack: with no `limit`
    (or a large one) the walk keeps its own stack, and with a `limit` it
    recurses at most that deep, stopping as soon as the depth is known to
    exceed it, and returns ``limit + 1``.

        >>> nesting_depth({"type": "object", "properties": {"a": {"type": "string"}}})
        3
    """
    if limit is not None and limit <= _RECURSION_BUDGET:
        # Bounded recursion (limit + 1 frames at most): no list per level,
        # so nothing for the garbage collector to track. A listing of
        # 10,000 tools checks every schema, and the lists the walk below
        # allocates made the collector scan the whole heap more often.
        return _depth_within(value, limit) if _is_container(value) else 0
    depth = 0
    level: list[Any] = [value]
    while True:
        below: list[Any] = []
        containers = False
        for item in level:
            if _is_container(item):
                below.extend(item.values() if isinstance(item, Mapping) else item)
                containers = True
        if not containers:
            return depth
        depth += 1
        if limit is not None and depth > limit:
            return limit + 1
        level = below


#: The deepest `limit` that `nesting_depth` walks by recursion.
_RECURSION_BUDGET = 200


def _is_container(item: Any) -> bool:
    kind = type(item)
    if kind is dict or kind is list or kind is tuple:
        return True
    if kind is str or kind is int or kind is bool or kind is float or item is None:
        return False  # the common scalars, without the slow ABC check
    return isinstance(item, (Mapping, list, tuple))


def _depth_within(item: Any, budget: int) -> int:
    """The depth of the object or array `item` when at most `budget`, else
    ``budget + 1``; recurses at most `budget` + 1 frames deep."""
    if budget < 1:
        return budget + 1
    deepest = 0
    for child in item.values() if type(item) is dict or isinstance(item, Mapping) else item:
        kind = type(child)  # _is_container inlined: most children are strings
        if kind is str or kind is int or kind is bool or kind is float or child is None:
            continue
        if kind is dict or kind is list or kind is tuple or isinstance(child, (Mapping, list, tuple)):
            found = _depth_within(child, budget - 1)
            if found > deepest:
                if found >= budget:  # the child alone is too deep
                    return budget + 1
                deepest = found
    return deepest + 1


class SchemaTooDeep(ValueError):
    """A schema nested deeper than `MAX_SCHEMA_DEPTH` (see `check_depth`)."""

    def __init__(self) -> None:
        super().__init__(f"the schema is nested deeper than {MAX_SCHEMA_DEPTH} levels")


def check_depth(schema: Any) -> None:
    """Raise `SchemaTooDeep` (a `ValueError`) when `schema` nests deeper
    than `MAX_SCHEMA_DEPTH`. The walk stops as soon as it is past that
    depth: a chain 100,000 deep costs what one 65 deep does.

        >>> check_depth({"type": "object"})
        >>> check_depth({"not": {"not": {"not": {}}}})
    """
    if nesting_depth(schema, MAX_SCHEMA_DEPTH) > MAX_SCHEMA_DEPTH:
        raise SchemaTooDeep()


def _short(text: str, limit: int = 500) -> str:
    """A problem message of bounded size: jsonschema's quote the instance."""
    return text if len(text) <= limit else text[:limit] + "..."


class Unchecked(str):
    """A problem (a `str`, as `SchemaCache.errors` returns them) that means
    the value could not be checked at all, rather than that it does not
    match: a pattern cut off at the deadline, or one that cannot be used."""

    __slots__ = ()


# -- patterns, matched with `regex` within a budget -------------------------------------------------
#
# The invariant: a compiled validator is shared by every thread that
# validates against its schema (SchemaCache), so nothing about one
# validation (its deadline) is ever stored on it. `errors()` puts the end of
# its budget in `_budget`, a context variable: each thread (and each
# context) sees only its own, set for exactly the duration of its
# `errors()` call and reset after. The keyword functions below read it for
# every match.


class _Budget:
    """One validation's time for matching: `deadline` (a `time.monotonic()`
    instant) or None, and the matching time `spent` so far against
    PATTERN_SECONDS (no deadline) or PATTERN_GRACE (past the deadline).
    Used by one thread at a time: the one whose `errors()` made it."""

    __slots__ = ("deadline", "spent")

    def __init__(self, deadline: float | None) -> None:
        self.deadline = deadline
        self.spent = 0.0

    def left(self, now: float) -> float:
        """How long the next match may take."""
        if self.deadline is None:
            return PATTERN_SECONDS - self.spent
        return max(self.deadline - now, 0.0) + PATTERN_GRACE - self.spent

    def charge(self, started: float, ended: float) -> None:
        """A match ran from `started` to `ended`: what counts of it."""
        if self.deadline is None:
            self.spent += ended - started
        elif ended > self.deadline:
            self.spent += ended - max(started, self.deadline)


_budget: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar("mcp_sync_pattern_budget", default=None)


class _NotChecked(Exception):
    """Raised by a keyword function to stop the whole validation (a problem
    yielded instead could be swallowed by `not`, `anyOf` or `if`, and the
    value pass): `pattern` was cut off (`why` None) or cannot be used.
    `target` is the string matched, or the object whose key `key` was."""

    def __init__(self, pattern: str, target: Any, key: str | None, why: str | None) -> None:
        super().__init__(pattern)
        self.pattern, self.target, self.key, self.why = pattern, target, key, why


def _parser() -> Any:
    """`re`'s own parser (private, but the one `re.compile` uses)."""
    try:
        from re import _parser as parser  # type: ignore[attr-defined]  # Python 3.11 on
    except ImportError:  # pragma: no cover - Python 3.10
        import sre_parse as parser
    return parser


def _program_size(pattern: str, limit: int) -> int:
    """How many items `regex` makes of `pattern`, roughly (each repetition
    counts its body once more than its minimum), or ``limit + 1`` as soon as
    it is known to be more than `limit`. Raises `re.error` for a pattern
    `re` rejects."""
    parser = _parser()
    repeats = {parser.MAX_REPEAT, parser.MIN_REPEAT, getattr(parser, "POSSESSIVE_REPEAT", None)}
    total = 0
    stack: list[tuple[Any, int]] = [(parser.parse(pattern), 1)]
    while stack:
        items, times = stack.pop()
        for op, av in items:
            total += times
            if total > limit:
                return limit + 1
            if op in repeats:
                stack.append((av[2], times * (av[0] + 1)))
                continue
            for part in av if isinstance(av, (tuple, list)) else (av,):
                if isinstance(part, parser.SubPattern):
                    stack.append((part, times))
                elif isinstance(part, list):  # a branch's alternatives
                    stack.extend((each, times) for each in part if isinstance(each, parser.SubPattern))
    return total


@functools.lru_cache(maxsize=512)
def _compiled(pattern: str) -> regex.Pattern[str] | str:
    """`pattern` compiled by `regex`, or why it cannot be (a str). Bounded:
    a schema's patterns are compiled once, as `re` would cache them."""
    import re

    import regex

    try:
        size = _program_size(pattern, MAX_PATTERN_SIZE)
    except re.error as exc:
        return f"Python's re rejects it ({exc})"
    if size > MAX_PATTERN_SIZE:
        return f"its repetitions would compile to more than {MAX_PATTERN_SIZE:,} items"
    try:
        return regex.compile(pattern)
    except Exception as exc:  # noqa: BLE001 - regex.error, or whatever a pattern makes it raise
        return f"the regex module cannot compile it ({exc})"


def search_within(pattern: str, text: str, seconds: float = PATTERN_SECONDS) -> bool | None:
    """Whether a server's `pattern` matches somewhere in `text`, as JSON
    Schema's `pattern` and `patternProperties` read it, matched as this
    module matches them (`regex`, never `re`): None when the pattern cannot
    be used (see `_compiled`) or the match did not end within `seconds` of
    CPU time (a pattern that backtracks).

        >>> search_within("^x-", "x-trace"), search_within("(x+x+)+y", "x" * 3000, 0.05)
        (True, None)
    """
    try:
        compiled = _compiled(pattern)
    except Exception:  # noqa: BLE001 - re's parser: OverflowError ("x{4294967296}"), RecursionError...
        return None
    if isinstance(compiled, str):
        return None
    try:
        return compiled.search(text, timeout=seconds) is not None
    except TimeoutError:
        return None


def _search(pattern: str, text: str, target: Any, key: str | None) -> bool:
    """Whether `pattern` matches somewhere in `text` (`re.search`), within
    the budget of the running `errors()` call (see `_budget`); a validator
    used outside one gives each match `PATTERN_SECONDS`. Raises `_NotChecked`
    when the budget runs out or the pattern cannot be used."""
    budget = _budget.get()
    if budget is None:
        budget = _Budget(None)
    compiled = _compiled(pattern)
    if isinstance(compiled, str):
        raise _NotChecked(pattern, target, key, compiled)
    started = time.monotonic()
    left = budget.left(started)
    if left <= 0:
        raise _NotChecked(pattern, target, key, None)
    try:
        return compiled.search(text, timeout=left) is not None
    except TimeoutError:
        raise _NotChecked(pattern, target, key, None) from None
    finally:
        budget.charge(started, time.monotonic())


# jsonschema's own keyword functions (jsonschema/_keywords.py), exactly,
# but for `re.search`: the same results, the same messages.


def _pattern(validator: Any, patrn: str, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if validator.is_type(instance, "string") and not _search(patrn, instance, instance, None):
        yield ValidationError(f"{instance!r} does not match {patrn!r}")


def _pattern_properties(validator: Any, patternProperties: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patternProperties.items():
        for k, v in instance.items():
            if _search(pattern, k, instance, k):
                yield from validator.descend(v, subschema, path=k, schema_path=pattern)


def _additional_properties(validator: Any, aP: Any, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "object"):
        return
    # jsonschema/_utils.py find_additional_properties: one search of the patterns joined.
    properties = schema.get("properties", {})
    patterns = "|".join(schema.get("patternProperties", {}))
    extras = {name for name in instance
              if name not in properties and not (patterns and _search(patterns, name, instance, name))}
    if validator.is_type(aP, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], aP, path=extra)
    elif not aP and extras:
        if "patternProperties" in schema:
            verb = "does" if len(extras) == 1 else "do"
            joined = ", ".join(repr(each) for each in sorted(extras))
            listed = ", ".join(repr(each) for each in sorted(schema["patternProperties"]))
            yield ValidationError(f"{joined} {verb} not match any of the regexes: {listed}")
        else:
            names = sorted(extras, key=str)
            verb = "was" if len(names) == 1 else "were"
            yield ValidationError(
                f"Additional properties are not allowed ({', '.join(repr(name) for name in names)} {verb} unexpected)")


_BOUNDED_KEYWORDS = {"pattern": _pattern, "patternProperties": _pattern_properties,
                     "additionalProperties": _additional_properties}


@functools.lru_cache(maxsize=None)
def _bounded(cls: Any) -> Any:
    """The validator class `cls` (one per dialect) with the keywords that
    match patterns replaced by the ones above."""
    import jsonschema.validators

    return jsonschema.validators.extend(cls, {keyword: function for keyword, function in _BOUNDED_KEYWORDS.items()
                                              if keyword in cls.VALIDATORS})


#: The keywords through which a schema can lead jsonschema to a meta-schema.
_REFERENCES = ("$ref", "$dynamicRef", "$recursiveRef", "$id", "id")


def _pattern_hazard(schema: Mapping[str, Any]) -> str | None:
    """Why jsonschema would still match some pattern of `schema` with `re`
    (outside the keywords `_bounded` replaces), or None. Conservative: a
    key anywhere in the schema counts, wherever it is."""
    import jsonschema.validators

    patterns = pattern_properties = unevaluated = False
    dialect: str | None = None
    meta: str | None = None
    level: list[Any] = [schema]
    while level:
        below: list[Any] = []
        for node in level:
            if isinstance(node, Mapping):
                patterns = patterns or isinstance(node.get("pattern"), str)
                if isinstance(node.get("patternProperties"), Mapping) and node["patternProperties"]:
                    patterns = pattern_properties = True
                unevaluated = unevaluated or "unevaluatedProperties" in node
                for keyword in _REFERENCES:
                    value = node.get(keyword)
                    if meta is None and isinstance(value, str) and "json-schema.org" in value.lower():
                        meta = f"{keyword} {_short(value, 80)!r}"
                nested = node.get("$schema")
                if node is not schema and dialect is None and isinstance(nested, str):
                    try:
                        known = jsonschema.validators.validator_for(node, default=None) is not None
                    except ValueError:  # not a URI; jsonschema fails on it if it ever gets there
                        known = False
                    if known:
                        dialect = nested
                below.extend(node.values())
            elif isinstance(node, (list, tuple)):
                below.extend(node)
        level = below
    if unevaluated and pattern_properties:
        return ("it has unevaluatedProperties beside patternProperties, and jsonschema matches those patterns "
                "for it with Python's re, which cannot be bounded in time")
    if meta is not None and patterns:
        return (f"it refers into json-schema.org ({meta}), whose meta-schemas jsonschema validates with its own "
                "classes, which match patterns with Python's re, which cannot be bounded in time")
    if dialect is not None and patterns:
        return (f"a subschema names its own $schema ({dialect!r}), under which jsonschema would match the "
                "patterns with Python's re, which cannot be bounded in time")
    return None


def _located(root: Any, target: Any, key: str | None) -> str:
    """Where `target` (found by identity) is in `root`, as the problems of
    `errors()` say it, with `key` after it; "(somewhere)" if not found."""
    stack: list[tuple[Any, list[Any]]] = [(root, [])]
    found: list[Any] | None = None
    while stack and found is None:
        node, path = stack.pop()
        if node is target:
            found = path
            break
        if isinstance(node, Mapping):
            for name, value in node.items():
                if key is None and name is target:  # a name matched (propertyNames)
                    found = path + [name]
                    break
                stack.append((value, path + [name]))
        elif isinstance(node, (list, tuple)):
            stack.extend((value, path + [index]) for index, value in enumerate(node))
    if found is None:
        return "(somewhere)"
    if key is not None:
        found = found + [key]
    # A name is the server's too: a long one is cut, so the pattern after it shows.
    return "/".join(_short(str(part), 40) for part in found) or "(root)"


class _Entry(NamedTuple):
    validator: Any
    hazard: str | None  # see _pattern_hazard


class SchemaCache:
    """Compiled validators by schema, bounded (least recently used goes). Thread-safe."""

    def __init__(self, max_entries: int = 256) -> None:
        self._least = self._max = max_entries
        self._lock = threading.Lock()
        self._validators: collections.OrderedDict[str, _Entry] = collections.OrderedDict()
        self._warned: set[str] = set()  # the patterns cut off or unusable, warned of once

    def hold(self, entries: int) -> None:
        """Keep room for at least `entries` validators (never fewer than the
        bound it was made with). A client holds one per listed tool with an
        `outputSchema`: a bound below that would evict a validator before
        its tool came round again and compile on every call."""
        with self._lock:
            self._max = max(self._least, entries)
            while len(self._validators) > self._max:
                self._validators.popitem(last=False)

    def validator(self, schema: Mapping[str, Any]) -> Any:
        """The compiled validator of `schema`. Raises jsonschema's
        `SchemaError` for an invalid schema and `SchemaTooDeep` for one
        nested deeper than `MAX_SCHEMA_DEPTH`. Its patterns are matched
        with `regex` (see "Patterns" above), each within `PATTERN_SECONDS`
        when it is used outside `errors()`."""
        return self._entry(schema).validator

    def _entry(self, schema: Mapping[str, Any]) -> _Entry:
        try:
            key = json.dumps(schema, sort_keys=True, separators=(",", ":"))
        except RecursionError:
            raise SchemaTooDeep() from None
        with self._lock:
            found = self._validators.get(key)
            if found is not None:
                self._validators.move_to_end(key)
                return found
        # Checked once per schema, before jsonschema recurses through it.
        check_depth(schema)
        import jsonschema
        import jsonschema.exceptions
        import jsonschema.validators

        dialect = schema.get("$schema")
        if dialect is not None and not isinstance(dialect, str):
            # jsonschema would look it up in a dict: a list raises TypeError.
            raise jsonschema.exceptions.SchemaError(f"$schema must be a string, not {type(dialect).__name__}")

        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        cls.check_schema(schema)
        # The dialect is chosen; the root's `$schema` goes: jsonschema picks
        # the class again for every subschema with one (a `$ref` to "#"
        # too), and would pick its own, which matches patterns with `re`.
        root = {name: value for name, value in schema.items() if name != "$schema"}
        entry = _Entry(_bounded(cls)(root, registry=_empty_registry()), _pattern_hazard(schema))
        with self._lock:
            self._validators[key] = entry
            while len(self._validators) > self._max:
                self._validators.popitem(last=False)
        return entry

    def errors(self, schema: Mapping[str, Any], instance: Any, *, deadline: float | None = None) -> list[str]:
        """Validation problems of `instance` against `schema` ([] when valid).

        An invalid schema, an unresolvable `$ref`, a schema nested deeper
        than `MAX_SCHEMA_DEPTH`, or a schema and instance too deep to
        validate with the interpreter's recursion limit are reported as a
        problem: whatever the server sent, this never raises.

        `deadline` (a `time.monotonic()` instant, the call's) bounds the
        time its patterns may take; without one they get `PATTERN_SECONDS`.
        A pattern still matching then is cut off, and the first problem
        says which, where, and that the value was not checked (an
        `Unchecked`); a warning names each such pattern once.
        """
        import jsonschema.exceptions
        import referencing.exceptions

        budget = _Budget(deadline)
        token = _budget.set(budget)  # this validation's own; see `_budget`
        found: list[str] = []
        try:
            entry = self._entry(schema)
            if entry.hazard is not None:
                return [Unchecked(f"the schema cannot be used: {entry.hazard}; the value was not checked")]
            for error in entry.validator.iter_errors(instance):
                where = "/".join(str(p) for p in error.absolute_path) or "(root)"
                found.append(_short(f"{where}: {error.message}"))
                if len(found) >= _MAX_ERRORS:
                    break
            return found
        except _NotChecked as exc:
            where = _located(instance, exc.target, exc.key)
            if exc.why is not None:
                problem = f"{where}: the pattern {exc.pattern!r} cannot be used: {exc.why}; the value was not checked"
            elif budget.deadline is not None:
                problem = (f"{where}: the pattern {exc.pattern!r} had not finished matching when the call's deadline "
                           "came (a pattern that backtracks, or a value too large to check in time); the result "
                           "was not checked")
            else:
                problem = (f"{where}: the pattern {exc.pattern!r} had not finished matching after "
                           f"{PATTERN_SECONDS:g} s, the most one validation may spend on patterns (a pattern "
                           "that backtracks); the value was not checked")
            self._warn_once(exc.pattern, _short(problem))
            return [Unchecked(_short(problem))] + found[:_MAX_ERRORS - 1]
        except jsonschema.exceptions.SchemaError as exc:
            return [_short(f"the outputSchema itself is invalid: {exc.message}")]
        except referencing.exceptions.Unresolvable as exc:
            return [_short(f"the outputSchema has a $ref that cannot be resolved locally: {exc}")]
        except SchemaTooDeep as exc:
            return [f"the schema cannot be used: {exc}"]
        except RecursionError:
            # A recursive `$ref` follows the instance down: the depth of the
            # instance, not of the schema, ran out the stack.
            return ["the schema and the value are nested too deeply to validate"]
        except Exception as exc:
            # The schema is the server's, and jsonschema and referencing
            # fail on some malformed ones with whatever the failing step
            # raised (`{"$schema": "http://["}`: ValueError from urlsplit).
            # A schema the validator cannot run is unusable: a problem,
            # so the result is refused rather than the call crashing.
            return [_short(f"the schema cannot be used: {type(exc).__name__}: {exc}")]
        finally:
            _budget.reset(token)

    def _warn_once(self, pattern: str, problem: str) -> None:
        """One warning per distinct pattern (for the first 1,024 of them;
        each remembered by its first 200 characters, so the set stays small
        whatever the server's patterns are)."""
        key = pattern[:200]
        with self._lock:
            if key in self._warned or len(self._warned) >= 1024:
                return
            self._warned.add(key)
        log.warning("%s", problem)

    def __len__(self) -> int:
        with self._lock:
            return len(self._validators)
