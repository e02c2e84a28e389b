"""The seed's task object: its JSON Schema, the enums it names, and input checks derived from it.

Every bound (patterns, lengths, item counts, enums) comes from `task.schema.json`, the seed's
schema copied verbatim; nothing here restates a number from it.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterator, Mapping, Sequence
from enum import StrEnum
from functools import cache
from importlib import resources
from typing import Any, cast
from urllib.parse import urlsplit

from jsonschema import Draft202012Validator, FormatChecker, validators
from jsonschema.exceptions import ValidationError, best_match

from baton.errors import InvalidInput
from baton.protocol.handoff import TaskState, WaitingOn
from baton.protocol.schema_predicate import Unsupported, Valid, compile_schema


class DeliverableType(StrEnum):
    code = "code"
    doc = "doc"
    answer = "answer"
    screenshots = "screenshots"
    reviewed_pr = "reviewed_pr"
    design = "design"
    data = "data"
    other = "other"


class EvidenceKind(StrEnum):
    test_output = "test_output"
    screenshot = "screenshot"
    link = "link"
    pull_request = "pull_request"
    commit = "commit"
    note = "note"


class Provenance(StrEnum):
    agent_generated = "agent_generated"
    from_approved_context = "from_approved_context"
    owner_approved = "owner_approved"
    owner_instruction = "owner_instruction"


TASK_SCHEMA: dict[str, Any] = json.loads(
    resources.files("baton.protocol").joinpath("task.schema.json").read_text("utf-8")
)
_PROPS: dict[str, Any] = TASK_SCHEMA["properties"]


def _nullable(prop: Mapping[str, Any]) -> dict[str, Any]:
    """The non-null branch of an `anyOf: [X, null]` property."""
    return next(b for b in prop["anyOf"] if b.get("type") != "null")


PACKET_SCHEMA = _PROPS["packet"]
RESULT_SCHEMA = _nullable(_PROPS["result"])
CHECKPOINT_SCHEMA = _nullable(_PROPS["latest_checkpoint"])


@cache
def ecma_pattern(pattern: str) -> re.Pattern[str]:
    r"""A JSON Schema `pattern` with the meaning ECMA-262 gives it, which Python's `re` does
    not: `$` is the end of the string (Python's also matches before a final newline, which let
    `"id\n"` through) and `\d`, `\w`, `\s` are ASCII (Python's match any script's digits)."""
    out: list[str] = []
    escaped = in_class = False
    for char in pattern:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char == "$":
            out.append(r"\Z")
            continue
        out.append(char)
    return re.compile("".join(out), re.ASCII)


HANDLE_PATTERN = ecma_pattern(_PROPS["requester"]["pattern"])
PROJECT_PATTERN = ecma_pattern(_PROPS["project"]["pattern"])
OWNER_PATTERN = PROJECT_PATTERN  # an owner handle has the project's shape
# Owner names that would read like Baton's own actors in events (`actor: "admin"`, `"system"`),
# and the empty name: no principal, requester, assignee or gate-rule owner may be called so.
RESERVED_OWNERS = frozenset({"admin", "system", ""})

# The Python enums must be the schema's enums, in the schema's order.
assert [s.value for s in TaskState] == _PROPS["state"]["enum"]
assert [w.value for w in WaitingOn] == _nullable(_PROPS["waiting_on"])["enum"]
assert [d.value for d in DeliverableType] == PACKET_SCHEMA["properties"]["deliverable_type"]["enum"]
assert [k.value for k in EvidenceKind] == (
    RESULT_SCHEMA["properties"]["evidence"]["items"]["properties"]["kind"]["enum"]
)
assert [p.value for p in Provenance] == RESULT_SCHEMA["properties"]["provenance"]["enum"]

_formats = FormatChecker()


@_formats.checks("uri", raises=ValueError)
def _is_uri(value: object) -> bool:
    # RFC 3986 absolute URI: a scheme, and something after it. jsonschema skips "uri" unless an
    # extra package is installed, so the check is ours.
    if not isinstance(value, str) or any(c.isspace() for c in value):
        return False
    parts = urlsplit(value)
    return bool(re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", parts.scheme)) and bool(
        parts.netloc or parts.path
    )


def _pattern(
    validator: Any, pattern: str, instance: object, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    if isinstance(instance, str) and not ecma_pattern(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


# The 2020-12 validator with `pattern` read as ECMA-262 reads it (the dialect JSON Schema names).
_Validator = validators.extend(Draft202012Validator, {"pattern": _pattern})  # type: ignore[no-untyped-call]


def _schema(name: str) -> Mapping[str, Any]:
    wholes = {
        "task": TASK_SCHEMA,
        "packet": PACKET_SCHEMA,
        "result": RESULT_SCHEMA,
        "checkpoint": CHECKPOINT_SCHEMA,
    }
    found = wholes[name] if name in wholes else _PROPS[name.removeprefix("property:")]
    return cast(Mapping[str, Any], found)


@cache
def _validator(name: str) -> Any:
    return _Validator(_schema(name), format_checker=_formats)


@cache
def _valid(name: str) -> Valid:
    """Whether a value is valid against schema `name`, compiled (see `schema_predicate`), or
    `_validator`'s answer when the schema needs more than the compiler knows."""
    try:
        return compile_schema(
            _schema(name), _formats.conforms, lambda pattern: ecma_pattern(pattern).search
        )
    except Unsupported:
        return cast(Valid, _validator(name).is_valid)


def camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(part.title() for part in rest)


def field_path(prefix: str, path: Sequence[str | int]) -> str:
    """`("acceptance_criteria", 2)` under `packet` -> `packet.acceptanceCriteria[2]`."""
    out = prefix
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + camel(part)
    return out


