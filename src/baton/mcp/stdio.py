"""`baton mcp`: the MCP door over stdio, for clients that launch a local command.

It talks to a running Baton (`BATON_URL`, with the token in `BATON_TOKEN`) over Streamable
HTTP and serves the same tools and resources on its stdin and stdout, one to one: the list, the
calls, their results and refusals are the server's, so authorization, validation and events stay
in the one implementation there. Resource subscriptions are forwarded, and the server's
`notifications/resources/updated` relayed to the client. Logs go to stderr.

When that Baton cannot be used (not reached, the token refused), the client's `initialize` is
answered with a JSON-RPC error naming the cause and the setting, and the command ends as a bad
setting does (one line on stderr, exit 2); when it goes away later, the command ends with one
line naming it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import queue
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp.client.session import IncomingMessage
from mcp.client.streamable_http import streamable_http_client
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.session import ServerSession
from mcp.server.stdio import stdio_server
from mcp.shared._httpx_utils import (
    MCP_DEFAULT_SSE_READ_TIMEOUT,
    MCP_DEFAULT_TIMEOUT,
    create_mcp_http_client,
)
from mcp.shared.exceptions import MCPError

from baton.mcp.server import INSTRUCTIONS
from baton.settings import ConfigError
from mcp import Client

log = logging.getLogger("baton.mcp")

CONNECT_SECONDS = 10.0
# A client sends `initialize` as soon as it has started the command; a refusal waits this long
# for it before the command ends.
ANSWER_SECONDS = 10.0
MAX_LINE_BYTES = 1024 * 1024
LINES_WAITING = 16  # lines read from stdin ahead of the server


def baton_version() -> str:
    try:
        return version("baton")
    except PackageNotFoundError:  # a source tree that was never installed
        return "unknown"


class Relay:
    """Forwards each request to the upstream client; relays resource updates back."""

    def __init__(self) -> None:
        self.upstream: Client | None = None
        # Who subscribed to what, to tell them when the server says it changed.
        self.subscribers: dict[str, set[ServerSession]] = {}

    @property
    def client(self) -> Client:
        assert self.upstream is not None, "the upstream client is connected first"
        return self.upstream

    async def on_upstream(self, message: IncomingMessage) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            uri = str(message.params.uri)
            for session in list(self.subscribers.get(uri, ())):
                await session.send_resource_updated(uri)
        elif isinstance(message, Exception):
            log.warning("baton mcp: the server's stream failed: %s", message)

    def server(self) -> Server[Any]:
        async def list_tools(
            ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
        ) -> types.ListToolsResult:
            return await self.client.list_tools(cursor=params.cursor if params else None)

        async def call_tool(
            ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
        ) -> types.CallToolResult:
            return await self.client.call_tool(params.name, params.arguments)

        async def list_resources(
            ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
        ) -> types.ListResourcesResult:
            return await self.client.list_resources(cursor=params.cursor if params else None)

        async def templates(
            ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
        ) -> types.ListResourceTemplatesResult:
            return await self.client.list_resource_templates(
                cursor=params.cursor if params else None
            )

        async def read(
            ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
        ) -> types.ReadResourceResult:
            return await self.client.read_resource(params.uri)

        async def subscribe(
            ctx: ServerRequestContext[Any, Any], params: types.SubscribeRequestParams
        ) -> types.EmptyResult:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the handshake era's subscribe, on purpose
                await self.client.subscribe_resource(params.uri)
            self.subscribers.setdefault(params.uri, set()).add(ctx.session)
            return types.EmptyResult()

        async def unsubscribe(
            ctx: ServerRequestContext[Any, Any], params: types.UnsubscribeRequestParams
        ) -> types.EmptyResult:
            self.subscribers.pop(params.uri, None)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                await self.client.unsubscribe_resource(params.uri)
            return types.EmptyResult()

        return Server(
            "baton",
            version=baton_version(),
            title="Baton",
            instructions=INSTRUCTIONS,
            on_list_tools=list_tools,
            on_call_tool=call_tool,
            on_list_resources=list_resources,
            on_list_resource_templates=templates,
            on_read_resource=read,
            on_subscribe_resource=subscribe,
            on_unsubscribe_resource=unsubscribe,
        )


async def serve(url: str, token: str) -> None:
    """Serve stdin/stdout until the client closes them, through the Baton at `url`.

    `Unusable` when that Baton cannot be used (not reached, the token refused), before stdin is
    read: `run` then answers the client with it."""
    endpoint = url.rstrip("/") + "/mcp"
    relay = Relay()
    timeout = httpx2.Timeout(
        MCP_DEFAULT_TIMEOUT, connect=CONNECT_SECONDS, read=MCP_DEFAULT_SSE_READ_TIMEOUT
    )
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}, timeout=timeout)
    # The handshake era upstream: one session whose stream carries resource updates.
    client = Client(
        streamable_http_client(endpoint, http_client=http),
        mode="legacy",
        message_handler=relay.on_upstream,
        cache=None,
        # A relayed request whose server went away is answered with an error, not waited on.
        read_timeout_seconds=MCP_DEFAULT_TIMEOUT,
    )
    try:
        async with contextlib.AsyncExitStack() as stack:
            await stack.enter_async_context(http)
            try:
                relay.upstream = await stack.enter_async_context(client)
            except Exception as exc:
                raise unusable(exc, endpoint) from None
            server = relay.server()
            stdin: Any = _Lines(sys.stdin.fileno())  # read as the SDK reads a text file
            async with stdio_server(stdin=stdin) as (read_stream, write_stream):
                options = server.create_initialization_options()
                await server.run(read_stream, write_stream, options)
    except Unusable:
        raise
    except Exception as exc:  # the upstream's transport failed: the server went away
        cause = next(_leaves(exc), exc)
        if isinstance(cause, httpx2.TransportError):
            raise Lost(f"lost the Baton at {endpoint}: {cause or type(cause).__name__}") from None
        raise


class Lost(Exception):
    """The Baton `baton mcp` relays to stopped answering while it served."""


class _Lines:
    """stdin as the SDK's stdio server reads it (`async for line`), read by a daemon thread: a
    read the client never satisfies neither blocks cancellation (as a read in an event loop's
    worker thread does) nor keeps the command alive."""

    def __init__(self, fd: int) -> None:
        self._lines: asyncio.Queue[str | None] = asyncio.Queue(maxsize=LINES_WAITING)
        loop = asyncio.get_running_loop()

        def read() -> None:
            pending = b""
            try:
                while len(pending) <= MAX_LINE_BYTES and (chunk := os.read(fd, 65536)):
                    *complete, pending = (pending + chunk).split(b"\n")
                    for line in complete:
                        text = line.decode("utf-8", errors="replace") + "\n"
                        asyncio.run_coroutine_threadsafe(self._lines.put(text), loop).result()
                asyncio.run_coroutine_threadsafe(self._lines.put(None), loop).result()
            except (OSError, RuntimeError):  # stdin failed, or the loop is gone: nothing to do
                return

        threading.Thread(target=read, name="baton-mcp-stdin", daemon=True).start()

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        line = await self._lines.get()
        if line is None:
            raise StopAsyncIteration
        return line


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc


class Unusable(ConfigError):
    """The Baton at BATON_URL cannot be used as configured; `code` is Baton's error code."""

    def __init__(self, variable: str, problem: str, code: str = "unavailable") -> None:
        super().__init__(variable, problem)
        self.code = code


