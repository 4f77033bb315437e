"""Every part of the public API has a docstring, so the API reference (made
from the docstrings by mkdocstrings) leaves nothing unexplained.

What counts, for `mcp_sync` and `mcp_sync.auth`:

- every name in the module's `__all__`: a class, function or module needs a
  docstring of its own (a class does not inherit its base's); a constant
  needs an attribute docstring (a string literal right after its
  assignment, as mkdocstrings reads it) or a `#:` comment above it;
- for an exported module (`handlers`, `jsonrpc`): each of its own public
  functions, classes and constants (those in its `__all__` when it has one);
- for every exported class: each public method, property, class attribute
  and field, defined in the class or in one of its bases from `mcp_sync`
  (what comes from builtins, `Exception`, `dict`, `str`, `Enum`, `Protocol`
  or attrs is not ours to document), and each public attribute its
  `__init__` sets on `self`. A method or property needs its own docstring.
  A field or attribute is documented by an attribute docstring in the class
  body, or by an entry in the class docstring's attribute list: a line
  starting with the name (in backticks or not), optionally a `(type)`, then
  `:` (Google style `Attributes:` entries fit), such as::

      Attributes:
          text: The text.
          mime_type (str | None): The media type the server gave.

Something inherited from a base in `mcp_sync` is counted once, under the
class that defines it.

Run `python -c 'from tests.test_docstring_coverage import missing;
print(*missing(), sep="\\n")'` from the repository root for what still lacks
one, and `coverage()` for the counts per module.
"""

from __future__ import annotations

import ast
import enum
import functools
import importlib
import inspect
import re
import sys
import textwrap
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs

MODULES = ("mcp_sync", "mcp_sync.auth")
PACKAGE = Path(__file__).resolve().parent.parent / "mcp_sync"


def _own_doc(obj: Any) -> str | None:
    """The docstring `obj` has itself, not one inherited from a base class."""
    if isinstance(obj, type):
        doc = obj.__dict__.get("__doc__")
    elif isinstance(obj, (staticmethod, classmethod)):
        doc = obj.__func__.__doc__
    elif isinstance(obj, property):
        doc = obj.__doc__ or (obj.fget.__doc__ if obj.fget is not None else None)
    else:
        doc = getattr(obj, "__doc__", None)
    return doc if isinstance(doc, str) and doc.strip() else None


@functools.lru_cache(maxsize=None)
def _tree(path: str) -> ast.Module | None:
    try:
        return ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return None


@functools.lru_cache(maxsize=None)
def _lines(path: str) -> list[str]:
    return Path(path).read_text(encoding="utf-8").splitlines()


def _source_file(obj: Any) -> str | None:
    try:
        return inspect.getsourcefile(obj)
    except TypeError:
        return None


def _targets(statement: ast.stmt) -> list[str]:
    """The plain names (or `self.NAME` attributes) an assignment binds."""
    targets: list[ast.expr]
    if isinstance(statement, ast.AnnAssign):
        targets = [statement.target]
    elif isinstance(statement, ast.Assign):
        targets = list(statement.targets)
    else:
        return []
    names = []
    for target in targets:
        if isinstance(target, ast.Name):
            names.append(target.id)
        elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
            names.append(target.attr)
    return names


def _documented_in_body(body: list[ast.stmt], name: str, lines: list[str]) -> bool | None:
    """Whether `name`'s assignment in `body` has an attribute docstring or a
    `#:` comment; None when `body` does not assign it."""
    for index, statement in enumerate(body):
        if name not in _targets(statement):
            continue
        following = body[index + 1] if index + 1 < len(body) else None
        if (
            isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
            and following.value.value.strip()
        ):
            return True
        above = lines[statement.lineno - 2].strip() if statement.lineno >= 2 else ""
        return above.startswith("#:")
    return None


def _class_node(cls: type) -> tuple[ast.ClassDef, list[str]] | None:
    path = _source_file(cls)
    tree = _tree(path) if path else None
    if tree is None or path is None:
        return None
    lines = _lines(path)
    parts = cls.__qualname__.split(".")
    body: list[ast.stmt] = tree.body
    node = None
    for part in parts:
        node = next((n for n in body if isinstance(n, ast.ClassDef) and n.name == part), None)
        if node is None:
            return None
        body = node.body
    return (node, lines) if node is not None else None


