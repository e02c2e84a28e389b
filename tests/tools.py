"""Programs some tests need beyond Python: without one a test skips on a developer's machine,
and fails under CI (`CI=true`), where `.ci/run` installs them and a skip would hide a gap."""

from __future__ import annotations

import os
import shutil

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1", "yes")


def missing(what: str, install: str) -> None:
    """Skip (or, under CI, fail) for want of `what`; `install` says how to get it."""
    message = f"{what} is not installed ({install})"
    if in_ci():
        pytest.fail(f"{message}; .ci/run installs it")
    pytest.skip(message)


def require(program: str, install: str) -> str:
    """The path of `program`, or a skip (a failure under CI) saying how to install it."""
    path = shutil.which(program)
    if path is None:
        missing(program, install)
    assert path is not None
    return path
