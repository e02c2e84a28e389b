"""The edges: GraphQL over HTTP and WebSocket, authentication, request limits."""
