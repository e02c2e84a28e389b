"""Numbers read from text a client or an operator wrote."""

from __future__ import annotations

MAX_BIGINT = 2**63 - 1  # PostgreSQL's bigint: ids and event cursors


def ascii_int(text: str, maximum: int) -> int | None:
    """`text` as a whole number when it is ASCII digits only and at most `maximum`; else None.

    `str.isdigit` alone also takes superscripts and other scripts' digits. Leading zeros are
    allowed; the length is checked before converting, so 5,000 digits cost nothing."""
    if not (text.isascii() and text.isdigit()):
        return None
    digits = text.lstrip("0") or "0"
    if len(digits) > len(str(maximum)):
        return None
    value = int(digits)
    return value if value <= maximum else None