def _listed_in_docstring(doc: str | None, name: str) -> bool:
    """Whether a class docstring has an attribute-list entry for `name`."""
    if not doc:
        return False
    entry = re.compile(rf"^\s*(?:[-*]\s+)?`?{re.escape(name)}`?(?:\s*\([^)\n]*\))?\s*:(?:\s|$)", re.M)
    return entry.search(inspect.cleandoc(doc)) is not None


def _attribute_documented(owner: type, shown_as: type, name: str) -> bool:
    found = _class_node(owner)
    if found is not None:
        node, lines = found
        in_body = _documented_in_body(node.body, name, lines)
        if in_body:
            return True
        init = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
        if init is not None and _documented_in_body(init.body, name, lines):
            return True
    return _listed_in_docstring(_own_doc(owner), name) or _listed_in_docstring(_own_doc(shown_as), name)


def _init_attributes(cls: type) -> list[str]:
    """Public attributes `cls.__init__` sets on `self` (exceptions carry data so)."""
    found = _class_node(cls)
    if found is None:
        return []
    node, _ = found
    init = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    if init is None:
        return []
    names = []
    for statement in ast.walk(init):
        if isinstance(statement, (ast.Assign, ast.AnnAssign)):
            for target in (statement.targets if isinstance(statement, ast.Assign) else [statement.target]):
                if (
                    isinstance(target, ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "self"
                    and not target.attr.startswith("_")
                ):
                    names.append(target.attr)
    return list(dict.fromkeys(names))


def _ours(cls: type) -> bool:
    return cls.__module__ == "mcp_sync" or cls.__module__.startswith("mcp_sync.")


def _constant_documented(module: types.ModuleType, name: str) -> bool:
    """Whether the top-level assignment of `name` (in `module`, or in the
    mcp_sync module it was imported from) has an attribute docstring."""
    candidates = [getattr(module, "__file__", None)]
    candidates += [str(p) for p in sorted(PACKAGE.rglob("*.py"))]
    for path in candidates:
        tree = _tree(path) if path else None
        if tree is None or path is None:
            continue
        lines = _lines(path)
        documented = _documented_in_body(tree.body, name, lines)
        if documented is not None:
            return documented
    return False


def _module_members(module: types.ModuleType) -> list[str]:
    """The public names an exported module defines itself."""
    exported = getattr(module, "__all__", None)
    if exported is not None:
        return list(exported)
    names = []
    for name, value in vars(module).items():
        if name.startswith("_") or isinstance(value, types.ModuleType):
            continue
        if inspect.isclass(value) or inspect.isfunction(value):
            if value.__module__ == module.__name__:
                names.append(name)
        elif not callable(value) and name in _assigned_at_top(module):
            names.append(name)
    return names


def _assigned_at_top(module: types.ModuleType) -> set[str]:
    tree = _tree(module.__file__) if module.__file__ else None
    return {name for statement in (tree.body if tree else []) for name in _targets(statement)}


def units() -> Iterator[tuple[str, str, bool]]:
    """Every part of the public API: (module counted under, name, documented)."""
    seen: set[Any] = set()
    classes: list[tuple[str, str, type]] = []

    def name_unit(module_name: str, owner: types.ModuleType, prefix: str, name: str) -> Iterator[tuple[str, str, bool]]:
        value = getattr(owner, name)
        key = ("name", id(value)) if not isinstance(value, (str, int, float, tuple, type(None))) else ("name", prefix, name)
        if key in seen:
            return
        seen.add(key)
        shown = f"{prefix}.{name}"
        if isinstance(value, types.ModuleType):
            yield module_name, shown, _own_doc(value) is not None
            for member in _module_members(value):
                yield from name_unit(module_name, value, shown, member)
        elif inspect.isclass(value):
            yield module_name, shown, _own_doc(value) is not None
            classes.append((module_name, shown, value))
        elif callable(value):
            yield module_name, shown, _own_doc(value) is not None
        else:
            yield module_name, shown, _constant_documented(owner, name)

    for module_name in MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            yield from name_unit(module_name, module, module_name, name)

    public = {cls: shown for _, shown, cls in classes}
    for module_name, shown, cls in classes:
        yield from _class_units(module_name, shown, cls, seen, public)


def _class_units(
    module_name: str, shown: str, cls: type, seen: set[Any], public: dict[type, str] | None = None
) -> Iterator[tuple[str, str, bool]]:
    fields = {field.name for field in attrs.fields(cls)} if attrs.has(cls) else set()
    names = [n for n in dir(cls) if not n.startswith("_")]
    names += [n for n in fields if not n.startswith("_") and n not in names]
    for base in cls.__mro__:
        if _ours(base):
            names += [n for n in _init_attributes(base) if n not in names]
    for name in names:
        owner = next((base for base in cls.__mro__ if name in base.__dict__), None)
        if owner is None:
            # A slot-less attrs field or an attribute set in __init__: it is
            # the first of our classes in the MRO that names it that owns it.
            owner = next(
                (b for b in cls.__mro__ if _ours(b) and (name in _init_attributes(b) or (attrs.has(b) and name in {f.name for f in attrs.fields(b)}))),
                cls,
            )
        if not _ours(owner):
            continue  # from builtins, Exception, dict, str, Enum, Protocol, attrs
        key = ("member", owner, name)
        if key in seen:
            continue
        seen.add(key)
        if owner is cls or owner in (public or {}):
            label = f"{(public or {}).get(owner, shown)}.{name}"
        else:
            label = f"{shown}.{name} (from {owner.__module__}.{owner.__qualname__})"
        value = owner.__dict__.get(name)
        if name in fields or value is None or isinstance(value, types.MemberDescriptorType):
            documented = _attribute_documented(owner, cls, name)
        elif isinstance(value, (staticmethod, classmethod, property, functools.cached_property)) or inspect.isfunction(value):
            documented = _own_doc(value) is not None
        elif inspect.isclass(value):
            documented = _own_doc(value) is not None
        elif isinstance(owner, enum.EnumMeta) and isinstance(value, owner):
            documented = _attribute_documented(owner, cls, name)
        elif callable(value) and not isinstance(value, type):
            documented = _own_doc(value) is not None
        else:
            documented = _attribute_documented(owner, cls, name)
        yield module_name, label, documented


def coverage(found: list[tuple[str, str, bool]] | None = None) -> dict[str, tuple[int, int]]:
    """Per module: (documented, total)."""
    counts: dict[str, list[int]] = {name: [0, 0] for name in MODULES}
    for module_name, _, documented in units() if found is None else found:
        counts[module_name][0] += documented
        counts[module_name][1] += 1
    return {name: (done, total) for name, (done, total) in counts.items()}


def missing() -> list[str]:
    """What still lacks a docstring, one dotted name per entry."""
    return [name for _, name, documented in units() if not documented]


def test_every_public_name_method_and_attribute_has_a_docstring() -> None:
    found = list(units())
    left = [name for _, name, documented in found if not documented]
    summary = ", ".join(f"{module} {done}/{total}" for module, (done, total) in coverage(found).items())
    listing = textwrap.indent("\n".join(left), "  ")
    assert not left, f"{len(left)} parts of the public API lack a docstring ({summary}):\n{listing}"


def test_the_rule_sees_an_undocumented_field_and_method() -> None:
    # The rule itself: a field listed in the class docstring counts, one left
    # out does not, and a method without a docstring is caught.
    @attrs.define
    class Sample:
        """A sample.

        Attributes:
            listed (int): Listed in the attribute list.
        """

        listed: int = 0
        unlisted: int = 0

        def method(self) -> None:
            pass

    Sample.__module__ = "mcp_sync.sample"
    found = {name: documented for _, name, documented in _class_units("mcp_sync", "Sample", Sample, set())}
    assert found == {"Sample.listed": True, "Sample.unlisted": False, "Sample.method": False}


# -- Args, Returns and Raises ------------------------------------------------------------
#
# The API reference lists a callable's parameters from its docstring's
# Google-style `Args:` section (types come from the signature), and its
# result from `Returns:`. Two rules keep those sections true:
#
# - every `Args:` section anywhere in the public API names exactly the
#   parameters of its signature (one renamed or added in the code and not in
#   the docstring fails here, before it silently drops out of the page);
# - the callables below, the most used first, have an `Args:` section as
#   soon as they take a parameter, and a `Returns:` section when they return
#   something, so that none of them goes back to prose only.
#
# Not counted as parameters: `self`/`cls`; `**options: Unpack[RequestOptions]`,
# which the docs' Griffe extension (docs/_ext/request_options.py) spells out
# from `RequestOptions`' own docstring; and, for an attrs class, the fields
# its `Attributes:` section lists (the same names, typed by their annotations).

#: Callables that must keep their Args (and Returns) sections.
SECTIONED = (
    # config files and groups
    "mcp_sync.load_config", "mcp_sync.connect_configured", "mcp_sync.find_config",
    "mcp_sync.config.config_locations", "mcp_sync.ServerConfig",
    "mcp_sync.ClientGroup", "mcp_sync.ClientGroup.client", "mcp_sync.ClientGroup.qualify",
    "mcp_sync.ClientGroup.resolve", "mcp_sync.ClientGroup.list_tools", "mcp_sync.ClientGroup.list_prompts",
    "mcp_sync.ClientGroup.list_resources", "mcp_sync.ClientGroup.list_resource_templates",
    "mcp_sync.ClientGroup.call_tool", "mcp_sync.ClientGroup.get_prompt", "mcp_sync.ClientGroup.read_resource",
    # options
    "mcp_sync.ClientOptions", "mcp_sync.Timeouts", "mcp_sync.Limits", "mcp_sync.Keepalive",
    "mcp_sync.Reconnect", "mcp_sync.Reconnect.delays", "mcp_sync.Reconnect.coerce",
    # targets and transports
    "mcp_sync.Stdio", "mcp_sync.HTTP", "mcp_sync.SSE.from_http", "mcp_sync.HTTP.fallback", "mcp_sync.SSE.fallback",
    "mcp_sync.Memory", "mcp_sync.Custom", "mcp_sync.Target.fallback",
    "mcp_sync.Transport.start", "mcp_sync.Transport.send", "mcp_sync.Transport.exchange",
    "mcp_sync.Transport.cancel", "mcp_sync.Transport.negotiated",
    "mcp_sync.transports.MessageSink.deliver", "mcp_sync.transports.MessageSink.transport_failed",
    "mcp_sync.transports.MessageSink.session_lost", "mcp_sync.transports.MessageSink.request_failed",
    # tasks, subscriptions, notifications, caching
    "mcp_sync.Task.refresh", "mcp_sync.Task.cancel", "mcp_sync.Task.wait",
    "mcp_sync.Subscription", "mcp_sync.Subscription.next", "mcp_sync.Subscription.reopen_on",
    "mcp_sync.Subscription.fail", "mcp_sync.Subscription.orphan",
    "mcp_sync.notifications.NotificationStream", "mcp_sync.notifications.NotificationStream.next", "mcp_sync.Notification.from_wire",
    "mcp_sync.Drops.add",
    "mcp_sync.ResultCache", "mcp_sync.ResultCache.fetch", "mcp_sync.ResultCache.put",
    "mcp_sync.ResultCache.invalidate", "mcp_sync.ResultCache.clear_server",
    # skills, types, errors
    "mcp_sync.skills.Skills.list", "mcp_sync.skills.Skills.get", "mcp_sync.skills.Skills.read", "mcp_sync.skills.Skills.read_directory",
    "mcp_sync.skills.Skill.file",
    "mcp_sync.Tool.from_wire", "mcp_sync.CallToolResult.from_wire", "mcp_sync.Progress.from_wire",
    "mcp_sync.Resource.from_wire",
    "mcp_sync.InputRequired.retry_with",
    # authorization
    "mcp_sync.auth.as_token_provider", "mcp_sync.auth.BearerToken", "mcp_sync.auth.CallableToken",
    "mcp_sync.auth.CallableToken.refresh", "mcp_sync.auth.OAuth", "mcp_sync.auth.OAuth.start",
    "mcp_sync.auth.OAuth.finish", "mcp_sync.auth.OAuth.handle_challenge", "mcp_sync.auth.TokenFlow",
    "mcp_sync.auth.ClientCredentials", "mcp_sync.auth.JwtBearer",
    "mcp_sync.auth.TokenStorage.load", "mcp_sync.auth.TokenStorage.save", "mcp_sync.auth.TokenStorage.delete",
    "mcp_sync.auth.MemoryStorage.load", "mcp_sync.auth.MemoryStorage.save", "mcp_sync.auth.MemoryStorage.delete",
    "mcp_sync.auth.MemoryStorage.pop", "mcp_sync.auth.FileStorage", "mcp_sync.auth.FileStorage.load",
    "mcp_sync.auth.FileStorage.save", "mcp_sync.auth.FileStorage.delete", "mcp_sync.auth.FileStorage.pop",
)

_SECTION = re.compile(r"^(?P<indent>[ \t]*)(?P<title>[A-Z][A-Za-z ]*):[ \t]*$")
_ENTRY = re.compile(r"^(?P<stars>\*{0,2})(?P<name>\w+)(?:\s*\([^)\n]*\))?\s*:(?:\s|$)")


def sections(doc: str | None) -> dict[str, list[str]]:
    """A Google-style docstring's sections: title -> the names its entries
    start with (`Args:` entries are `name: text` or `name (type): text`,
    continued on lines indented further)."""
    found: dict[str, list[str]] = {}
    lines = inspect.cleandoc(doc or "").splitlines()
    for index, line in enumerate(lines):
        heading = _SECTION.match(line)
        if heading is None or heading["title"] not in ("Args", "Arguments", "Returns", "Raises", "Yields"):
            continue
        base = len(heading["indent"])
        names = found.setdefault(heading["title"], [])
        entry_indent = None
        for body in lines[index + 1:]:
            if not body.strip():
                continue
            indent = len(body) - len(body.lstrip())
            if indent <= base:
                break
            entry_indent = indent if entry_indent is None else entry_indent
            if indent == entry_indent:
                entry = _ENTRY.match(body.strip())
                names.append(entry["name"] if entry else body.strip())
    return found


def _resolve(dotted: str) -> Any:
    """The object a dotted public name stands for (module, then attributes)."""
    module_name, _, rest = dotted.partition(".")
    parts = rest.split(".")
    obj: Any = importlib.import_module(module_name)
    for index, part in enumerate(parts):
        if isinstance(obj, types.ModuleType) and not hasattr(obj, part):
            obj = importlib.import_module(f"{obj.__name__}.{part}")
            continue
        owner = obj
        obj = inspect.getattr_static(owner, part) if inspect.isclass(owner) else getattr(owner, part)
        if isinstance(obj, (staticmethod, classmethod)):
            obj = getattr(owner, part)  # bound: its signature has no cls
    return obj


def _expected_parameters(obj: Any) -> list[str]:
    """The parameter names an `Args:` section of `obj` must name."""
    target = obj
    if inspect.isclass(obj):
        if "__init__" not in {k for c in obj.__mro__ if c is not object for k in c.__dict__}:
            return []
        target = obj.__init__
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):
        return []
    names = []
    for parameter in signature.parameters.values():
        if parameter.name in ("self", "cls"):
            continue
        if parameter.kind is inspect.Parameter.VAR_KEYWORD and "Unpack[RequestOptions]" in str(parameter.annotation):
            continue  # spelt out from RequestOptions by the docs' Griffe extension
        names.append(parameter.name)
    if inspect.isclass(obj) and attrs.has(obj):
        # A field the class docstring lists (under Attributes or Args) is documented.
        names = [name for name in names if not _listed_in_docstring(_own_doc(obj), name)]
    return names


