"""Configuration, read once from the environment."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Settings:
    database_url: str | None
    data_dir: Path
    broadcast_url: str | None
    log_level: str
    poll_seconds: float = 1.0
    max_body_bytes: int = 1024 * 1024
    run_lease_seconds: float = 60.0

    @classmethod
    def from_env(cls) -> Settings:
        return cls(
            database_url=os.environ.get("BATON_DATABASE_URL") or None,
            data_dir=Path(os.environ.get("BATON_DATA_DIR") or ".baton"),
            broadcast_url=os.environ.get("BATON_BROADCAST_URL") or None,
            log_level=os.environ.get("BATON_LOG_LEVEL", "info"),
            # How often each process re-reads the event log when no wake-up arrives.
            poll_seconds=float(os.environ.get("BATON_POLL_SECONDS", "1.0")),
            # How long a claimed run stays claimed without a heartbeat.
            run_lease_seconds=float(os.environ.get("BATON_RUN_LEASE_SECONDS", "60")),
        )