def _explain(error: ValidationError) -> str:
    v = error.validator
    if v == "maxLength":
        return f"must be at most {error.validator_value} characters"
    if v == "minLength":
        return f"must be at least {error.validator_value} character(s)"
    if v == "maxItems":
        return f"must have at most {error.validator_value} items"
    if v == "minItems":
        return f"must have at least {error.validator_value} item(s)"
    if v == "pattern":
        return f"must match {error.validator_value}"
    if v == "enum":
        return f"must be one of {', '.join(map(str, cast(list[Any], error.validator_value)))}"
    if v == "format":
        return f"must be a valid {error.validator_value}"
    return str(error.message)


def check(schema: str, value: object, field: str) -> None:
    """Raise `InvalidInput` naming the first offending field, or return."""
    if _valid(schema)(value):
        return
    error = best_match(_validator(schema).iter_errors(value))
    if error is None:
        return
    path = list(error.absolute_path)
    if error.validator == "required":
        missing = next(p for p in error.validator_value if p not in error.instance)
        path.append(missing)
    raise InvalidInput(field_path(field, path), _explain(error))


def check_string(value: str, pattern: re.Pattern[str], field: str, what: str) -> None:
    if not pattern.fullmatch(value):
        raise InvalidInput(field, f"must be {what} matching {pattern.pattern}")


def check_task_id(value: str, field: str = "id") -> None:
    check_property("id", value, field)


ID_MAX_LENGTH: int = _PROPS["id"]["maxLength"]
# Separates the owner from a client-supplied id. Owner handles never contain it, and the ids the
# server makes never do either, so the owner is always the text before the first one.
ID_SCOPE = "_"


def task_id_for(owner: str, client_id: str, field: str = "id") -> str:
    """The task id of a client-supplied id, scoped to the requester's owner: `owner_clientId`.

    Within one owner a client id stays the idempotency key; across owners the same client id
    names different tasks, so a hand-off can neither find out whether another owner used an id
    nor claim one in advance. The result still matches the task object's id pattern.
    """
    check_task_id(client_id, field)
    room = ID_MAX_LENGTH - len(owner) - len(ID_SCOPE)
    if len(client_id) > room:
        raise InvalidInput(
            field,
            f"must be at most {room} characters for owner {owner!r} (the task id is "
            f"'{owner}{ID_SCOPE}<id>', at most {ID_MAX_LENGTH} characters)",
        )
    return f"{owner}{ID_SCOPE}{client_id}"


def check_property(name: str, value: object, field: str) -> None:
    """Check one top-level property of the task object against its schema."""
    if _valid(f"property:{name}")(value):
        return
    error = best_match(_validator(f"property:{name}").iter_errors(value))
    if error is not None:
        raise InvalidInput(field, _explain(error))


def check_handle(value: str, field: str) -> None:
    check_string(value, HANDLE_PATTERN, field, "an agent handle owner/agent")
    check_not_reserved(value.split("/", 1)[0], field)


def check_owner(value: str, field: str = "owner") -> None:
    check_not_reserved(value, field)
    check_string(value, OWNER_PATTERN, field, "an owner handle")


def check_not_reserved(owner: str, field: str) -> None:
    if owner in RESERVED_OWNERS:
        what = f"the owner name {owner!r} is" if owner else "an empty owner name is"
        raise InvalidInput(field, f"{what} reserved (admin, system and the empty name are)")


def check_project(value: str, field: str = "project") -> None:
    check_string(value, PROJECT_PATTERN, field, "a project name")


# --- Baton's rules beside the seed's schema -------------------------------------------------
# The schema above is the seed's, verbatim; these are checks Baton adds to what it allows.

# Links a board renders and a person clicks: only the web's own schemes (never `javascript:`,
# `data:`, `vbscript:` or `file:`), though the seed's `format: uri` admits any scheme.
WEB_SCHEMES = frozenset({"http", "https"})

# Characters that show nothing by themselves: whitespace and separators, controls, format
# characters (zero-width space and joiners, direction marks, the BOM, tags), combining marks
# with no base, and the letters and symbols that fonts draw blank (Hangul fillers, the blank
# Braille pattern).
_INVISIBLE_CATEGORIES = frozenset({"Zs", "Zl", "Zp", "Cc", "Cf", "Mn", "Me"})
_BLANK = frozenset("\u115f\u1160\u3164\uffa0\u2800")


def is_web_url(value: str) -> bool:
    parts = urlsplit(value)
    return parts.scheme.lower() in WEB_SCHEMES and bool(parts.netloc)


def check_evidence_urls(result: Mapping[str, Any], field: str = "result") -> None:
    """Each evidence `url` is an http(s) URL (checked after the schema, which made it a URI)."""
    for index, evidence in enumerate(result.get("evidence") or ()):
        url = evidence.get("url") if isinstance(evidence, Mapping) else None
        if isinstance(url, str) and not is_web_url(url):
            raise InvalidInput(
                field_path(field, ["evidence", index, "url"]),
                "must be an http or https URL (javascript:, data: and other schemes are refused)",
            )


def visible(value: str) -> bool:
    """Whether `value` has a character that shows something."""
    return any(
        c not in _BLANK and unicodedata.category(c) not in _INVISIBLE_CATEGORIES for c in value
    )


def check_visible(value: str, field: str) -> None:
    """A title a person reads: refused when made only of invisible characters."""
    if not visible(value):
        raise InvalidInput(
            field, "must have a visible character (not only spaces, zero-width or format ones)"
        )
