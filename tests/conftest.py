"""Fixtures come from aiocoord's own pytest plugin (``aiocoord.testing.pytest_plugin``)."""

# pytester runs an inner pytest session to check the plugin's report hook.
pytest_plugins = ("pytester",)
