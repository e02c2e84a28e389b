"""Baton as a Model Context Protocol server: every move of either lifecycle a tool, tasks and
runs resources, over Streamable HTTP at `/mcp` (`baton.mcp.http`) and over stdio (`baton mcp`,
`baton.mcp.stdio`)."""
