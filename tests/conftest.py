"""The shared fixtures come from one place, tests/support/plugin.py: the broker, Spark, a registry, topics."""

pytest_plugins = ["tests.support.plugin"]
