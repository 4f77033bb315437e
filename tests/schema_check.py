"""Validate client->server messages against the spec's JSON schema.

The revision is read from the message itself where it says it (the
stateless `_meta` version, `initialize`'s `protocolVersion`) and otherwise
taken from the version the transport was told it negotiated (`negotiated`),
or else from the last such message on the same transport. The negotiated
version matters for the initialize era: a client asks for the newest
revision it speaks and the server may settle on an older one, whose schema
then applies to everything sent after `initialize`.
"""

import json
import threading
import weakref
from pathlib import Path

import jsonschema
import jsonschema.validators

_META_VERSION = "io.modelcontextprotocol/protocolVersion"
#: Revisions whose schema must be present: a missing one is a failure, not a skip.
REQUIRED = ("2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")


class SchemaChecker:
    def __init__(self, folder: Path):
        self._folder = folder
        self._schemas = {}
        self._validators = {}
        self._by_method = {}
        self._lock = threading.Lock()
        self._transport_version = weakref.WeakKeyDictionary()
        self.checked = 0

    def _load(self, version):
        with self._lock:
            if version not in self._schemas:
                schema = json.loads((self._folder / version / "schema.json").read_text())
                defs = schema["$defs"] if "$defs" in schema else schema["definitions"]
                methods = {}
                for name, definition in defs.items():
                    method = definition.get("properties", {}).get("method", {}).get("const")
                    if method and (name.endswith("Request") or name.endswith("Notification")):
                        methods.setdefault(method, []).append(name)
                self._schemas[version] = schema
                self._by_method[version] = methods
            return self._schemas[version], self._by_method[version]

    def _validator(self, version, name):
        key = (version, name)
        with self._lock:
            found = self._validators.get(key)
        if found is None:
            schema, _ = self._load(version)
            key_name = "$defs" if "$defs" in schema else "definitions"
            wrapper = {"$schema": schema["$schema"], key_name: schema[key_name], "$ref": f"#/{key_name}/{name}"}
            found = jsonschema.validators.validator_for(wrapper)(wrapper)
            with self._lock:
                self._validators[key] = found
        return found

    def negotiated(self, transport, version):
        """`transport` settled on `version`: later messages follow its schema."""
        self._transport_version[transport] = version

    def version_of(self, transport, message):
        params = message.get("params") or {}
        meta = params.get("_meta") or {}
        version = meta.get(_META_VERSION)
        if version is None and message.get("method") == "initialize":
            version = params.get("protocolVersion")
        if version is not None:
            if transport is not None:
                self._transport_version[transport] = version
            return version
        return self._transport_version.get(transport) if transport is not None else None

    def check(self, transport, message, version=None):
        """None when valid, else a description of the problem. `version`
        overrides the revision found from the message and the transport."""
        version = version or self.version_of(transport, message)
        if version is None:
            return f"no protocol version known for {message}"
        if not (self._folder / version / "schema.json").exists():
            return None if version not in REQUIRED else f"missing schema {version}"
        schema, methods = self._load(version)
        defs = schema["$defs"] if "$defs" in schema else schema["definitions"]
        method = message.get("method")
        if method is None:
            names = ["JSONRPCResultResponse" if "JSONRPCResultResponse" in defs else "JSONRPCResponse"]
            if "error" in message:
                names = [n for n in ("JSONRPCErrorResponse", "JSONRPCError") if n in defs]
        else:
            names = methods.get(method)
            if not names:
                # A method the revision does not define (an extension): only the envelope is checked.
                names = ["JSONRPCRequest" if "id" in message else "JSONRPCNotification"]
        self.checked += 1
        problems = []
        for name in names:
            errors = list(self._validator(version, name).iter_errors(message))
            if not errors:
                return None
            problems.append(f"{name}: {errors[0].message} at {list(errors[0].absolute_path)}")
        return f"[{version}] {json.dumps(message)[:300]} -> {'; '.join(problems)}"
