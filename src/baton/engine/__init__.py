"""Executing GraphQL documents against Baton's schema: parsed and validated once, run as plans.

Strawberry defines the schema (types, resolvers, SDL); graphql-core parses and validates. The
engine keeps each document's parse and validation in a bounded cache (`documents`), compiles
each operation into a plan the first time it runs (`plans`) and executes plans level by level,
so a field over a list of parents costs one resolver call, or one batched look-up, per level
(`execute`). Only introspection runs on graphql-core's own executor.
"""
