"""The `baton` command as a user runs it: help, version, one-line errors, token management."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from baton.settings import VARIABLES


def baton(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "baton.cli", *args],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
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


def test_token_commands_say_which_database_and_never_print_a_secret(database_url: str) -> None:
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
    assert header.split()[:3] == ["ID", "PRINCIPAL", "KIND"]
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
