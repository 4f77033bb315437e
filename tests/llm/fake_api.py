"""A small local stand-in for the OpenAI and Anthropic HTTP APIs, for the real SDK clients.

`FakeAPI(answer)` serves on 127.0.0.1 (port 0) until closed. Every POST is
recorded (`requests`: path and JSON body) and answered by
`answer(path, body)`, which returns (status, JSON body). The builders below
make the documented response shapes: a chat completion, a Responses API
response, an Anthropic message, and each API's error body.
"""

from __future__ import annotations

import http.server
import itertools
import json
import threading
from collections.abc import Callable
from typing import Any

Answer = Callable[[str, dict[str, Any]], tuple[int, dict[str, Any]]]


class FakeAPI:
    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self._lock = threading.Lock()
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                path = self.path.split("?")[0]
                with fake._lock:
                    fake.requests.append((path, body))
                try:
                    status, reply = fake.answer(path, body)
                except Exception as exc:  # noqa: BLE001 (any failure of the test's answer is reported) the test's answer failed: say so to the SDK, loudly
                    status, reply = 500, {"error": {"message": f"fake answer failed: {exc!r}", "type": "server_error"}}
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-llm-api", daemon=True)
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def __enter__(self) -> FakeAPI:  # noqa: PYI034
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def openai(self) -> Any:
        import openai

        return openai.OpenAI(api_key="test-key", base_url=self.url + "/v1", max_retries=0, timeout=30)

    def anthropic(self) -> Any:
        import anthropic

        return anthropic.Anthropic(api_key="test-key", base_url=self.url, max_retries=0, timeout=30)


_ids = itertools.count(1)


def chat_completion(content: str | None = None, tool_calls: list[tuple[str, str, str]] = (),  # type: ignore[assignment]
                    finish_reason: str | None = None, model: str = "gpt-test") -> dict[str, Any]:
    """A chat.completion; `tool_calls` as (id, name, arguments JSON text)."""
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
    if tool_calls:
        message["tool_calls"] = [{"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                                 for i, n, a in tool_calls]
    return {
        "id": f"chatcmpl-{next(_ids)}", "object": "chat.completion", "created": 1700000000, "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None,
                     "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop")}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def responses_response(output: list[dict[str, Any]], model: str = "gpt-test") -> dict[str, Any]:
    return {
        "id": f"resp_{next(_ids)}", "object": "response", "created_at": 1700000000, "model": model,
        "status": "completed", "output": output, "parallel_tool_calls": True, "tool_choice": "auto",
        "tools": [], "temperature": 1.0, "top_p": 1.0, "error": None, "incomplete_details": None,
        "instructions": None, "metadata": {},
        "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
                  "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}},
    }


def function_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"type": "function_call", "id": f"fc_{call_id}", "call_id": call_id, "name": name,
            "arguments": arguments, "status": "completed"}


def output_text(text: str) -> dict[str, Any]:
    return {"type": "message", "id": f"msg_{next(_ids)}", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def anthropic_message(content: list[dict[str, Any]], stop_reason: str | None = None,
                      model: str = "claude-test") -> dict[str, Any]:
    if stop_reason is None:
        stop_reason = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
    return {"id": f"msg_{next(_ids)}", "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": stop_reason, "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5}}


def tool_use(id: str, name: str, input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": id, "name": name, "input": input}


def openai_error(message: str, code: str = "invalid_request_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": code, "param": None, "code": None}}


def anthropic_error(message: str, kind: str = "invalid_request_error") -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}
