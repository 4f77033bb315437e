"""`ToolSet`: the tools of a `Client` or `ClientGroup`, as model APIs see them.

Owns: which tools are exposed, their definitions in each API's shape, the
mapping from an API's tool name back to the real tool, running the calls a
model response asks for (in parallel, on a thread pool made per run and
joined before returning) and the blocking model/tool loop.

Must not know: how a tool call travels (that is the client's), or any SDK
beyond reading its response objects (through `to_dict()`/`model_dump()`).
"""

from __future__ import annotations

import concurrent.futures
import json
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

import attrs

from ..client import Client
from ..errors import McpError, RequestTimeout
from ..group import ClientGroup, GroupItem
from ..options import check_flag
from ..protocol import jsonrpc
from ..waiting import slice_of
from ..types import CallToolResult, Tool
from . import _results
from ._schema import (
    ANTHROPIC_NAME_LIMIT,
    OPENAI_NAME_LIMIT,
    NotStrict,
    api_names,
    drop_nulls,
    plain_schema,
    strict_schema,
)

__all__ = ["API", "ExposedTool", "LoopResult", "MaxRoundsExceeded", "ToolCall", "ToolSet", "as_dict"]

API = Literal["openai-chat", "openai-responses", "anthropic"]
"""Which model API: ``"openai-chat"`` (Chat Completions), ``"openai-responses"``
(Responses) or ``"anthropic"`` (Messages)."""

_APIS = ("openai-chat", "openai-responses", "anthropic")
#: The name limits of the APIs: each has its own API names.
_LIMITS = (OPENAI_NAME_LIMIT, ANTHROPIC_NAME_LIMIT)


@attrs.frozen
class ExposedTool:
    """One tool a `ToolSet` shows the model.

    Attributes:
        name: Its name for the client or group: the tool's own name, or the
            group's qualified name (``"local.echo"``).
        server: The group's server that offers it; None for a `Client`.
        tool: The definition as the server listed it.
    """

    name: str
    server: str | None
    tool: Tool


@attrs.frozen
class ToolCall:
    """One tool call a model response asked for.

    Attributes:
        id: The API's id for the call (`tool_call_id`, `call_id`, `tool_use_id`).
        name: The tool name as the model wrote it (the API name).
        arguments: The arguments as sent: a JSON string (OpenAI) or an object (Anthropic).
    """

    id: str
    name: str
    arguments: Any


@attrs.frozen
class LoopResult:
    """Where `ToolSet.loop()` ended.

    Attributes:
        response: The last model response, as the model call returned it.
        messages: The conversation: what was passed in, then each model
            turn and each round of tool results, in the API's shape (for
            the Responses API, the input items).
        rounds: How many times the model was called.
        finished: True when the model stopped asking for tools; False when
            `max_rounds` ended the loop.
    """

    response: Any
    messages: list[Any]
    rounds: int
    finished: bool


class MaxRoundsExceeded(RuntimeError):
    """`ToolSet.loop()` called the model `max_rounds` times and it still
    asked for tools (with ``on_max_rounds="raise"``, the default).

    Attributes:
        result: Where the loop stopped: the last response (whose tool calls
            were run: their results end `result.messages`), the conversation, the rounds.
    """

    def __init__(self, message: str, result: LoopResult) -> None:
        super().__init__(message)
        self.result = result


def as_dict(value: Any) -> Any:
    """An SDK response object (pydantic) as its dict form; anything else as it is.

    Example::

        >>> as_dict({"id": "x"})
        {'id': 'x'}
    """
    if isinstance(value, Mapping):
        return value
    to_dict = getattr(value, "to_dict", None)  # openai and anthropic: the API's own field names, unset left out
    if callable(to_dict):
        return to_dict()
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json", by_alias=True, exclude_unset=True)
    return value


Selection = Iterable[str] | Callable[[ExposedTool], bool] | None


