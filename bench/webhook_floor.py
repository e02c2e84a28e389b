"""What a webhook message costs at the least: the worker's HTTP/1.1 client alone, on kept
connections, against a receiver that does nothing but answer.

    .venv/bin/python -m bench.webhook_floor [--messages 20000] [--concurrency 1,20]
                                            [--repetitions 3] [--pin]

The receiver is a bare asyncio server in a process of its own (it reads each request by its
`content-length` and answers `200` with two bytes); this process runs uvloop, as `baton serve`
does, and sends `--messages` POSTs of a 640-byte body with the Standard Webhooks headers,
`--concurrency` at a time (one connection each), measured by `time.process_time` (this
process's CPU, the kernel's share of its system calls included):

- `client`: `http1.Client.post` with the request's start made once (`wire.head`), the
  signature made per message: the exchange itself;
- `attempt`: `attempt.send`, as the worker calls it: the client, its time bound, the route's
  check, the answer and its error text.

A WebSocket delivery (`bench.doors`) is one frame written on an open socket; a webhook message
is a request written, an answer read and the loop woken between, so `client` is what any
message costs before the worker's own work (the endpoint's turn, the render, the record).
`--pin` puts this process on the first CPU and the receiver on the second.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time

import uvloop

from baton.services.webhook_addresses import Policy
from baton.webhooks import attempt, signing

from .runs import table

RECEIVER = r"""
import asyncio, sys

class Answering(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport, self.buffer = transport, b""

    def data_received(self, data):
        self.buffer += data
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            head = self.buffer[:end].lower()
            length = int(head.split(b"content-length:")[1].split(b"\r\n")[0])
            if len(self.buffer) < end + 4 + length:
                return
            self.buffer = self.buffer[end + 4 + length:]
            self.transport.write(
                b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-type: text/plain\r\n\r\nok"
            )

async def main():
    server = await asyncio.get_running_loop().create_server(Answering, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()

asyncio.run(main())
"""
SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
BODY = b'{"type":"taskEvents","timestamp":"2026-12-05T12:00:00+00:00","data":' + b"0" * 570 + b"}"
POLICY = Policy(allow_private=True, allow_http=True)


async def measure(port: int, mode: str, messages: int, concurrency: int) -> tuple[float, float]:
    """CPU µs per message and messages per second."""
    client = attempt.client(concurrency)
    way = attempt.Way(f"http://127.0.0.1:{port}/hook", POLICY)

    async def go() -> bool:
        return True

    async def sender(n: int, count: int) -> None:
        for i in range(count):
            headers = signing.headers([SECRET], f"msg_{n}_{i}", int(time.time()), BODY)
            if mode == "attempt":
                answer = await attempt.send(client, way, headers, BODY, 10.0, go)
                if answer is None or not answer.delivered:
                    raise RuntimeError(f"not delivered: {answer}")
            else:
                route = await way.route()
                start = way.start(route, ())
                reply = await client.post(route.origin, start, headers.items(), BODY, 1024)
                if reply.status != 200:
                    raise RuntimeError(f"HTTP {reply.status}")

    try:
        await asyncio.gather(*(sender(n, 20) for n in range(concurrency)))  # connections open
        each = messages // concurrency
        cpu, started = time.process_time(), time.monotonic()
        await asyncio.gather(*(sender(n, each) for n in range(concurrency)))
        spent, took = time.process_time() - cpu, time.monotonic() - started
    finally:
        client.close()
    return spent * 1e6 / (each * concurrency), each * concurrency / took


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.webhook_floor", description=__doc__)
    p.add_argument("--messages", type=int, default=20000)
    p.add_argument("--concurrency", default="1,20")
    p.add_argument("--repetitions", type=int, default=3)
    p.add_argument("--pin", action="store_true")
    args = p.parse_args(argv)
    levels = [int(c) for c in args.concurrency.split(",")]
    if args.repetitions < 1 or min(levels) < 1 or args.messages < max(levels):
        p.error("--repetitions and each concurrency at least 1, --messages at least the most")
    receiver = subprocess.Popen([sys.executable, "-c", RECEIVER], stdout=subprocess.PIPE, text=True)
    try:
        assert receiver.stdout is not None
        port = int(receiver.stdout.readline())
        if args.pin and (os.cpu_count() or 1) > 1:
            os.sched_setaffinity(0, {0})
            os.sched_setaffinity(receiver.pid, {1})
        rows = []
        for concurrency in levels:
            figures: dict[str, list[tuple[float, float]]] = {"client": [], "attempt": []}
            for _ in range(args.repetitions):  # the modes take turns
                for mode, found in figures.items():
                    found.append(uvloop.run(measure(port, mode, args.messages, concurrency)))
            for mode, found in figures.items():
                cpu = [c for c, _ in found]
                rows.append(
                    {
                        "mode": mode,
                        "concurrency": concurrency,
                        "CPU µs/message": statistics.median(cpu),
                        "min-max": f"{min(cpu):.1f}-{max(cpu):.1f}",
                        "messages/s": round(statistics.median(r for _, r in found)),
                    }
                )
    finally:
        receiver.kill()
        receiver.wait()
        if receiver.stdout is not None:
            receiver.stdout.close()
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
