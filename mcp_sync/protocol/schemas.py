"""JSON Schema validation of tool output, with compiled validators cached.

A tool's `outputSchema` is compiled once (per distinct schema, keyed by its
canonical JSON) and reused for every call; compiling per call would cost
more than the call. The dialect follows `$schema`, defaulting to 2020-12 as
the spec requires. References are never fetched from the network: a `$ref`
that is not inside the schema fails validation instead of passing silently.
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

# jsonschema is imported on first use, not with the package: most programs
# never validate a schema, and the import costs about 30 ms.


def _no_retrieve(uri: str) -> referencing.Resource[Any]:
    import referencing.exceptions

    raise referencing.exceptions.NoSuchResource(ref=uri)  # type: ignore[call-arg]


@functools.lru_cache(maxsize=None)
def _empty_registry() -> referencing.Registry[Any]:
    import referencing

    return referencing.Registry(retrieve=_no_retrieve)  # type: ignore[call-arg]


class SchemaCache:
    """Compiled validators by schema, bounded (least recently used goes). Thread-safe."""

    def __init__(self, max_entries: int = 256) -> None:
        self._max = max_entries
        self._lock = threading.Lock()
        self._validators: collections.OrderedDict[str, Any] = collections.OrderedDict()

    def validator(self, schema: Mapping[str, Any]) -> Any:
        key = json.dumps(schema, sort_keys=True, separators=(",", ":"))
        with self._lock:
            found = self._validators.get(key)
            if found is not None:
                self._validators.move_to_end(key)
                return found
        import jsonschema
        import jsonschema.validators

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

        An invalid schema or an unresolvable `$ref` is reported as a problem.
        """
        import jsonschema.exceptions
        import referencing.exceptions

        try:
            validator = self.validator(schema)
            found = []
            for error in validator.iter_errors(instance):
                where = "/".join(str(p) for p in error.absolute_path) or "(root)"
                found.append(f"{where}: {error.message}")
                if len(found) >= _MAX_ERRORS:
                    break
            return found
        except jsonschema.exceptions.SchemaError as exc:
            return [f"the outputSchema itself is invalid: {exc.message}"]
        except referencing.exceptions.Unresolvable as exc:
            return [f"the outputSchema has a $ref that cannot be resolved locally: {exc}"]

    def __len__(self) -> int:
        with self._lock:
            return len(self._validators)