class ToolSet:
    """The tools of a `Client` or `ClientGroup`, for a model API.

    Lists the tools once (now; `refresh()` lists again), keeps those
    `tools` selects, and gives each a name every API accepts: the tool's
    name (for a group, the qualified ``"server.tool"``) with each character
    outside ``[A-Za-z0-9_-]`` made ``_`` (``"local.echo"`` ->
    ``"local_echo"``), cut to the API's limit (64 for OpenAI, 128 for
    Anthropic); a name that would then clash or is too long ends in ``_``
    and 8 hex digits of its SHA-256. The names depend only on the set of
    tools, so they are the same in every process; `resolve()` maps one back.

    Args:
        source: The `Client` or `ClientGroup` whose tools are called.
        tools: Which tools to expose: names (a group's qualified names), or
            a function of an `ExposedTool` that says yes or no; None: all.
        strict: OpenAI strict mode (Structured Outputs) for the tool
            definitions: every property listed in `required` (an optional
            one made nullable, and its null removed again before the call),
            ``additionalProperties: false``, and keywords strict mode does
            not take removed. A tool whose schema strict mode cannot say
            is sent non-strict: one that admits properties it does not name
            (open `additionalProperties`), `allOf` of several schemas, or
            `oneOf` beside `anyOf` in one schema.
        timeout: Seconds each tool call may take (its own deadline; a call
            past it is cancelled and becomes an error result).
        max_workers: The most tool calls run at once.

    Attributes:
        source: The client or group.
        timeout (float): Seconds each tool call may take.
        max_workers (int): The most tool calls at once.
        strict (bool): Whether OpenAI definitions are strict.
        errors (dict[str, McpError]): For a group, the servers whose
            listing failed (their tools are not exposed).

    Raises:
        TypeError: `source` is neither a `Client` nor a `ClientGroup`,
            `tools` is neither names nor a callable, or `strict` is not a
            bool.
        ValueError: A name in `tools` is not a tool of `source`, or
            `timeout` or `max_workers` is not positive.
        McpError: Listing the tools failed (a `Client`'s).

    Example::

        tools = mcp_sync.llm.ToolSet(client, tools=["echo", "add"])
        print([t["function"]["name"] for t in tools.openai_chat_tools()])
    """

    def __init__(self, source: Client | ClientGroup, *, tools: Selection = None, strict: bool = False,
                 timeout: float = 60.0, max_workers: int = 8) -> None:
        if not isinstance(source, (Client, ClientGroup)):
            raise TypeError(f"ToolSet() takes a Client or a ClientGroup, not {type(source).__name__}")
        if tools is not None and not callable(tools) and (isinstance(tools, (str, bytes)) or not isinstance(tools, Iterable)):
            raise TypeError("tools must be tool names (a list, not one string), a function of an ExposedTool, or None")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise ValueError("timeout must be a positive number of seconds")
        if isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1:
            raise ValueError("max_workers must be a positive integer")
        check_flag("strict", strict)
        self.source = source
        self.timeout = float(timeout)
        self.max_workers = max_workers
        self.strict = strict
        self.errors: dict[str, McpError] = {}
        self._selection: Selection = tools if callable(tools) or tools is None else list(tools)
        #: The exposed tools by name, and the API names of each name limit, as one pair that `refresh()`
        #: replaces whole and nothing changes in place: a run on another thread sees the old pair or the
        #: new, never a mix. Every limit's names are made with the pair, so none is first given out from
        #: a pair a refresh has already read (and then not kept by it).
        self._state: tuple[dict[str, ExposedTool], dict[int, dict[str, str]]] = ({}, {limit: {} for limit in _LIMITS})
        # Serialises the step from one pair to the next, so two refreshes each keep the other's names.
        self._refreshing = threading.Lock()
        self.refresh()

    # -- listing -----------------------------------------------------------------------

    def refresh(self) -> None:
        """List the tools again (after a `tools/list_changed`, say).

        Raises:
            ValueError: A name given in `tools` is no longer offered.
            McpError: Listing a `Client`'s tools failed.

        Example::

            tools.refresh()
        """
        found: list[ExposedTool] = []
        errors: dict[str, McpError] = {}
        if isinstance(self.source, ClientGroup):
            listing = self.source.list_tools(timeout=self.timeout)
            found = [ExposedTool(entry.name, entry.server, entry.item) for entry in listing]
            errors = dict(listing.errors)
        else:
            found = [ExposedTool(tool.name, None, tool) for tool in self.source.list_tools(timeout=self.timeout)]
        selection = self._selection
        if callable(selection):
            chosen = [entry for entry in found if selection(entry)]
        elif selection is not None:
            wanted = list(selection)
            by_name = {entry.name: entry for entry in found}
            # A name a failed server may hold is left out, not refused: its
            # error is in `errors` (and a refresh once it is back brings it).
            unknown = [name for name in wanted if name not in by_name and not self._may_hold(name, errors)]
            if unknown:
                raise ValueError(f"no tool named {', '.join(map(repr, unknown))}; the tools are "
                                 f"{', '.join(sorted(by_name)) or 'none'}")
            chosen = [by_name[name] for name in dict.fromkeys(wanted) if name in by_name]
        else:
            chosen = found
        entries = {entry.name: entry for entry in chosen}
        # The API names given out so far stay with their tools (`api_names`'
        # `kept`): a model's answer written from the earlier definitions
        # must not run another tool that took its name.
        with self._refreshing:
            given = self._state[1]
            self._state = (entries, {limit: api_names(entries, limit, kept=given[limit]) for limit in _LIMITS})
        self.errors = errors

    def _may_hold(self, name: str, failed: Mapping[str, McpError]) -> bool:
        """Whether a server whose listing failed may offer `name`: its own
        (`server.name`), or any, for a name no server qualifies."""
        if not failed or not isinstance(self.source, ClientGroup):
            return False
        server, separator, _ = name.partition(self.source.separator)
        return server in failed if separator and server in self.source.servers else True

    @property
    def tools(self) -> list[ExposedTool]:
        """The exposed tools, in the order listed (or named in `tools`)."""
        return list(self._state[0].values())

    def names(self, api: API) -> dict[str, ExposedTool]:
        """Every exposed tool by its name for `api`.

        Args:
            api: ``"openai-chat"``, ``"openai-responses"`` or ``"anthropic"``.

        Returns:
            API name -> tool, in the order of `tools`.

        Raises:
            ValueError: An unknown `api`.

        Example::

            print(list(tools.names("openai-chat")))     # ['local_echo', ...]
        """
        state = self._state
        mapping = state[1][_limit(api)]
        back = {name: api_name for api_name, name in mapping.items()}
        return {back[entry.name]: entry for entry in state[0].values()}

    def resolve(self, api_name: str, api: API = "openai-chat") -> ExposedTool:
        """The tool an API name stands for.

        Args:
            api_name: A name from this set's definitions for `api`.
            api: Which API's names (OpenAI's and Anthropic's differ only for
                names past 64 characters).

        Returns:
            The exposed tool.

        Raises:
            KeyError: No exposed tool has that name.
            ValueError: An unknown `api`.

        Example::

            print(tools.resolve("local_echo").name)     # local.echo
        """
        state = self._state
        mapping = state[1][_limit(api)]
        if api_name not in mapping:
            raise KeyError(api_name)
        return state[0][mapping[api_name]]

    # -- definitions -------------------------------------------------------------------

    def _strict(self, strict: bool | None) -> bool:
        """The strict mode asked for a listing: the set's when None."""
        if strict is None:
            return self.strict
        check_flag("strict", strict)
        return strict

    def _schema(self, entry: ExposedTool, strict: bool) -> tuple[dict[str, Any], bool]:
        if strict:
            try:
                return strict_schema(entry.tool.input_schema), True
            except NotStrict:
                pass
        return plain_schema(entry.tool.input_schema), False

    def openai_chat_tools(self, *, strict: bool | None = None) -> list[dict[str, Any]]:
        """The tool definitions for OpenAI Chat Completions (`tools=`):
        ``{"type": "function", "function": {"name", "description", "parameters"}}``.

        Args:
            strict: Strict mode for these definitions; None: the set's `strict`.

        Returns:
            One definition per exposed tool.

        Example::

            completion = openai_client.chat.completions.create(
                model="gpt-4.1-mini", messages=messages, tools=tools.openai_chat_tools())
        """
        strict = self._strict(strict)
        out = []
        for api_name, entry in self.names("openai-chat").items():
            schema, is_strict = self._schema(entry, strict)
            function: dict[str, Any] = {"name": api_name, "description": _description(entry),
                                        "parameters": schema}
            if is_strict:
                function["strict"] = True
            out.append({"type": "function", "function": function})
        return out

    def openai_responses_tools(self, *, strict: bool | None = None) -> list[dict[str, Any]]:
        """The tool definitions for the OpenAI Responses API (`tools=`):
        ``{"type": "function", "name", "description", "parameters", "strict"}``.

        Args:
            strict: Strict mode for these definitions; None: the set's `strict`.

        Returns:
            One definition per exposed tool.

        Example::

            response = openai_client.responses.create(
                model="gpt-4.1-mini", input="Add 2 and 3", tools=tools.openai_responses_tools())
        """
        strict = self._strict(strict)
        out = []
        for api_name, entry in self.names("openai-responses").items():
            schema, is_strict = self._schema(entry, strict)
            # The Responses API takes strict as true unless told: always said.
            out.append({"type": "function", "name": api_name, "description": _description(entry),
                        "parameters": schema, "strict": is_strict})
        return out

    def anthropic_tools(self) -> list[dict[str, Any]]:
        """The tool definitions for the Anthropic Messages API (`tools=`):
        ``{"name", "description", "input_schema"}``.

        Returns:
            One definition per exposed tool.

        Example::

            message = anthropic_client.messages.create(
                model="claude-sonnet-4-5", max_tokens=1024, messages=messages, tools=tools.anthropic_tools())
        """
        return [{"name": api_name, "description": _description(entry),
                 "input_schema": plain_schema(entry.tool.input_schema)}
                for api_name, entry in self.names("anthropic").items()]

    def definitions(self, api: API) -> list[dict[str, Any]]:
        """The tool definitions for `api` (`openai_chat_tools()`, ...).

        Args:
            api: ``"openai-chat"``, ``"openai-responses"`` or ``"anthropic"``.

        Returns:
            One definition per exposed tool.

        Raises:
            ValueError: An unknown `api`.

        Example::

            definitions = tools.definitions("anthropic")
        """
        _limit(api)
        if api == "openai-chat":
            return self.openai_chat_tools()
        if api == "openai-responses":
            return self.openai_responses_tools()
        return self.anthropic_tools()

    # -- running -----------------------------------------------------------------------

    def tool_calls(self, response: Any, api: API) -> list[ToolCall]:
        """The tool calls a model response asks for, in order.

        Args:
            response: The SDK's response object or its dict form: a chat
                completion (or its message), a Responses API response (or
                its `output` list), an Anthropic message.
            api: Which API it came from.

        Returns:
            The calls; empty when the model asked for none.

        Raises:
            ValueError: `response` is not that API's response, or an unknown `api`.

        Example::

            for call in tools.tool_calls(completion, "openai-chat"):
                print(call.id, call.name, call.arguments)
        """
        _limit(api)
        data = as_dict(response)
        try:
            if api == "openai-chat":
                message = data["choices"][0]["message"] if "choices" in data else data
                message = as_dict(message)
                return [ToolCall(c["id"], c["function"]["name"], c["function"].get("arguments"))
                        for c in map(as_dict, message.get("tool_calls") or ())
                        if c.get("type", "function") == "function"]
            if api == "openai-responses":
                items = data["output"] if isinstance(data, Mapping) else data
                return [ToolCall(i["call_id"], i["name"], i.get("arguments"))
                        for i in map(as_dict, items) if i.get("type") == "function_call"]
            blocks = data["content"] if isinstance(data, Mapping) else data
            return [ToolCall(b["id"], b["name"], b.get("input"))
                    for b in map(as_dict, blocks if isinstance(blocks, list) else ()) if b.get("type") == "tool_use"]
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise ValueError(f"not a {api} response: {type(exc).__name__} {exc}") from None

    def run(self, response: Any, api: API, *, timeout: float | None = None) -> list[dict[str, Any]]:
        """Call every tool a model response asks for, in parallel, and return
        the results as messages (or items) for `api`:

        - ``"openai-chat"``: ``{"role": "tool", "tool_call_id", "content"}`` each;
        - ``"openai-responses"``: ``{"type": "function_call_output", "call_id", "output"}`` each;
        - ``"anthropic"``: one user message whose content is a ``tool_result``
          block per call (``tool_use_id``, ``content``, ``is_error``); an
          empty list when there were no calls.

        Nothing the model got wrong raises: arguments that are not a JSON
        object or that the client refuses before sending (a value an
        `Mcp-Param-*` header cannot carry), a tool name that is not in the set, a call past its
        timeout, an MCP error (the server refused, the connection failed,
        the output did not match its schema) each become an error result
        the model can read (``"Error: ..."``, or ``is_error: true``), in
        its call's place.

        Args:
            response: The SDK's response object or its dict form.
            api: Which API it came from.
            timeout: Seconds each call may take; None: the set's `timeout`.

        Returns:
            The result messages, in the order of the calls.

        Raises:
            ValueError: `response` is not that API's response, an unknown
                `api`, or a `timeout` that is not positive.

        Example::

            messages.append(completion.choices[0].message)
            messages.extend(tools.run(completion, "openai-chat"))
        """
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                    or not timeout > 0):
            raise ValueError("timeout must be a positive number of seconds")
        calls = self.tool_calls(response, api)
        outcomes = self._call_all(calls, api, timeout=timeout)
        if api == "openai-chat":
            return [{"role": "tool", "tool_call_id": call.id, "content": _results.openai_chat_content(outcome)}
                    for call, outcome in zip(calls, outcomes)]
        if api == "openai-responses":
            return [{"type": "function_call_output", "call_id": call.id,
                     "output": _results.openai_responses_output(outcome)}
                    for call, outcome in zip(calls, outcomes)]
        if not calls:
            return []
        blocks = []
        for call, outcome in zip(calls, outcomes):
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call.id}
            content = _results.anthropic_content(outcome)
            if content:
                block["content"] = content
            if outcome.is_error:
                block["is_error"] = True
            blocks.append(block)
        return [{"role": "user", "content": blocks}]

    def run_openai_chat(self, response: Any, *, timeout: float | None = None) -> list[dict[str, Any]]:
        """`run(response, "openai-chat")`: the `tool` messages for a chat completion.

        Args:
            response: A chat completion (SDK object or dict), or its message.
            timeout: Seconds each call may take; None: the set's `timeout`.

        Returns:
            ``{"role": "tool", "tool_call_id", "content"}`` per tool call.

        Raises:
            ValueError: `response` is not a chat completion.

        Example::

            messages.extend(tools.run_openai_chat(completion))
        """
        return self.run(response, "openai-chat", timeout=timeout)

    def run_openai_responses(self, response: Any, *, timeout: float | None = None) -> list[dict[str, Any]]:
        """`run(response, "openai-responses")`: the `function_call_output` items.

        Args:
            response: A Responses API response (SDK object or dict), or its `output`.
            timeout: Seconds each call may take; None: the set's `timeout`.

        Returns:
            ``{"type": "function_call_output", "call_id", "output"}`` per function call.

        Raises:
            ValueError: `response` is not a Responses API response.

        Example::

            items += tools.run_openai_responses(response)
        """
        return self.run(response, "openai-responses", timeout=timeout)

    def run_anthropic(self, response: Any, *, timeout: float | None = None) -> dict[str, Any] | None:
        """The user message of `tool_result` blocks for an Anthropic message.

        Args:
            response: An Anthropic message (SDK object or dict).
            timeout: Seconds each call may take; None: the set's `timeout`.

        Returns:
            ``{"role": "user", "content": [tool_result, ...]}``; None when
            the message asked for no tool.

        Raises:
            ValueError: `response` is not an Anthropic message.

        Example::

            reply = tools.run_anthropic(message)
            if reply is not None:
                messages += [{"role": "assistant", "content": message.content}, reply]
        """
        messages = self.run(response, "anthropic", timeout=timeout)
        return messages[0] if messages else None

    def _call_all(self, calls: Sequence[ToolCall], api: API, *, timeout: float | None = None) -> list[_results.Outcome]:
        """Run the calls in parallel (at most `max_workers` at once, on a
        pool made for them and joined before returning), each with its own
        timeout; the outcomes in the order of the calls."""
        limit = self.timeout if timeout is None else float(timeout)
        if len(calls) <= 1:
            return [self._call_one(call, api, limit) for call in calls]
        pool = concurrent.futures.ThreadPoolExecutor(min(len(calls), self.max_workers),
                                                     thread_name_prefix="mcp-sync-llm")
        try:
            futures = [pool.submit(self._call_one, call, api, limit) for call in calls]
            waiting = set(futures)
            while waiting:  # in slices on the main thread, where an interrupt must land
                waiting = concurrent.futures.wait(waiting, timeout=slice_of(None)).not_done
            outcomes = [future.result() for future in futures]
        except BaseException:
            # An interrupt (Ctrl-C) is raised now, not after every call:
            # the calls not started are dropped; those running end within
            # their timeout, on the pool's threads.
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown()
        return outcomes

    def _call_one(self, call: ToolCall, api: API, timeout: float) -> _results.Outcome:
        try:
            entry = self.resolve(call.name, api)
        except KeyError:
            known = ", ".join(self.names(api)) or "none"
            return _results.Outcome(None, f"there is no tool named {call.name!r}; the tools are {known}")
        arguments = call.arguments
        if arguments is None or arguments == "":
            arguments = {}
        elif isinstance(arguments, str):
            try:
                arguments = json.loads(arguments, parse_constant=_refuse_constant)
            except (ValueError, RecursionError) as exc:
                return _results.Outcome(None, f"the arguments of {call.name} are not valid JSON ({exc}); "
                                              "send a JSON object")
        if not isinstance(arguments, dict):
            return _results.Outcome(None, f"the arguments of {call.name} must be a JSON object, "
                                          f"not {type(arguments).__name__}")
        problem = jsonrpc.unencodable(arguments)  # 1e999 (an infinity), or an SDK's object that holds NaN
        if problem is not None:
            return _results.Outcome(None, f"the arguments of {call.name} cannot be sent as JSON ({problem}); "
                                          "send finite numbers")
        # Strict mode makes the model send null for an optional property it
        # leaves out; the tool's schema does not take null there. Left out
        # again (always: a definition may be strict without the set's `strict`).
        arguments = drop_nulls(arguments, entry.tool.input_schema)
        try:
            result: CallToolResult
            if isinstance(self.source, ClientGroup):
                item = GroupItem(entry.server or "", entry.name, entry.tool)
                result = self.source.call_tool(item, arguments, timeout=timeout)
            else:
                result = self.source.call_tool(entry.tool, arguments, timeout=timeout)
        except RequestTimeout:
            return _results.Outcome(None, f"{call.name} did not finish within {timeout:g} s, and was cancelled")
        except McpError as exc:
            return _results.Outcome(None, f"{call.name} failed: {exc}")
        except (TypeError, ValueError) as exc:
            # The set passes call_tool a tool it listed and a valid timeout:
            # what the client refuses before sending is the model's
            # arguments (a value no `Mcp-Param-*` header can carry, say).
            return _results.Outcome(None, f"the arguments of {call.name} were refused before sending ({exc}); "
                                          "fix them and call again")
        return _results.Outcome(result)

    # -- the loop ----------------------------------------------------------------------

    def loop(self, api: API, messages: Sequence[Any], *, call_model: Callable[[list[Any], list[dict[str, Any]]], Any]
             | None = None, client: Any = None, max_rounds: int = 10,
             on_max_rounds: Literal["raise", "return"] = "raise", **create_options: Any) -> LoopResult:
        """Call the model, run the tools it asks for, append the results,
        and again, until it asks for none (or `max_rounds` calls).

        The model is called with the conversation so far and this set's
        definitions for `api`: `call_model(messages, tools)`, or with an SDK
        `client` as ``client.chat.completions.create(messages=..., tools=...,
        **create_options)`` (``client.responses.create(input=...)``,
        ``client.messages.create(messages=...)``). Each model turn is
        appended as the API takes it back (the assistant message; the
        Responses API's output items; an assistant message with the
        content blocks), then the tool results (`run()`). SDK errors (an
        API error, a refused request) are raised as the SDK raises them.

        Args:
            api: ``"openai-chat"``, ``"openai-responses"`` or ``"anthropic"``.
            messages: The conversation to start from (not changed; for the
                Responses API, the input items).
            call_model: A function of (messages, tools) that returns the
                model response (SDK object or dict).
            client: An ``openai.OpenAI`` or ``anthropic.Anthropic`` client,
                instead of `call_model`.
            max_rounds: The most model calls.
            on_max_rounds: When the model still asks for tools after
                `max_rounds` calls: ``"raise"`` `MaxRoundsExceeded` (its
                `result` has the conversation, with that round's tool results run and
                appended), or ``"return"`` the `LoopResult` with `finished` False.
            **create_options: More arguments of the SDK's create call
                (``model=``, ``max_tokens=``...), with `client`.

        Returns:
            The last response, the whole conversation, the rounds.

        Raises:
            TypeError: Neither or both of `call_model` and `client`, or
                `create_options` with `call_model`.
            ValueError: An unknown `api` or `on_max_rounds`, or
                `max_rounds` below 1.
            MaxRoundsExceeded: After `max_rounds` calls the model still
                asked for tools (``on_max_rounds="raise"``).

        Example::

            result = tools.loop("openai-chat", [{"role": "user", "content": "Add 2 and 3"}],
                                client=openai.OpenAI(), model="gpt-4.1-mini")
            print(result.response.choices[0].message.content)
        """
        _limit(api)
        if (call_model is None) == (client is None):
            raise TypeError("loop() takes call_model= or client=, exactly one")
        if call_model is not None and create_options:
            raise TypeError(f"options {', '.join(sorted(create_options))} only apply with client=")
        if call_model is not None and not callable(call_model):
            raise TypeError("call_model must be a function of (messages, tools)")
        if isinstance(max_rounds, bool) or not isinstance(max_rounds, int) or max_rounds < 1:
            raise ValueError("max_rounds must be a positive integer")
        if on_max_rounds not in ("raise", "return"):
            raise ValueError(f"on_max_rounds must be 'raise' or 'return', not {on_max_rounds!r}")
        model = call_model if call_model is not None else _sdk_caller(api, client, create_options)
        conversation = list(messages)
        definitions = self.definitions(api)
        response: Any = None
        for rounds in range(1, max_rounds + 1):
            response = model(list(conversation), definitions)
            calls = self.tool_calls(response, api)
            conversation.extend(_model_turn(response, api))
            if not calls:
                return LoopResult(response, conversation, rounds, True)
            conversation.extend(self.run(response, api))
        result = LoopResult(response, conversation, max_rounds, False)
        if on_max_rounds == "raise":
            raise MaxRoundsExceeded(f"the model still asked for tools after {max_rounds} rounds", result)
        return result


