"""Bridges to model SDKs: MCP tools for a model, and sampling by a model.

- `ToolSet`: the tools of a `Client` or `ClientGroup` as tool definitions
  for OpenAI Chat Completions, the OpenAI Responses API and the Anthropic
  Messages API (names every API accepts, mapped back by `resolve()`;
  OpenAI strict mode as an option); `run()` calls every tool a model
  response asks for in parallel and returns the results in the API's
  shape; `loop()` goes back and forth until the model is done.
- `openai_sampling`, `anthropic_sampling`: input handlers that answer a
  server's `sampling/createMessage` with an ``openai.OpenAI`` or
  ``anthropic.Anthropic`` client.

No SDK is imported here or by anything this package imports: the SDK
objects you pass in are used as they are, and responses are read through
their dict form. See [Model SDKs](../llm.md).

Example::

    tools = mcp_sync.llm.ToolSet(client)
    completion = openai_client.chat.completions.create(
        model="gpt-4.1-mini", messages=messages, tools=tools.openai_chat_tools())
    messages += [completion.choices[0].message, *tools.run_openai_chat(completion)]
"""

from ._sampling import anthropic_sampling, choose_model, openai_sampling
from ._toolset import (
    API,
    ExposedTool,
    LoopResult,
    MaxRoundsExceeded,
    ToolCall,
    ToolSet,
    as_dict,
)

__all__ = [
    "API", "ExposedTool", "LoopResult", "MaxRoundsExceeded", "ToolCall", "ToolSet", "anthropic_sampling",
    "as_dict", "choose_model", "openai_sampling",
]
