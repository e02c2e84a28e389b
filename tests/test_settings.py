"""Configuration: every variable checked once, each problem one line naming the variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from baton.settings import VARIABLES, ConfigErrors, Settings, find_data_dir


def test_defaults() -> None:
    settings = Settings.from_env({"BATON_DATABASE_URL": "postgresql://u@db:5432/baton"})
    assert settings.database_url == "postgresql://u@db:5432/baton"
    assert settings.max_body_bytes == 1024 * 1024
    assert settings.ws_init_timeout == 10.0
    assert settings.token_check_seconds == 5.0
    assert settings.metrics_token is None and settings.metrics_address is None


def test_every_value_is_parsed() -> None:
    settings = Settings.from_env(
        {
            "BATON_DATABASE_URL": "postgres:///baton?host=/run/postgresql",
            "BATON_BROADCAST_URL": "redis://cache:6379/0",
            "BATON_LOG_LEVEL": "WARNING",
            "BATON_POLL_SECONDS": "0.5",
            "BATON_MAX_BODY_BYTES": "2048",
            "BATON_WS_INIT_TIMEOUT": "3",
            "BATON_MAX_UNAUTHENTICATED_SOCKETS": "7",
            "BATON_TOKEN_CHECK_SECONDS": "2",
            "BATON_METRICS_TOKEN": "s3cret",
            "BATON_METRICS_ADDRESS": "[::1]:9100",
        }
    )
    assert settings.log_level == "warning"
    assert settings.max_body_bytes == 2048
    assert settings.metrics_address == ("::1", 9100)


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("BATON_DATABASE_URL", "mysql://db/x", "postgresql://"),
        ("BATON_DATABASE_URL", "localhost:5432", "postgresql://"),
        ("BATON_DATABASE_URL", "postgresql://db:port/x", "not a valid URL"),
        ("BATON_DATABASE_URL", "postgresql://", "names no server"),
        ("BATON_BROADCAST_URL", "kafka://broker", "redis://"),
        ("BATON_LOG_LEVEL", "loud", "one of"),
        ("BATON_POLL_SECONDS", "soon", "a number"),
        ("BATON_POLL_SECONDS", "0", "between"),
        ("BATON_POLL_SECONDS", "nan", "between"),
        ("BATON_MAX_BODY_BYTES", "1.5", "whole number"),
        ("BATON_MAX_BODY_BYTES", "10", "between"),
        ("BATON_WS_INIT_TIMEOUT", "-1", "between"),
        ("BATON_MAX_UNAUTHENTICATED_SOCKETS", "0", "between"),
        ("BATON_TOKEN_CHECK_SECONDS", "1e9", "between"),
        ("BATON_METRICS_ADDRESS", "9100", "HOST:PORT"),
        ("BATON_METRICS_ADDRESS", "host:99999", "HOST:PORT"),
        ("BATON_METRICS_ADDRESS", "host:" + "9" * 5000, "HOST:PORT"),
        ("BATON_METRICS_ADDRESS", "host:\u0669\u0661\u0660\u0660", "HOST:PORT"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_variable(variable: str, value: str, says: str) -> None:
    env = {"BATON_DATABASE_URL": "postgresql://u@db/x", variable: value}
    with pytest.raises(ConfigErrors) as bad:
        Settings.from_env(env)
    [error] = bad.value.errors
    assert error.variable == variable
    assert str(error).startswith(f"{variable}: ") and says in str(error)
    assert "\n" not in str(error)


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(ConfigErrors) as bad:
        Settings.from_env({"BATON_LOG_LEVEL": "x", "BATON_POLL_SECONDS": "y"})
    assert {e.variable for e in bad.value.errors} == {"BATON_LOG_LEVEL", "BATON_POLL_SECONDS"}


def test_an_unusable_data_dir_is_refused_only_without_a_database_url(tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("")
    for bad in (a_file, tmp_path / "with space"):
        with pytest.raises(ConfigErrors) as refused:
            Settings.from_env({"BATON_DATA_DIR": str(bad)})
        assert refused.value.errors[0].variable == "BATON_DATA_DIR"
    Settings.from_env({"BATON_DATA_DIR": str(a_file), "BATON_DATABASE_URL": "postgresql://h/x"})


def test_the_nearest_data_dir_above_is_found(tmp_path: Path) -> None:
    (tmp_path / ".baton" / "pgdata").mkdir(parents=True)
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert find_data_dir(deep) == tmp_path / ".baton"
    assert find_data_dir(tmp_path.parent) is None or find_data_dir(tmp_path.parent) != tmp_path


def test_every_variable_is_documented_in_the_readme() -> None:
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    for variable in VARIABLES:
        assert f"`{variable.name}`" in readme, variable.name
