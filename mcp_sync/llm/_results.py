"""Tool results in each model API's shape.

Owns: turning a `CallToolResult` (or an error the model should read) into
the content a tool-result message carries: text for OpenAI Chat
Completions, text or input_text/input_image items for the Responses API,
text and base64 image blocks for Anthropic.

Must not know: any SDK, or how a tool is called.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

import attrs

from ..types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

#: The image types Anthropic takes in an image block.
_ANTHROPIC_IMAGES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
#: The image types the Responses API takes as an input_image data URL.
_OPENAI_IMAGES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})


@attrs.frozen
class Outcome:
    """What one tool call came to: the result, or an error text for the model."""

    result: CallToolResult | None
    error: str | None = None

    @property
    def is_error(self) -> bool:
        return self.error is not None or (self.result is not None and self.result.is_error)


def _size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return len(data)


def _parts(result: CallToolResult, images: frozenset[str]) -> list[tuple[str, Any]]:
    """The result as ("text", str) and ("image", ImageContent) parts, in
    order; what the API cannot take is said in words. Structured content
    comes last, as JSON text, unless a text block already says it."""
    parts: list[tuple[str, Any]] = []
    texts: list[str] = []
    for block in result.content:
        if isinstance(block, TextContent):
            parts.append(("text", block.text))
            texts.append(block.text)
        elif isinstance(block, ImageContent) and (block.mime_type or "") in images:
            parts.append(("image", block))
        elif isinstance(block, (ImageContent, AudioContent)):
            kind = block.mime_type or "unknown type"
            parts.append(("text", f"[{block.type} ({kind}, {_size(block.data)} bytes) not shown]"))
        elif isinstance(block, ResourceLink):
            label = f" ({block.name})" if block.name else ""
            parts.append(("text", f"[resource link: {block.uri}{label}]"))
        elif isinstance(block, EmbeddedResource):
            resource = block.resource
            if isinstance(resource, TextResourceContents):
                parts.append(("text", resource.text))
            elif isinstance(resource, BlobResourceContents):
                if (resource.mime_type or "") in images:
                    parts.append(("image", ImageContent.from_wire(
                        {"type": "image", "data": resource.blob, "mimeType": resource.mime_type})))
                else:
                    kind = resource.mime_type or "binary"
                    parts.append(("text", f"[resource {resource.uri} ({kind}, {_size(resource.blob)} bytes) not shown]"))
        else:
            parts.append(("text", json.dumps(block.to_wire(), ensure_ascii=False)))
    structured = result.structured_content
    if structured is not None:
        said = False
        for text in texts:
            try:
                said = said or json.loads(text) == structured
            except (ValueError, RecursionError):  # not JSON, or nested past what json.loads follows
                continue
        if not said:
            parts.append(("text", json.dumps(structured, ensure_ascii=False)))
    return parts


def _joined(parts: list[tuple[str, Any]]) -> str:
    return "\n".join(part for kind, part in parts if kind == "text")


def openai_chat_content(outcome: Outcome) -> str:
    """A chat `tool` message's content: text only (the API takes no images
    there). An error is prefixed with ``Error:`` (the API has no error flag)."""
    if outcome.error is not None:
        return f"Error: {outcome.error}"
    assert outcome.result is not None
    text = _joined(_parts(outcome.result, frozenset()))
    return f"Error: {text}" if outcome.result.is_error else text


def openai_responses_output(outcome: Outcome) -> str | list[dict[str, Any]]:
    """A `function_call_output`'s output: a string, or input_text and
    input_image items when the result has an image."""
    if outcome.error is not None:
        return f"Error: {outcome.error}"
    assert outcome.result is not None
    parts = _parts(outcome.result, _OPENAI_IMAGES)
    prefix = "Error: " if outcome.result.is_error else ""
    if not any(kind == "image" for kind, _ in parts):
        return prefix + _joined(parts)
    items: list[dict[str, Any]] = []
    for kind, part in parts:
        if kind == "text":
            items.append({"type": "input_text", "text": part})
        else:
            items.append({"type": "input_image", "image_url": f"data:{part.mime_type};base64,{part.data}"})
    if prefix:
        items.insert(0, {"type": "input_text", "text": "Error:"})
    return items


def anthropic_content(outcome: Outcome) -> list[dict[str, Any]]:
    """A `tool_result` block's content: text blocks and base64 image blocks."""
    if outcome.error is not None:
        return [{"type": "text", "text": outcome.error}]
    assert outcome.result is not None
    blocks: list[dict[str, Any]] = []
    for kind, part in _parts(outcome.result, _ANTHROPIC_IMAGES):
        if kind == "text":
            if part:  # the API refuses an empty text block
                blocks.append({"type": "text", "text": part})
        else:
            blocks.append({"type": "image", "source": {"type": "base64", "media_type": part.mime_type,
                                                       "data": part.data}})
    return blocks
