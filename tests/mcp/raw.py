"""A `tools/call` written by hand: the body exactly as given, in the 2026-07-28 era (one POST, no
session), for what the SDK's client will not send (a lone surrogate cannot be encoded as UTF-8,
so it only travels as a JSON escape)."""

from __future__ import annotations

import json
from typing import Any

import httpx

VERSION = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def raw_client(url: str, token: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=url,
        timeout=60,
        headers={
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "MCP-Protocol-Version": VERSION,
            "Mcp-Method": "tools/call",
        },
    )


def body(name: str, arguments: Any) -> bytes:
    """A tools/call of `name`; JSON with ASCII escapes, so any string travels."""
    params = {"name": name, "arguments": arguments, "_meta": META}
    envelope = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    return json.dumps(envelope, separators=(",", ":")).encode()


async def call(http: httpx.AsyncClient, name: str, arguments: Any) -> dict[str, Any]:
    """The JSON-RPC answer (a `result` or an `error`) to calling `name` with `arguments`."""
    response = await http.post("/mcp", content=body(name, arguments), headers={"Mcp-Name": name})
    assert response.status_code == 200, (response.status_code, response.text[:500])
    text = response.text
    if response.headers["content-type"].startswith("text/event-stream"):
        text = next(
            line.removeprefix("data:") for line in text.splitlines() if line.startswith("data:")
        )
    answer: dict[str, Any] = json.loads(text)
    return answer


def tool_error(answer: dict[str, Any]) -> dict[str, Any]:
    """The Baton error a tool answered (the test fails on a JSON-RPC error or a success)."""
    assert "error" not in answer, answer["error"]
    result = answer["result"]
    assert result["isError"] is True, result
    error: dict[str, Any] = result["structuredContent"]
    return error
