"""What each operation does: who may do it, input checks, and the store calls, per lifecycle.

Every door (GraphQL, MCP, webhooks) calls these; these call the store. `tasks` is the handoff
lifecycle's service (with the permission gate), `runs` the pipeline runs', `gate_rules` the
owners' rules, `graphs` the bounded traversal of task dependencies, `webhooks` owners' webhook
endpoints (which URLs they may call in `webhook_addresses`, their secrets in
`webhook_secrets`), and `context` what a door's handler gets: the caller and these services.
"""
