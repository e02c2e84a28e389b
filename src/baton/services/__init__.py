"""What each operation does: who may do it, input checks, and the store calls, per lifecycle.

Thin resolvers call these; these call the store. `tasks` is the handoff lifecycle's service
(with the permission gate), `gate_rules` the owners' rules, `graphs` the bounded traversal of
task dependencies.
"""
