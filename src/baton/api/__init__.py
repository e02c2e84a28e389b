"""The GraphQL API. Registers the protocol's enums with Strawberry before any type uses them."""

from baton.api import enums as enums
