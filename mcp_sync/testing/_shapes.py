"""Result shapes of the older initialize-era revisions (2025-03-26, 2024-11-05).

A server of those revisions never sends what came later, so neither does the
test server: `shape(version, method, result)` is the result without the
fields its revision lacks. Plain data in, a copy out; the newer revisions'
results pass untouched.

- Before 2025-06-18: no `structuredContent` or `outputSchema`, no `title`
  (tools, prompts, prompt arguments, resources, templates, `serverInfo`),
  no `resource_link` content.
- Before 2025-03-26 (so 2024-11-05): no audio content, no tool
  `annotations`, no `completions` server capability.
- Fields of 2025-11-25 (`icons`, a tool's `execution`) go with the rest.
"""

from __future__ import annotations

from typing import Any

from ._protocol import JSONDict

_STRUCTURED_SINCE = "2025-06-18"
_AUDIO_SINCE = "2025-03-26"
_NEWER_FIELDS = ("title", "icons")


def shape(version: str | None, method: str, result: JSONDict) -> JSONDict:
    """`result` as a server of `version` would have sent it."""
    # Revisions are ISO dates, so string order is release order.
    if version is None or version >= _STRUCTURED_SINCE:
        return result
    audio = version >= _AUDIO_SINCE
    out = dict(result)
    if method == "initialize":
        out["serverInfo"] = _without(out.get("serverInfo"), _NEWER_FIELDS + ("websiteUrl", "description"))
        if not audio and isinstance(out.get("capabilities"), dict):
            out["capabilities"] = _without(out["capabilities"], ("completions",))
    elif method == "tools/list":
        drop = _NEWER_FIELDS + ("outputSchema", "execution") + (() if audio else ("annotations",))
        out["tools"] = [_without(tool, drop) for tool in out.get("tools", [])]
    elif method == "prompts/list":
        out["prompts"] = [_prompt(prompt) for prompt in out.get("prompts", [])]
    elif method in ("resources/list", "resources/templates/list"):
        key = "resources" if method == "resources/list" else "resourceTemplates"
        out[key] = [_without(item, _NEWER_FIELDS) for item in out.get(key, [])]
    elif method == "tools/call":
        out.pop("structuredContent", None)
        out["content"] = _content(out.get("content", []), audio)
    elif method == "prompts/get":
        out["messages"] = [m for m in (_message(m, audio) for m in out.get("messages", [])) if m is not None]
    return out


def _without(value: Any, keys: tuple[str, ...]) -> Any:
    if not isinstance(value, dict):
        return value
    return {k: v for k, v in value.items() if k not in keys}


def _prompt(prompt: Any) -> Any:
    prompt = _without(prompt, _NEWER_FIELDS)
    if isinstance(prompt, dict) and isinstance(prompt.get("arguments"), list):
        prompt["arguments"] = [_without(a, _NEWER_FIELDS) for a in prompt["arguments"]]
    return prompt


def _allowed(item: Any, audio: bool) -> bool:
    kind = item.get("type") if isinstance(item, dict) else None
    return kind != "resource_link" and (audio or kind != "audio")


def _content(items: Any, audio: bool) -> Any:
    if not isinstance(items, list):
        return items
    return [item for item in items if _allowed(item, audio)]


def _message(message: Any, audio: bool) -> Any:
    if isinstance(message, dict) and not _allowed(message.get("content"), audio):
        return None
    return message
