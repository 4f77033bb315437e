"""Sampling handlers backed by a model API: `openai_sampling`, `anthropic_sampling`.

Owns: mapping `sampling/createMessage` params to one API call (messages
with text, image and audio content, tool use and tool results of
2025-11-25, systemPrompt, maxTokens, the model preferences' hints,
stopSequences, temperature, tools and toolChoice) and the API's answer
back to a `CreateMessageResult`.

Must not know: the SDK before the handler is made (it is never imported:
the client passed in is used as it is).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ._schema import plain_schema
from ._toolset import as_dict

__all__ = ["anthropic_sampling", "choose_model", "openai_sampling"]

SamplingHandler = Callable[[dict[str, Any]], dict[str, Any]]

_OPENAI_STOP = {"stop": "endTurn", "length": "maxTokens", "tool_calls": "toolUse", "function_call": "toolUse"}
_ANTHROPIC_STOP = {"end_turn": "endTurn", "stop_sequence": "stopSequence", "max_tokens": "maxTokens",
                   "tool_use": "toolUse"}
_OPENAI_AUDIO = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/wave": "wav", "audio/mpeg": "mp3", "audio/mp3": "mp3"}


def choose_model(params: Mapping[str, Any], default: str, models: Iterable[str] = ()) -> str:
    """The model for a sampling request: the first of `models` that a hint
    of ``modelPreferences.hints`` names (a hint is a substring of the model
    name, any case; hints are tried in order), else `default`.

    A server's hint never chooses a model you did not list: hints only pick
    among `models`.

    Args:
        params: The `sampling/createMessage` params.
        default: The model when no hint matches.
        models: The models hints may choose.

    Returns:
        The model name.

    Example::

        >>> choose_model({"modelPreferences": {"hints": [{"name": "mini"}]}}, "gpt-4.1", ["gpt-4.1", "gpt-4.1-mini"])
        'gpt-4.1-mini'
    """
    offered = list(models)
    preferences = params.get("modelPreferences")
    hints = preferences.get("hints") if isinstance(preferences, Mapping) else None
    for hint in hints if isinstance(hints, list) else ():
        name = hint.get("name") if isinstance(hint, Mapping) else None
        if isinstance(name, str) and name:
            for model in offered:
                if name.casefold() in model.casefold():
                    return model
    return default


def _blocks(content: Any) -> list[dict[str, Any]]:
    """A sampling message's content as a list of blocks (one block or a list since 2025-11-25)."""
    items = content if isinstance(content, list) else [content]
    if not all(isinstance(item, Mapping) for item in items):
        raise ValueError("a sampling message's content must be a content block or a list of them")
    return [dict(item) for item in items]


def _check(model: str, models: Iterable[str], max_tokens: int | None) -> list[str]:
    if not isinstance(model, str) or not model:
        raise TypeError("model must be the name of the default model")
    if isinstance(models, (str, bytes)) or not isinstance(models, Iterable):
        raise TypeError("models must be a list of model names")
    offered = list(models)
    if not all(isinstance(name, str) and name for name in offered):
        raise TypeError("models must be a list of model names")
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1):
        raise ValueError("max_tokens must be a positive integer or None")
    return offered


def _tokens(params: Mapping[str, Any], cap: int | None) -> int:
    requested = params.get("maxTokens")
    if isinstance(requested, bool) or not isinstance(requested, int) or requested < 1:
        raise ValueError("maxTokens must be a positive integer")
    return min(requested, cap) if cap is not None else requested


def _tool_result_text(block: Mapping[str, Any]) -> str:
    """A sampling tool_result's content as text (its text blocks, then its
    structured content as JSON)."""
    parts = [b["text"] for b in block.get("content") or [] if isinstance(b, Mapping) and b.get("type") == "text"]
    if block.get("structuredContent") is not None:
        parts.append(json.dumps(block["structuredContent"], ensure_ascii=False))
    return "\n".join(str(p) for p in parts)


# -- OpenAI --------------------------------------------------------------------------------

