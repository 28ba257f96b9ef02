"""The MCP face: the graph's tools served, their auth, and remote workers over them."""
