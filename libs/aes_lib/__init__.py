"""Shared libraries of AutoEnvScaling: bus, blob store, bundles, sandbox, models, agents."""
