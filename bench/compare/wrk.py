"""The load generator: wrk (compiled; a Python client would saturate these cores first), with a
Lua script per workload and target that fills in each request's value, counts answers that are
not the expected success, and prints one JSON line when done."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from .workloads import MARK, Values

RESULT_PREFIX = "BENCH_RESULT "

# wrk threads for each concurrency: one thread drives one connection; for 32 connections two
# threads keep up with any of the targets while leaving the cores to the servers.
THREADS = {1: 1}
DEFAULT_THREADS = 2


def threads_for(concurrency: int) -> int:
    return THREADS.get(concurrency, min(DEFAULT_THREADS, concurrency))


def ensure_wrk() -> str:
    """The path of wrk, installing Debian's package when it is missing; exits if that fails."""
    found = shutil.which("wrk")
    if found:
        return found
    print("wrk is missing: installing it with apt-get install -y wrk", file=sys.stderr)
    done = subprocess.run(
        "apt-get install -y wrk || (apt-get update && apt-get install -y wrk)",
        shell=True,
        capture_output=True,
        text=True,
    )
    found = shutil.which("wrk")
    if done.returncode != 0 or not found:
        raise SystemExit(f"bench.compare: could not install wrk (apt-get exit {done.returncode})")
    return found


def _lua_string(text: str) -> str:
    return json.dumps(text)  # a JSON string literal is a valid Lua string literal here


def script(body: str, token: str, values: Values, expect: str) -> str:
    """The Lua for one measurement: `body` with MARK replaced per request."""
    before, after = body.split(json.dumps(MARK), 1)
    items = ", ".join(_lua_string(v) for v in values.items)
    return f"""
local before, after = {_lua_string(before)}, {_lua_string(after)}
local kind, prefix, first, count = {_lua_string(values.kind)}, {_lua_string(values.prefix)}, \
{values.first}, {values.count}
local items = {{ {items} }}
local expect = {_lua_string(expect)}
local threads = {{}}
local serial = 0

function setup(thread)
  thread:set("number", serial)
  serial = serial + 1
  table.insert(threads, thread)
end

function init(args)
  counter = 0
  bad = 0
  sample = ""
  total = tonumber(args[1])
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Authorization"] = "Bearer {token}"
end

local function value()
  local v
  if kind == "cycle" then
    v = items[(counter + number * 7) % #items + 1]
  elseif kind == "range" then
    local share = math.floor(count / total)
    v = string.format("%s%08d", prefix, first + number * share + counter % share)
  else
    v = string.format("%st%dn%d", prefix, number, counter)
  end
  counter = counter + 1
  return v
end

function request()
  return wrk.format(nil, nil, nil, before .. '"' .. value() .. '"' .. after)
end

function response(status, headers, body)
  if status ~= 200 or not string.find(body, expect, 1, true)
      or string.find(body, '"errors"', 1, true) then
    bad = bad + 1
    if sample == "" then
      -- printable ASCII only, quotes and backslashes escaped: a JSON string's content
      sample = string.sub(status .. " " .. body, 1, 300):gsub("[^%w%p ]", " ")
        :gsub("\\\\", "\\\\\\\\"):gsub('"', '\\\\"')
    end
  end
end

function done(summary, latency, requests)
  local errors, sample_out = 0, ""
  for _, t in ipairs(threads) do
    errors = errors + t:get("bad")
    local s = t:get("sample")
    if sample_out == "" and s ~= nil then sample_out = s end
  end
  local e = summary.errors
  io.write(string.format(
    '{RESULT_PREFIX}{{"requests": %d, "duration_us": %d, "p50_us": %d, "p99_us": %d, ' ..
    '"bad": %d, "socket_errors": %d, "status_errors": %d, "sample": "%s"}}\\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    errors, e.connect + e.read + e.write + e.timeout, e.status, sample_out))
end
"""


@dataclass(frozen=True)
class WrkResult:
    requests: int
    seconds: float
    p50_ms: float
    p99_ms: float
    errors: int
    sample: str  # the first bad answer, for the log

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


def parse(output: str) -> WrkResult:
    """The result line the script's `done()` prints."""
    for line in output.splitlines():
        if line.startswith(RESULT_PREFIX):
            raw = json.loads(line[len(RESULT_PREFIX) :])
            return WrkResult(
                requests=raw["requests"],
                seconds=raw["duration_us"] / 1e6,
                p50_ms=raw["p50_us"] / 1000,
                p99_ms=raw["p99_us"] / 1000,
                # a bad answer that is also a non-2xx status is counted once
                errors=max(raw["bad"], raw["status_errors"]) + raw["socket_errors"],
                sample=raw["sample"],
            )
    raise RuntimeError(f"wrk printed no result:\n{output[-2000:]}")


def run(
    wrk: str,
    url: str,
    lua: str,
    folder: Path,
    *,
    concurrency: int,
    seconds: float,
) -> WrkResult:
    threads = threads_for(concurrency)
    path = folder / "load.lua"
    path.write_text(lua)
    command = [
        wrk,
        f"-t{threads}",
        f"-c{concurrency}",
        f"-d{max(1, round(seconds))}s",
        "--timeout",
        "10s",
        "-s",
        str(path),
        url,
        "--",
        str(threads),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 60)
    if done.returncode != 0:
        raise RuntimeError(f"wrk failed ({done.returncode}): {done.stderr.strip()[-1000:]}")
    return parse(done.stdout)
