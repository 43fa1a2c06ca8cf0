"""``aiocoord demo``: worker processes, a rolling upgrade, a kill, and a verdict."""
