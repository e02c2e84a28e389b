"""Baton's own spans, at no cost while tracing is off.

Code below the doors marks a step with `with span("baton.move") as s:`. While no tracer is
installed (the default: `OTEL_*` configures no traces) `span` returns one shared do-nothing
context manager whose `as` value is None, so a step costs a function call and a `with`, and
nothing of OpenTelemetry is imported or called; attributes are set only `if s is not None`.
`baton.telemetry.tracing` installs a tracer when traces are configured.

Work that one request hands to another task (the MCP SDK runs a session's handlers in the
session's task) resumes the request's trace there with `carry()` and `resumed()`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, Tracer

Attribute = str | int | float | bool

_NOOP: AbstractContextManager[None] = nullcontext()
_tracer: Tracer | None = None
_current: Callable[[], Span] | None = None  # opentelemetry.trace.get_current_span, once on


def install(tracer: Tracer) -> None:
    """From now on, `span` starts real spans with `tracer` (`baton.telemetry.tracing`)."""
    global _tracer, _current
    from opentelemetry.trace import get_current_span

    _tracer, _current = tracer, get_current_span


def uninstall() -> None:
    """Back to no spans (a process that set tracing up for a test)."""
    global _tracer, _current
    _tracer = _current = None


def enabled() -> bool:
    return _tracer is not None


def span(name: str) -> AbstractContextManager[Span | None]:
    """A span named `name`, child of the current one, for the `with` block (None: off)."""
    tracer = _tracer
    if tracer is None:
        return _NOOP
    return tracer.start_as_current_span(name)


def root(name: str, attributes: dict[str, Attribute]) -> AbstractContextManager[Span | None]:
    """A span that starts a trace of its own, whatever is current (work no request asked for:
    a webhook delivery)."""
    tracer = _tracer
    if tracer is None:
        return _NOOP
    from opentelemetry.context import Context

    return tracer.start_as_current_span(name, context=Context(), attributes=attributes)


def annotate(key: str, value: Attribute) -> None:
    """Set an attribute on the current span, if tracing is on."""
    if _current is not None:
        _current().set_attribute(key, value)


def ids() -> tuple[str, str] | None:
    """The current trace and span ids in hex, as log lines carry them (None: off or none)."""
    if _current is None:
        return None
    context = _current().get_span_context()
    if not context.is_valid:
        return None
    return format(context.trace_id, "032x"), format(context.span_id, "016x")


def carry() -> Context | None:
    """The current trace context, to resume in another task (None while tracing is off)."""
    if _tracer is None:
        return None
    from opentelemetry.context import get_current

    return get_current()


@contextmanager
def resumed(carried: Any) -> Iterator[None]:
    """Run the block in `carried`, a context from `carry()` (nothing to do for None)."""
    if carried is None or _tracer is None:
        yield
        return
    from opentelemetry.context import attach, detach

    token = attach(carried)
    try:
        yield
    finally:
        detach(token)