def _returns_something(obj: Any) -> bool:
    if inspect.isclass(obj):
        return False
    try:
        annotation = inspect.signature(obj).return_annotation
    except (TypeError, ValueError):
        return False
    return annotation not in (None, "None", inspect.Signature.empty)


def _public_callables() -> Iterator[tuple[str, Any]]:
    """Every public function, class and method of the API (methods once,
    under the class of ours that defines them)."""
    seen: set[int] = set()
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            value = getattr(module, name)
            if id(value) in seen or not (inspect.isclass(value) or inspect.isfunction(value)):
                continue
            seen.add(id(value))
            yield f"{module_name}.{name}", value
            if not inspect.isclass(value):
                continue
            for cls in value.__mro__:
                if not _ours(cls):
                    continue
                for member_name, member in vars(cls).items():
                    if member_name.startswith("_") or isinstance(member, property):
                        continue
                    function = member.__func__ if isinstance(member, (staticmethod, classmethod)) else member
                    if not inspect.isfunction(function) or id(function) in seen:
                        continue
                    seen.add(id(function))
                    bound = getattr(value, member_name) if isinstance(member, (staticmethod, classmethod)) else member
                    yield f"{module_name}.{name}.{member_name}", bound


def args_mismatch(obj: Any) -> tuple[list[str], list[str]]:
    """(parameters its `Args:` section lacks, names it lists that are no
    parameter); both empty when it has no such section."""
    listed = sections(_own_doc(obj)).get("Args")
    if listed is None:
        return [], []
    return ([p for p in _expected_parameters(obj) if p not in listed],
            [p for p in listed if p not in _signature_names(obj)])