def _limit(api: str) -> int:
    if api not in _APIS:
        raise ValueError(f"api must be one of {', '.join(_APIS)}, not {api!r}")
    return ANTHROPIC_NAME_LIMIT if api == "anthropic" else OPENAI_NAME_LIMIT


def _description(entry: ExposedTool) -> str:
    return entry.tool.description or entry.tool.title or ""


def _sdk_caller(api: str, client: Any, options: dict[str, Any]) -> Callable[[list[Any], list[dict[str, Any]]], Any]:
    if api == "openai-chat":
        create = getattr(getattr(getattr(client, "chat", None), "completions", None), "create", None)
        key = "messages"
    elif api == "openai-responses":
        create = getattr(getattr(client, "responses", None), "create", None)
        key = "input"
    else:
        create = getattr(getattr(client, "messages", None), "create", None)
        key = "messages"
    if not callable(create):
        raise TypeError(f"client has no create method for {api} (an openai.OpenAI or anthropic.Anthropic client?)")

    def call(messages: list[Any], tools: list[dict[str, Any]]) -> Any:
        return create(**{key: messages}, tools=tools, **options)

    return call


def _model_turn(response: Any, api: str) -> list[Any]:
    """The model's turn as the API takes it back in the next request."""
    data = as_dict(response)
    if api == "openai-chat":
        message = dict(as_dict(data["choices"][0]["message"] if "choices" in data else data))
        # The API refuses back some fields it sends (refusal/annotations/audio null): only what it takes.
        turn = {key: message[key] for key in ("role", "content", "tool_calls", "name") if message.get(key) is not None}
        turn.setdefault("role", "assistant")
        turn.setdefault("content", None)
        return [turn]
    if api == "openai-responses":
        items = data["output"] if isinstance(data, Mapping) else data
        return [as_dict(item) for item in items]
    content = data["content"] if isinstance(data, Mapping) else data
    return [{"role": "assistant", "content": [as_dict(block) for block in content]}]


def _refuse_constant(name: str) -> Any:
    """`json.loads`' `parse_constant`: NaN and the infinities are not JSON."""
    raise ValueError(f"{name} is not a JSON value")