def _openai_messages(params: Mapping[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if isinstance(params.get("systemPrompt"), str) and params["systemPrompt"]:
        out.append({"role": "system", "content": params["systemPrompt"]})
    for message in params.get("messages") or []:
        role = message.get("role")
        if role not in ("user", "assistant"):
            raise ValueError(f"a sampling message's role must be user or assistant, not {role!r}")
        parts: list[dict[str, Any]] = []
        tool_calls: list[dict[str, Any]] = []
        for block in _blocks(message.get("content")):
            kind = block.get("type")
            if kind == "text":
                parts.append({"type": "text", "text": str(block.get("text", ""))})
            elif kind == "image" and role == "user":
                parts.append({"type": "image_url",
                              "image_url": {"url": f"data:{block.get('mimeType')};base64,{block.get('data')}"}})
            elif kind == "audio" and role == "user" and block.get("mimeType") in _OPENAI_AUDIO:
                parts.append({"type": "input_audio", "input_audio": {"data": block.get("data"),
                                                                     "format": _OPENAI_AUDIO[block["mimeType"]]}})
            elif kind == "tool_use" and role == "assistant":
                tool_calls.append({"id": block.get("id"), "type": "function",
                                   "function": {"name": block.get("name"),
                                                "arguments": json.dumps(block.get("input") or {})}})
            elif kind == "tool_result":
                text = _tool_result_text(block)
                out.append({"role": "tool", "tool_call_id": block.get("toolUseId"),
                            "content": f"Error: {text}" if block.get("isError") else text})
            else:
                raise ValueError(f"OpenAI chat cannot take {kind!r} content in a {role} message")
        if role == "assistant":
            text = "".join(p["text"] for p in parts)
            turn: dict[str, Any] = {"role": "assistant", "content": text or None}
            if tool_calls:
                turn["tool_calls"] = tool_calls
            if text or tool_calls:
                out.append(turn)
        elif parts:
            one_text = len(parts) == 1 and parts[0]["type"] == "text"
            out.append({"role": "user", "content": parts[0]["text"] if one_text else parts})
    return out


def openai_sampling(client: Any, *, model: str, models: Iterable[str] = (), max_tokens: int | None = None,
                    **create_options: Any) -> SamplingHandler:
    """A sampling handler that answers with OpenAI Chat Completions.

    Each `sampling/createMessage` becomes one
    ``client.chat.completions.create(...)``: `systemPrompt` as the system
    message; the messages' text, image (user, as a data URL) and wav/mp3
    audio (user) content; `maxTokens` as `max_completion_tokens`;
    `stopSequences` as `stop`; `temperature`; the model from the hints
    (`choose_model()`). With `tools` (2025-11-25: declare
    ``client_capabilities={"sampling": {"tools": {}}}``) the tools and
    `toolChoice` are passed on, and the model's tool calls come back as
    `tool_use` blocks. The answer is ``{"role": "assistant", "content",
    "model", "stopReason"}``, `stopReason` from `finish_reason`: stop ->
    endTurn (OpenAI does not tell a stop sequence from the natural end),
    length -> maxTokens, tool_calls -> toolUse; any other as it is. An
    API error raises from the handler, which fails the tool call with
    `InputHandlerError`.

    Args:
        client: An ``openai.OpenAI`` client (or one with the same
            ``chat.completions.create``).
        model: The model when no hint chooses one of `models`.
        models: The models the server's hints may choose among.
        max_tokens: A cap on `maxTokens`; None: as the server asks.
        **create_options: More arguments of every create call.

    Returns:
        The handler, for ``input_handlers={"sampling": ...}``.

    Raises:
        TypeError: `client` has no ``chat.completions.create``, or a bad
            `model` or `models`.
        ValueError: A `max_tokens` that is not a positive integer.

    Example::

        handler = mcp_sync.llm.openai_sampling(openai.OpenAI(), model="gpt-4.1-mini")
        client = mcp_sync.connect(target, input_handlers={"sampling": handler})
    """
    offered = _check(model, models, max_tokens)
    create = getattr(getattr(getattr(client, "chat", None), "completions", None), "create", None)
    if not callable(create):
        raise TypeError("client must be an openai.OpenAI client (it has no chat.completions.create)")

    def handler(params: dict[str, Any]) -> dict[str, Any]:
        chosen = choose_model(params, model, offered)
        request: dict[str, Any] = {"model": chosen, "messages": _openai_messages(params),
                                   "max_completion_tokens": _tokens(params, max_tokens)}
        if isinstance(params.get("stopSequences"), list) and params["stopSequences"]:
            request["stop"] = list(params["stopSequences"])
        if isinstance(params.get("temperature"), (int, float)) and not isinstance(params["temperature"], bool):
            request["temperature"] = params["temperature"]
        tools = params.get("tools")
        if isinstance(tools, list) and tools:
            request["tools"] = [{"type": "function", "function": {
                "name": t.get("name"), "description": t.get("description") or "",
                "parameters": plain_schema(t.get("inputSchema"))}} for t in tools if isinstance(t, Mapping)]
            mode = (params.get("toolChoice") or {}).get("mode") if isinstance(params.get("toolChoice"), Mapping) else None
            if mode in ("auto", "required", "none"):
                request["tool_choice"] = mode
        request.update(create_options)
        completion = as_dict(create(**request))
        choice = as_dict(completion["choices"][0])
        message = as_dict(choice.get("message") or {})
        content: list[dict[str, Any]] = []
        if message.get("content"):
            content.append({"type": "text", "text": message["content"]})
        for call in message.get("tool_calls") or []:
            call = as_dict(call)
            try:
                arguments = json.loads(call["function"].get("arguments") or "{}")
            except ValueError:
                arguments = {"_raw": call["function"].get("arguments")}
            content.append({"type": "tool_use", "id": call["id"], "name": call["function"]["name"],
                            "input": arguments})
        reason = choice.get("finish_reason")
        return _result(content, str(completion.get("model") or chosen),
                       _OPENAI_STOP.get(reason, reason) if isinstance(reason, str) else None)

    return handler


# -- Anthropic -----------------------------------------------------------------------------

def _anthropic_messages(params: Mapping[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for message in params.get("messages") or []:
        role = message.get("role")
        if role not in ("user", "assistant"):
            raise ValueError(f"a sampling message's role must be user or assistant, not {role!r}")
        blocks: list[dict[str, Any]] = []
        for block in _blocks(message.get("content")):
            kind = block.get("type")
            if kind == "text":
                blocks.append({"type": "text", "text": str(block.get("text", ""))})
            elif kind == "image":
                blocks.append({"type": "image", "source": {"type": "base64", "media_type": block.get("mimeType"),
                                                           "data": block.get("data")}})
            elif kind == "tool_use":
                blocks.append({"type": "tool_use", "id": block.get("id"), "name": block.get("name"),
                               "input": block.get("input") or {}})
            elif kind == "tool_result":
                result: dict[str, Any] = {"type": "tool_result", "tool_use_id": block.get("toolUseId"),
                                          "content": _tool_result_text(block)}
                if block.get("isError"):
                    result["is_error"] = True
                blocks.append(result)
            else:
                raise ValueError(f"Anthropic cannot take {kind!r} content in a sampling message")
        out.append({"role": role, "content": blocks})
    return out


def anthropic_sampling(client: Any, *, model: str, models: Iterable[str] = (), max_tokens: int | None = None,
                       **create_options: Any) -> SamplingHandler:
    """A sampling handler that answers with the Anthropic Messages API.

    Each `sampling/createMessage` becomes one ``client.messages.create(...)``:
    `systemPrompt` as `system`; the messages' text and image content (as
    base64 image blocks); `maxTokens` as `max_tokens`; `stopSequences` as
    `stop_sequences`; `temperature` (when the SDK's create takes it: the
    Messages API of anthropic 2.x has none); the model from the hints
    (`choose_model()`). With `tools` (2025-11-25: declare
    ``client_capabilities={"sampling": {"tools": {}}}``) the tools and
    `toolChoice` (auto, required -> any, none) are passed on, and tool_use
    blocks come back as `tool_use` content. The answer is ``{"role":
    "assistant", "content", "model", "stopReason"}``, `stopReason` from
    `stop_reason`: end_turn -> endTurn, stop_sequence -> stopSequence,
    max_tokens -> maxTokens, tool_use -> toolUse; any other as it is. An
    API error raises from the handler, which fails the tool call with
    `InputHandlerError`.

    Args:
        client: An ``anthropic.Anthropic`` client (or one with the same
            ``messages.create``).
        model: The model when no hint chooses one of `models`.
        models: The models the server's hints may choose among.
        max_tokens: A cap on `maxTokens`; None: as the server asks.
        **create_options: More arguments of every create call.

    Returns:
        The handler, for ``input_handlers={"sampling": ...}``.

    Raises:
        TypeError: `client` has no ``messages.create``, or a bad `model`
            or `models`.
        ValueError: A `max_tokens` that is not a positive integer.

    Example::

        handler = mcp_sync.llm.anthropic_sampling(anthropic.Anthropic(), model="claude-sonnet-4-5")
        client = mcp_sync.connect(target, input_handlers={"sampling": handler})
    """
    offered = _check(model, models, max_tokens)
    create = getattr(getattr(client, "messages", None), "create", None)
    if not callable(create):
        raise TypeError("client must be an anthropic.Anthropic client (it has no messages.create)")
    # Newer Messages APIs (anthropic 2.x) take no temperature: the server's
    # value is a preference, passed on only to an SDK that still takes it.
    takes_temperature = _takes(create, "temperature")

    def handler(params: dict[str, Any]) -> dict[str, Any]:
        chosen = choose_model(params, model, offered)
        request: dict[str, Any] = {"model": chosen, "messages": _anthropic_messages(params),
                                   "max_tokens": _tokens(params, max_tokens)}
        if isinstance(params.get("systemPrompt"), str) and params["systemPrompt"]:
            request["system"] = params["systemPrompt"]
        if isinstance(params.get("stopSequences"), list) and params["stopSequences"]:
            request["stop_sequences"] = list(params["stopSequences"])
        if takes_temperature and isinstance(params.get("temperature"), (int, float)) \
                and not isinstance(params["temperature"], bool):
            request["temperature"] = params["temperature"]
        tools = params.get("tools")
        if isinstance(tools, list) and tools:
            request["tools"] = [{"name": t.get("name"), "description": t.get("description") or "",
                                 "input_schema": plain_schema(t.get("inputSchema"))}
                                for t in tools if isinstance(t, Mapping)]
            mode = (params.get("toolChoice") or {}).get("mode") if isinstance(params.get("toolChoice"), Mapping) else None
            if mode in ("auto", "required", "none"):
                request["tool_choice"] = {"type": {"required": "any"}.get(mode, mode)}
        request.update(create_options)
        message = as_dict(create(**request))
        content: list[dict[str, Any]] = []
        for block in map(as_dict, message.get("content") or []):
            if block.get("type") == "text":
                content.append({"type": "text", "text": block.get("text", "")})
            elif block.get("type") == "tool_use":
                content.append({"type": "tool_use", "id": block["id"], "name": block["name"],
                                "input": block.get("input") or {}})
            # thinking and other block types are the model's own: not part of the answer
        reason = message.get("stop_reason")
        return _result(content, str(message.get("model") or chosen),
                       _ANTHROPIC_STOP.get(reason, reason) if isinstance(reason, str) else None)

    return handler


def _takes(function: Callable[..., Any], name: str) -> bool:
    """Whether `function` takes the keyword `name` (True when it cannot be told)."""
    import inspect  # here: only a handler being made needs it

    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return True
    return name in parameters or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())


def _result(content: list[dict[str, Any]], model: str, stop: str | None) -> dict[str, Any]:
    """A CreateMessageResult: one content block as such (every revision
    takes it), a list only when there are several (2025-11-25 on)."""
    if not content:
        content = [{"type": "text", "text": ""}]
    texts = [block for block in content if block["type"] == "text"]
    if len(texts) == len(content) and len(texts) > 1:
        content = [{"type": "text", "text": "".join(block["text"] for block in texts)}]
    result: dict[str, Any] = {"role": "assistant", "content": content[0] if len(content) == 1 else content,
                              "model": model}
    if stop is not None:
        result["stopReason"] = stop
    return result