def test_every_args_section_names_exactly_the_parameters() -> None:
    wrong = []
    for name, obj in _public_callables():
        missing_names, unknown = args_mismatch(obj)
        if missing_names or unknown:
            wrong.append(f"{name}: Args lacks {missing_names}, names unknown {unknown}")
    assert not wrong, "Args sections out of step with their signatures:\n" + "\n".join(wrong)


def _signature_names(obj: Any) -> list[str]:
    """The names an `Args:` section may list: not `**options:
    Unpack[RequestOptions]`, which the reference replaces by the options."""
    try:
        signature = inspect.signature(obj.__init__ if inspect.isclass(obj) else obj)
    except (TypeError, ValueError):
        return []
    return [p.name for p in signature.parameters.values() if p.name not in ("self", "cls")
            and not (p.kind is inspect.Parameter.VAR_KEYWORD and "Unpack[RequestOptions]" in str(p.annotation))]


def test_the_most_used_callables_keep_args_and_returns_sections() -> None:
    wrong = []
    for dotted in SECTIONED:
        obj = _resolve(dotted)
        found = sections(_own_doc(obj))
        expected = _expected_parameters(obj)
        if expected and "Args" not in found:
            wrong.append(f"{dotted}: no Args section (parameters {expected})")
        elif expected:
            left = [p for p in expected if p not in found["Args"]]
            if left:
                wrong.append(f"{dotted}: Args lacks {left}")
        if _returns_something(obj) and "Returns" not in found:
            wrong.append(f"{dotted}: no Returns section")
    assert not wrong, "\n".join(wrong)


def test_the_sections_rule_reads_google_style() -> None:
    def sample(path: str, *, mode: int = 0, **extra: Any) -> int:
        """Do it.

        Args:
            path: Where.
            mode (int): How,
                over two lines.
            **extra: More.

        Returns:
            A number.
        """
        return 0

    found = sections(sample.__doc__)
    assert found == {"Args": ["path", "mode", "extra"], "Returns": ["A number."]}
    assert _expected_parameters(sample) == ["path", "mode", "extra"]
    assert _returns_something(sample)
    assert args_mismatch(sample) == ([], [])

    def renamed(source: str, mode: int = 0) -> None:
        """Do it.

        Args:
            path: Where.
            mode: How.
        """

    assert args_mismatch(renamed) == (["source"], ["path"])
    assert not _returns_something(renamed)


if __name__ == "__main__":  # pragma: no cover
    print(*missing(), sep="\n")
    print(coverage(), file=sys.stderr)
