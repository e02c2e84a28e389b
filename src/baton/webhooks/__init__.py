"""Webhooks: signed deliveries of the event logs to owners' endpoints, at least once.

The delivery door: `signing` (Standard Webhooks signatures of each message), `schedule` (the
retry schedule), `render` (a message's body: the event as the subscription delivers it,
produced by the engine), `attempt` (one HTTP attempt, bounded), `fairness` (delivery slots
shared between owners) and `worker` (the per-process delivery loop over the database's outbox).
Endpoints themselves, which URLs they may call and their secrets are the services'
(`baton.services.webhooks`, `webhook_addresses`, `webhook_secrets`).
"""
