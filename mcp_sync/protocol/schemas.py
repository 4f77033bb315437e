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
"""

from __future__ import annotations

import collections
import functools
import json
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import referencing

_MAX_ERRORS = 5

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


class SchemaCache:
    """Compiled validators by schema, bounded (least recently used goes). Thread-safe."""

    def __init__(self, max_entries: int = 256) -> None:
        self._least = self._max = max_entries
        self._lock = threading.Lock()
        self._validators: collections.OrderedDict[str, Any] = collections.OrderedDict()

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
        nested deeper than `MAX_SCHEMA_DEPTH`."""
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
        compiled = cls(schema, registry=_empty_registry())
        with self._lock:
            self._validators[key] = compiled
            while len(self._validators) > self._max:
                self._validators.popitem(last=False)
        return compiled

    def errors(self, schema: Mapping[str, Any], instance: Any) -> list[str]:
        """Validation problems of `instance` against `schema` ([] when valid).

        An invalid schema, an unresolvable `$ref`, a schema nested deeper
        than `MAX_SCHEMA_DEPTH`, or a schema and instance too deep to
        validate with the interpreter's recursion limit are reported as a
        problem: whatever the server sent, this never raises.
        """
        import jsonschema.exceptions
        import referencing.exceptions

        try:
            validator = self.validator(schema)
            found = []
            for error in validator.iter_errors(instance):
                where = "/".join(str(p) for p in error.absolute_path) or "(root)"
                found.append(_short(f"{where}: {error.message}"))
                if len(found) >= _MAX_ERRORS:
                    break
            return found
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

    def __len__(self) -> int:
        with self._lock:
            return len(self._validators)