def unusable(exc: Exception, endpoint: str) -> Unusable:
    """Why the Baton at `endpoint` cannot be used, naming the setting to change."""
    cause = next(_leaves(exc), exc)
    if isinstance(cause, MCPError):
        data = cause.error.data
        code = data.get("code") if isinstance(data, dict) else None
        message = cause.error.message
        if code in ("unauthenticated", "too_many_sessions"):
            return Unusable("BATON_TOKEN", f"{endpoint} refused it: {message}", code)
        if code == "unavailable":
            return Unusable("BATON_URL", f"{endpoint} cannot serve now: {message}")
        return Unusable("BATON_URL", f"{endpoint} does not answer as Baton does: {message}")
    if isinstance(cause, httpx2.TransportError):
        return Unusable("BATON_URL", f"cannot reach {endpoint}: {cause or type(cause).__name__}")
    return Unusable("BATON_URL", f"cannot use {endpoint}: {type(cause).__name__}: {cause}")


def refuse_client(problem: Unusable) -> None:
    """Answer the client's requests with `problem` until its `initialize` is answered, the
    client closes stdin, or `ANSWER_SECONDS` pass (a terminal sends nothing: not waited on).

    Plain blocking reads in a daemon thread: a read the client never satisfies must not keep
    the command from ending (an event loop's reader thread would be waited for)."""
    if sys.stdin is None or sys.stdin.isatty():
        return
    fd = sys.stdin.fileno()
    lines: queue.Queue[bytes | None] = queue.Queue()

    def read() -> None:
        pending = b""
        with contextlib.suppress(OSError):
            while len(pending) <= MAX_LINE_BYTES and (chunk := os.read(fd, 65536)):
                *complete, pending = (pending + chunk).split(b"\n")
                for line in complete:
                    lines.put(line)
        lines.put(None)

    threading.Thread(target=read, name="baton-mcp-refuse", daemon=True).start()
    error = types.ErrorData(
        code=types.INVALID_REQUEST,
        message=f"baton mcp: {problem}",
        data={"code": problem.code, "variable": problem.variable},
    )
    deadline = time.monotonic() + ANSWER_SECONDS
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            return
        if line is None:
            return
        try:
            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError:
            continue
        if not isinstance(message, types.JSONRPCRequest):
            continue
        answer = types.JSONRPCError(jsonrpc="2.0", id=message.id, error=error)
        sys.stdout.buffer.write(answer.model_dump_json(by_alias=True, exclude_unset=True).encode())
        sys.stdout.buffer.write(b"\n")
        sys.stdout.buffer.flush()
        if message.method == "initialize":
            return


def run(url: str, token: str) -> None:
    """`baton mcp`: `Unusable` (a `ConfigError`, one line and exit 2) once the client has been
    told why, when the Baton at `url` cannot be used; `Lost` when it went away while served."""
    # One INFO line per upstream request would drown what matters on the client's stderr.
    for noisy in ("httpx", "httpx2"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        anyio.run(serve, url, token)
    except Unusable as problem:
        refuse_client(problem)
        raise
