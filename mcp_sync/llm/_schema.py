"""Tool names and input schemas as the model APIs want them.

Owns: turning MCP tool names (qualified the way `ClientGroup` qualifies
them) into names an API accepts, reversibly and without collisions, and
turning an MCP `inputSchema` into OpenAI's strict-mode subset.

Must not know: any SDK, or how a tool is called.
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["ANTHROPIC_NAME_LIMIT", "OPENAI_NAME_LIMIT", "api_names", "drop_nulls", "plain_schema", "strict_schema"]

#: OpenAI function names: ^[a-zA-Z0-9_-]{1,64}$ (Chat Completions and Responses).
OPENAI_NAME_LIMIT = 64
#: Anthropic tool names: ^[a-zA-Z0-9_-]{1,128}$.
ANTHROPIC_NAME_LIMIT = 128

_INVALID = re.compile(r"[^A-Za-z0-9_-]")
_VALID = re.compile(r"[A-Za-z0-9_-]+")


def _digest(name: str, length: int) -> str:
    return hashlib.sha256(name.encode("utf-8")).hexdigest()[:length]


def api_names(names: Iterable[str], limit: int, kept: Mapping[str, str] | None = None) -> dict[str, str]:
    """A name each API accepts, for every MCP name: ``{api_name: mcp_name}``.

    The result depends on the set of names only (not their order), so the
    same tools get the same names in every process:

    1. a name the API accepts as it is keeps it;
    2. otherwise each character outside ``[A-Za-z0-9_-]`` becomes ``_``
       (``local.echo`` -> ``local_echo``), when no other name would map to
       the same and it fits;
    3. otherwise (a collision, or too long) the cleaned name is cut and ends
       in ``_`` and 8 hex digits of the name's SHA-256.

    `kept` (the mapping given out before a refresh) goes first: an API
    name never moves to another tool while its tool is still there, so an
    answer the model wrote from the earlier definitions calls the tool it
    meant; the tools that are new take what is left, by the rules above.

        >>> api_names(["files.delete", "files_delete"], 64)["files_delete"]
        'files_delete'
        >>> api_names(["files.delete", "files_delete"], 64, kept={"files_delete": "files.delete"})["files_delete"]
        'files.delete'
    """
    originals = sorted(set(names))
    result = {api: name for api, name in (kept or {}).items() if name in originals}
    assigned = set(result.values())
    originals = [name for name in originals if name not in assigned]
    taken = set(result)
    for name in originals:
        if len(name) <= limit and _VALID.fullmatch(name) and name not in taken:
            result[name] = name
            taken.add(name)
    cleaned: dict[str, list[str]] = {}
    for name in originals:
        if result.get(name) != name:
            cleaned.setdefault(_INVALID.sub("_", name) or "_", []).append(name)
    hashed: list[str] = []
    for clean, owners in cleaned.items():
        if len(owners) == 1 and len(clean) <= limit and clean not in taken:
            result[clean] = owners[0]
            taken.add(clean)
        else:
            hashed.extend(owners)
    for name in sorted(hashed):
        clean = _INVALID.sub("_", name) or "_"
        length = 8
        while True:  # a clash of 8 hex digits as well: longer ones (never in practice, but never wrong)
            suffix = "_" + _digest(name, length)
            candidate = clean[: limit - len(suffix)] + suffix
            if candidate not in taken:
                break
            length += 4
        result[candidate] = name
        taken.add(candidate)
    return result


# -- schemas ---------------------------------------------------------------------------------

#: What OpenAI's strict mode (Structured Outputs) accepts; everything else is removed.
_STRICT_KEYWORDS = frozenset({
    "type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf", "$ref",
    "$defs", "definitions", "description", "title", "pattern", "format", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems", "maxItems",
})


class NotStrict(ValueError):
    """The schema cannot be said in strict mode (an open-ended object, say);
    the tool is then listed non-strict."""


def plain_schema(schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """The input schema as sent without strict mode: an object schema that
    always has `properties` (OpenAI refuses an object without them)."""
    result = copy.deepcopy(dict(schema)) if isinstance(schema, Mapping) else {}
    result.pop("$schema", None)
    result.setdefault("type", "object")
    if result.get("type") == "object" and not isinstance(result.get("properties"), Mapping):
        result["properties"] = {}
    return result


def strict_schema(schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """The input schema in OpenAI's strict subset.

    Every object lists all its properties in `required` (the optional ones
    become nullable: ``"type": ["string", "null"]``, or an `anyOf` with
    ``{"type": "null"}``) and gets ``additionalProperties: false``; `oneOf`
    becomes `anyOf`; keywords strict mode does not take (`default`,
    `minLength`, `allOf`, `not`, `if`, ...) are removed.

    Raises:
        NotStrict: the schema says what strict mode cannot: an object that
            admits properties it does not name (`additionalProperties`
            other than false, `patternProperties`), `allOf` of several
            schemas, or `oneOf` beside `anyOf` in one schema (both must
            hold; strict mode has `anyOf` alone, and no `allOf` to join
            them).
    """
    result: dict[str, Any] = _strict(plain_schema(schema), top=True)
    return result


def _strict(node: Any, top: bool = False) -> Any:
    if isinstance(node, list):
        return [_strict(item) for item in node]
    if not isinstance(node, Mapping):
        return node
    every = node.get("allOf")
    if every is not None:
        # One schema in `allOf` (how generators put a description beside a
        # `$ref`) is that schema; more cannot be said in strict mode. It is
        # merged first: what it admits is checked as the node's own below.
        if not (isinstance(every, list) and len(every) == 1 and isinstance(every[0], Mapping)):
            raise NotStrict("allOf with more than one schema")
        node = _merged(every[0], node)
    if "patternProperties" in node or node.get("additionalProperties") not in (None, False):
        raise NotStrict("an object with additionalProperties or patternProperties")
    if "required" in node and not _names(node["required"]):
        # Which properties are optional is unknown: none can be made nullable rightly.
        raise NotStrict("required is not a list of property names")
    types = node.get("type")
    is_object = types == "object" or (isinstance(types, list) and "object" in types) or "properties" in node
    if is_object and not top and not isinstance(node.get("properties"), Mapping) \
            and node.get("additionalProperties") is not False:
        # Any keys at all: strict mode would allow none.
        raise NotStrict("an object that names no properties (it takes any)")
    if "oneOf" in node and "anyOf" in node:
        # Both hold at once, and each becomes `anyOf`: one would replace the
        # other, silently, and the model could send what the tool refuses.
        raise NotStrict("oneOf beside anyOf in one schema")
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "oneOf":
            key = "anyOf"
        if key not in _STRICT_KEYWORDS:
            continue
        if key in ("$defs", "definitions"):
            out[key] = {name: _strict(sub) for name, sub in value.items()} if isinstance(value, Mapping) else value
        elif key in ("items", "anyOf"):
            out[key] = _strict(value)
        elif key == "properties":
            continue  # below, with `required`
        else:
            out[key] = copy.deepcopy(value)
    if is_object:
        properties: Mapping[str, Any] = node["properties"] if isinstance(node.get("properties"), Mapping) else {}
        required = set(node.get("required") or [])
        out["properties"] = {name: _strict(sub) if name in required else _nullable(_strict(sub))
                             for name, sub in properties.items()}
        out["required"] = list(properties)
        out["additionalProperties"] = False
    return out


def _names(value: Any) -> bool:
    """Whether `value` is what `required` must be: a list of property names."""
    return isinstance(value, list) and all(isinstance(name, str) for name in value)


def _merged(inner: Mapping[str, Any], outer: Mapping[str, Any]) -> dict[str, Any]:
    """`outer` (without its `allOf`) over the one schema of its `allOf`:
    both hold, so their `properties` and `required` are joined, not the
    outer's put in place of the inner's (`plain_schema` gives every
    object a `properties`, empty, which would hide the inner ones). One
    property in both, or an `anyOf` (`oneOf`) in both, cannot be said as
    one schema in strict mode."""
    for key in ("anyOf", "oneOf"):
        if key in inner and key in outer:
            # Both hold, and one would replace the other (as `oneOf` beside
            # `anyOf` would, checked once merged): nothing joins them in strict mode.
            raise NotStrict(f"{key} both beside and inside allOf")
    merged = {**inner, **{key: value for key, value in outer.items() if key != "allOf"}}
    own, added = outer.get("properties"), inner.get("properties")
    if isinstance(own, Mapping) and isinstance(added, Mapping):
        if own.keys() & added.keys():
            raise NotStrict("a property named both beside and inside allOf")
        merged["properties"] = {**added, **own}
    if "required" in outer and "required" in inner:
        if not (_names(outer["required"]) and _names(inner["required"])):
            raise NotStrict("required is not a list of property names")
        merged["required"] = list(dict.fromkeys([*inner["required"], *outer["required"]]))
    return merged


def _nullable(schema: Any) -> Any:
    """`schema` that also admits null."""
    if not isinstance(schema, dict):
        return schema
    kind = schema.get("type")
    if isinstance(kind, str) and "enum" not in schema and "const" not in schema:
        return {**schema, "type": [kind, "null"]}
    if isinstance(kind, list) and "enum" not in schema and "const" not in schema:
        return schema if "null" in kind else {**schema, "type": [*kind, "null"]}
    if isinstance(schema.get("anyOf"), list) and len(schema) == 1:
        options = schema["anyOf"]
        return schema if {"type": "null"} in options else {"anyOf": [*options, {"type": "null"}]}
    return {"anyOf": [schema, {"type": "null"}]}


def drop_nulls(arguments: Any, schema: Mapping[str, Any] | None) -> Any:
    """The arguments without the nulls strict mode made the model send for
    optional properties it did not want to give (the original schema does
    not take null there, and leaving a property out is what it meant).

    Only a property the schema declares, optional and not taking null,
    loses its null: a name the schema does not declare (an open object), a
    required one, and anything under a node whose shape is not plain
    (`anyOf`, a `$ref` that does not resolve within the schema) are left as
    the model sent them. Objects are followed through `properties`, arrays
    through `items`, and local `$ref`s (``#/$defs/...``) resolved.

        >>> schema = {"properties": {"a": {"type": "string"}, "b": {"type": ["string", "null"]}}}
        >>> drop_nulls({"a": None, "b": None, "c": None}, schema)
        {'b': None, 'c': None}
    """
    if not isinstance(schema, Mapping):
        return arguments
    return _drop(arguments, schema, schema, 0)


#: How deep `drop_nulls` follows a schema (a `$ref` may refer to itself).
_MAX_DEPTH = 32


def _drop(value: Any, spec: Any, root: Mapping[str, Any], depth: int) -> Any:
    spec = _resolved(spec, root)
    if not isinstance(spec, Mapping) or depth > _MAX_DEPTH:
        return value
    if isinstance(value, list):
        items = spec.get("items")
        return [_drop(item, items, root, depth + 1) for item in value] if isinstance(items, Mapping) else value
    properties = spec.get("properties")
    if not isinstance(value, dict) or not isinstance(properties, Mapping):
        return value
    required = spec.get("required", [])
    if not _names(required):
        return value  # which properties are optional is unknown: as sent
    required = set(required)
    out: dict[str, Any] = {}
    for name, item in value.items():
        declared = properties.get(name)
        if declared is None:
            out[name] = item  # not declared: an open object's own
        elif item is None:
            if name in required or _takes_null(_resolved(declared, root)):
                out[name] = item
        else:
            out[name] = _drop(item, declared, root, depth + 1)
    return out


def _resolved(spec: Any, root: Mapping[str, Any]) -> Any:
    """`spec`, or what its local `$ref` (``#/$defs/X``, ``#/definitions/X``)
    names in `root`; None when it names nothing there."""
    for _ in range(_MAX_DEPTH):
        if not isinstance(spec, Mapping) or not isinstance(spec.get("$ref"), str):
            return spec
        section, _, name = spec["$ref"].removeprefix("#/").partition("/")
        defined = root.get(section) if section in ("$defs", "definitions") and "/" not in name else None
        spec = defined.get(name) if isinstance(defined, Mapping) else None
    return None


def _takes_null(spec: Any) -> bool:
    if not isinstance(spec, Mapping):
        return False
    kind = spec.get("type")
    return kind == "null" or (isinstance(kind, list) and "null" in kind) or any(
        _takes_null(option) for option in spec.get("anyOf") or spec.get("oneOf") or [])
