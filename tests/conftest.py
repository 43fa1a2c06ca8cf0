"""Fixtures come from aiocoord's own pytest plugin (``aiocoord.testing.pytest_plugin``)."""
