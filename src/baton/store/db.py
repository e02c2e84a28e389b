"""Engine creation and database URLs."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine


def sqlalchemy_url(url: str) -> str:
    """`postgresql://…` or `postgres://…` -> SQLAlchemy's `postgresql+asyncpg://…`."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgres", "postgresql", "postgresql+asyncpg"):
        raise ValueError(f"unsupported database URL scheme {parts.scheme!r}")
    return urlunsplit(parts._replace(scheme="postgresql+asyncpg"))


def libpq_url(url: str) -> str:
    """The plain `postgresql://…` form asyncpg and broadcaster expect."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(scheme="postgresql"))


def create_engine(url: str, *, pool_size: int = 10) -> AsyncEngine:
    return create_async_engine(
        sqlalchemy_url(url),
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_pre_ping=True,
    )
