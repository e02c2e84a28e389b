"""The `baton` command as a user runs it: help, version, one-line errors, token management."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import asyncpg  # type: ignore[import-untyped]
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from baton.settings import VARIABLES
from baton.store.db import libpq_url
from baton.store.embedded import create_database
from tests.helpers import drop_database


def baton(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "baton.cli", *args],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


def no_database_env() -> dict[str, str]:
    """The environment of a newcomer who set nothing: the embedded database, found or not."""
    return {
        k: v for k, v in os.environ.items() if k not in ("BATON_DATABASE_URL", "BATON_DATA_DIR")
    }


def baton_here(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "baton.cli", *args],
        env=no_database_env(),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


def test_version() -> None:
    done = baton("--version")
    assert done.returncode == 0
    assert re.fullmatch(r"baton \d+\.\d+\.\d+\S*\n", done.stdout)


def test_serve_help_lists_defaults_and_every_variable() -> None:
    done = baton("serve", "--help")
    assert done.returncode == 0
    assert "(default: 127.0.0.1)" in done.stdout and "(default: 8000)" in done.stdout
    for variable in VARIABLES:
        assert variable.name in done.stdout


def test_serve_help_says_each_default_once_and_that_it_stays_in_the_foreground() -> None:
    done = baton("serve", "--help")
    options = done.stdout.split("options:", 1)[1].split("environment", 1)[0]
    # One block per option: its line and the indented lines that continue its help.
    blocks = re.split(r"\n(?=  -)", options.strip())
    assert len(blocks) == 6, blocks
    for block in blocks:
        assert block.count("default") <= 1, block
    workers = next(b for b in blocks if "--workers" in b)
    assert workers.count("(default: 1)") == 1, workers
    assert "default" not in next(b for b in blocks if "--access-log" in b)
    assert "default" not in next(b for b in blocks if "--reuse-port" in b)
    assert "foreground until Ctrl-C or SIGTERM" in " ".join(done.stdout.split())


def test_reuse_port_lets_processes_share_an_address_and_only_then() -> None:
    from baton.cli import _bind

    first = _bind("127.0.0.1", 0, "--port", reuse_port=True)
    port = first.getsockname()[1]
    try:
        second = _bind("127.0.0.1", port, "--port", reuse_port=True)
        second.close()
        with pytest.raises(OSError, match=r"cannot listen on 127\.0\.0\.1"):
            _bind("127.0.0.1", port, "--port").close()
    finally:
        first.close()


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"BATON_DATABASE_URL": "mysql://nope"}, "BATON_DATABASE_URL"),
        ({"BATON_DATABASE_URL": "postgresql://postgres@127.0.0.1:1/x"}, "BATON_DATABASE_URL"),
        ({"BATON_BROADCAST_URL": "kafka://x"}, "BATON_BROADCAST_URL"),
        ({"BATON_BROADCAST_URL": "redis://127.0.0.1:1/0"}, "BATON_BROADCAST_URL"),
        ({"BATON_DATA_DIR": "/dev/null", "BATON_DATABASE_URL": ""}, "BATON_DATA_DIR"),
        ({"BATON_POLL_SECONDS": "often"}, "BATON_POLL_SECONDS"),
    ],
)
def test_a_configuration_error_is_one_line_and_exit_code_2(
    database_url: str, env: dict[str, str], variable: str
) -> None:
    done = baton("migrate", env={"BATON_DATABASE_URL": database_url, **env})
    assert done.returncode == 2, done.stderr
    problems = [
        line for line in done.stderr.splitlines() if not line.startswith("baton: database:")
    ]
    assert len(problems) == 1, done.stderr
    assert problems[0].startswith(f"baton: {variable}: ")
    assert "Traceback" not in done.stderr


def test_token_commands_say_which_database_and_never_print_a_secret(
    database_url: str, engine: AsyncEngine
) -> None:
    env = {"BATON_DATABASE_URL": database_url}
    created = baton("token", "create", "--principal", "clilist/a", "--expires-in", "12h", env=env)
    assert created.returncode == 0, created.stderr
    token = created.stdout.strip()
    assert created.stdout == token + "\n" and token.startswith("baton_")
    assert created.stderr.startswith("baton: database: postgresql://")

    listed = baton("token", "list", env=env)
    assert listed.returncode == 0, listed.stderr
    assert token not in listed.stdout
    header, *rows = listed.stdout.splitlines()
    assert header.split()[:4] == ["ID", "TOKEN", "PRINCIPAL", "KIND"]
    mine = [row for row in rows if "clilist/a" in row][-1]
    token_id = mine.split()[0]

    revoked = baton("token", "revoke", token_id, env=env)
    assert revoked.returncode == 0, revoked.stderr
    again = [
        r
        for r in baton("token", "list", env=env).stdout.splitlines()
        if r.startswith(token_id + " ")
    ]
    assert again and again[0].rstrip().split()[-1] != "-"  # the REVOKED column is filled


def test_two_tokens_of_one_principal_are_told_apart_to_revoke_one(
    database_url: str, engine: AsyncEngine
) -> None:
    env = {"BATON_DATABASE_URL": database_url}
    minted = []
    for _ in range(2):  # the same principal, the same minute
        created = baton("token", "create", "--principal", "clitwins/a", env=env)
        assert created.returncode == 0, created.stderr
        said = re.search(
            r"^baton: token (\d+) \((baton_\S{6})…\) for clitwins/a; ", created.stderr, re.M
        )
        assert said is not None, created.stderr
        token = created.stdout.strip()
        assert token.startswith(said[2]) and token != said[2]
        minted.append((said[1], said[2], token))
    (first_id, first_prefix, first), (second_id, second_prefix, second) = minted
    assert first_id != second_id and first_prefix != second_prefix

    def rows() -> dict[str, list[str]]:
        listed = baton("token", "list", env=env)
        assert listed.returncode == 0, listed.stderr
        assert first not in listed.stdout and second not in listed.stdout
        return {row.split()[0]: row.split() for row in listed.stdout.splitlines()[1:]}

    before = rows()
    assert before[first_id][1:3] == [f"{first_prefix}…", "clitwins/a"]
    assert before[second_id][1:3] == [f"{second_prefix}…", "clitwins/a"]

    # The holder of the second token finds its row by the prefix and revokes that one alone.
    mine = next(i for i, row in before.items() if second.startswith(row[1].rstrip("…")))
    assert baton("token", "revoke", mine, env=env).returncode == 0
    after = rows()
    assert after[second_id][-1] != "-" and after[first_id][-1] == "-"


@pytest.mark.parametrize("bad", ["x1", "-1", "1.0", "\u0661", "\uff11"])
def test_revoke_takes_only_ascii_digits(bad: str) -> None:
    done = baton("token", "revoke", bad, env={"BATON_DATABASE_URL": "postgresql://h/x"})
    assert done.returncode == 2
    assert "token id" in done.stderr


@pytest.mark.parametrize("name", ["admin", "system", "admin/bot", "system/x"])
def test_reserved_names_cannot_get_tokens(name: str) -> None:
    done = baton(
        "token", "create", "--principal", name, env={"BATON_DATABASE_URL": "postgresql://h/x"}
    )
    assert done.returncode == 2
    assert "reserved" in done.stderr


def test_a_command_run_below_the_data_dir_uses_it(tmp_path: Path) -> None:
    (tmp_path / ".baton" / "pgdata").mkdir(parents=True)
    below = tmp_path / "src" / "deep"
    below.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k not in ("BATON_DATABASE_URL", "BATON_DATA_DIR")}
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from baton.settings import Settings; print(Settings.from_env().data_dir)",
        ],
        env=env,
        cwd=below,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.strip() == str(tmp_path / ".baton"), done.stderr


def test_token_commands_refuse_a_folder_with_no_database_and_create_nothing(
    tmp_path: Path,
) -> None:
    """In a folder with no `.baton` (nor one above), minting would make a new, empty database
    that no running server uses: refused in one line, and no `.baton` appears."""
    for args in (("token", "create", "--principal", "alice"), ("token", "list")):
        done = baton_here(*args, cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        assert done.stdout == ""
        lines = done.stderr.splitlines()
        assert len(lines) == 1, done.stderr
        assert lines[0].startswith(f"baton: BATON_DATA_DIR: no database in {tmp_path / '.baton'}")
        assert "nothing was created" in lines[0]
        assert ("--create" in lines[0]) == (args[1] == "create")
    assert not (tmp_path / ".baton").exists()


def test_create_mints_into_a_new_database_and_says_so(tmp_path: Path) -> None:
    created = baton_here("token", "create", "--principal", "alice", "--create", cwd=tmp_path)
    assert created.returncode == 0, created.stderr
    assert created.stdout.startswith("baton_") and created.stdout.count("\n") == 1
    assert "(BATON_DATA_DIR unset; set it to keep one database for every directory, new)" in (
        created.stderr
    )
    assert "--create: the token is in this database" in created.stderr

    # Now there is one: the commands use it, and say where they found it.
    here = baton_here("token", "list", cwd=tmp_path)
    assert here.returncode == 0, here.stderr
    assert "found in the working directory" in here.stderr
    assert "alice" in here.stdout
    below = tmp_path / "src"
    below.mkdir()
    deeper = baton_here("token", "list", cwd=below)
    assert deeper.returncode == 0, deeper.stderr
    assert "found above the working directory" in deeper.stderr
    assert f"in {tmp_path / '.baton'} " in deeper.stderr


async def test_token_create_refuses_a_database_url_no_server_has_used(server_url: str) -> None:
    name = f"baton_cli_new_{os.getpid()}"
    url = await create_database(server_url, name)
    try:
        env = {"BATON_DATABASE_URL": url}
        refused = baton("token", "create", "--principal", "alice", env=env)
        assert refused.returncode == 2, refused.stderr
        problem = refused.stderr.splitlines()[-1]
        assert problem.startswith("baton: BATON_DATABASE_URL: this database has no Baton tables")
        assert "--create" in problem
        conn = await asyncpg.connect(libpq_url(url))
        try:  # nothing was migrated into it
            assert await conn.fetchval("SELECT to_regclass('alembic_version')") is None
        finally:
            await conn.close()

        created = baton("token", "create", "--principal", "alice", "--create", env=env)
        assert created.returncode == 0, created.stderr
        assert created.stdout.startswith("baton_")
    finally:
        await drop_database(server_url, name)
