"""What turns logs to JSON and traces on: BATON_LOG_FORMAT and the standard OTEL_* variables,
checked at start like every other variable."""

from __future__ import annotations

import pytest

from baton.settings import ConfigErrors, Settings

BASE = {"BATON_DATABASE_URL": "postgresql://u@db/x"}


@pytest.mark.parametrize(
    ("environment", "exporters"),
    [
        ({}, ()),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, ("otlp",)),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://c.example/v1/traces"}, ("otlp",)),
        ({"OTEL_TRACES_EXPORTER": "console"}, ("console",)),
        ({"OTEL_TRACES_EXPORTER": "otlp, console"}, ("otlp", "console")),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, ()),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}, ()),
        # A protocol alone configures nothing, whatever it names (another service's setting).
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, ()),
    ],
)
def test_traces_are_off_unless_otel_variables_configure_them(
    environment: dict[str, str], exporters: tuple[str, ...]
) -> None:
    assert Settings.from_env({**BASE, **environment}).traces == exporters


def test_spans_go_to_the_traces_endpoint_or_the_endpoints_v1_traces() -> None:
    base = Settings.from_env({**BASE, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/"})
    assert base.otlp_traces_url == "http://c:4318/v1/traces"
    full = "http://c:4318/custom"
    own = Settings.from_env({**BASE, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": full})
    assert own.otlp_traces_url == full


def test_logs_are_text_unless_json_is_asked_for() -> None:
    assert Settings.from_env(BASE).log_format == "text"
    assert Settings.from_env({**BASE, "BATON_LOG_FORMAT": "JSON"}).log_format == "json"


@pytest.mark.parametrize(
    ("environment", "variable", "says"),
    [
        ({"BATON_LOG_FORMAT": "xml"}, "BATON_LOG_FORMAT", "text or json"),
        ({"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER", "otlp, console, none"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"}, "OTEL_EXPORTER_OTLP_ENDPOINT", "http"),
        (
            {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
            "OTEL_EXPORTER_OTLP_PROTOCOL",
            "http/protobuf",
        ),
        (
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json",
            },
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "http/protobuf",
        ),
        ({"OTEL_SDK_DISABLED": "maybe"}, "OTEL_SDK_DISABLED", "true or false"),
    ],
)
def test_a_setting_baton_cannot_honour_is_one_line_naming_it(
    environment: dict[str, str], variable: str, says: str
) -> None:
    with pytest.raises(ConfigErrors) as bad:
        Settings.from_env({**BASE, **environment})
    [error] = bad.value.errors
    assert error.variable == variable and says in str(error) and "\n" not in str(error)
