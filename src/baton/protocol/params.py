"""A move's parameters, declared in the table so an API layer can build typed inputs from them.

Only `CHOICE` parameters may steer a move (through its guard or its effects): their values are a
finite enum, so the lifecycle can be explored exhaustively. The other kinds carry what the move
records (a reason, questions, a URL) and are checked for shape here.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, StrEnum
from urllib.parse import urlsplit

from baton.errors import InvalidInput


class Kind(StrEnum):
    TEXT = "text"  # a string with something besides whitespace
    TEXT_LIST = "text_list"  # a non-empty list of such strings
    URL = "url"  # an absolute http(s) URL
    CHOICE = "choice"  # one of `choices`, members of one enum
    OBJECT = "object"  # a structured value checked against its own schema elsewhere


def camel(name: str) -> str:
    """The input field's wire name: `waiting_on` -> `waitingOn`."""
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _text(value: object) -> bool:
    return isinstance(value, str) and bool(value.strip())


@dataclass(frozen=True)
class Param:
    name: str
    kind: Kind
    required: bool = True
    choices: tuple[Enum, ...] = ()
    description: str = ""

    @property
    def field(self) -> str:
        return camel(self.name)

    @property
    def enum(self) -> type[Enum]:
        """The enum a CHOICE parameter draws from."""
        return type(self.choices[0])

    def check(self, value: object) -> None:
        """Raise `InvalidInput` naming the field unless `value` fits; `None` means not given."""
        if value is None:
            if self.required:
                raise InvalidInput(self.field, "is required")
            return
        if self.kind is Kind.TEXT and not _text(value):
            raise InvalidInput(self.field, "must be non-empty text")
        if self.kind is Kind.TEXT_LIST and not (
            isinstance(value, list | tuple) and value and all(_text(v) for v in value)
        ):
            raise InvalidInput(self.field, "must be a non-empty list of non-empty texts")
        if self.kind is Kind.URL and not _is_web_url(value):
            raise InvalidInput(self.field, "must be an absolute http(s) URL")
        if self.kind is Kind.CHOICE and value not in self.choices:
            allowed = ", ".join(str(c.value) for c in self.choices)
            raise InvalidInput(self.field, f"must be one of {allowed}")

    def samples(self) -> tuple[object, ...]:
        """Values enough to explore every move this parameter can make.

        A choice tries every member of its enum, allowed or not (and absence, when optional);
        the other kinds cannot steer a move, so one well-formed value stands for all.
        """
        if self.kind is Kind.CHOICE:
            return (*self.enum, *((None,) if not self.required else ()))
        return (_SAMPLES[self.kind],)


_SAMPLES: dict[Kind, object] = {
    Kind.TEXT: "text",
    Kind.TEXT_LIST: ["text"],
    Kind.URL: "https://example.com/pull/1",
    Kind.OBJECT: {},
}


def _is_web_url(value: object) -> bool:
    if not isinstance(value, str) or any(c.isspace() for c in value):
        return False
    parts = urlsplit(value)
    return parts.scheme in ("http", "https") and bool(parts.netloc)
