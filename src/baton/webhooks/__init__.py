"""Webhooks: signed deliveries of the event logs to owners' endpoints, at least once.

`signing` (Standard Webhooks signatures, secrets and how they are stored), `addresses` (which
URLs may be called), `schedule` (the retry schedule), `render` (a message's body: the event as
the subscription delivers it, produced by the engine), `attempt` (one HTTP attempt, bounded)
and `worker` (the per-process delivery loop over the database's outbox).
"""
