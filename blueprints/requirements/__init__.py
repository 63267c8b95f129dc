"""The input side: the requirements file of a service and the platform team's `platform.yaml` (their
sections, bounds and the cross-field rules a JSON Schema cannot state), loaded from bounded YAML.

May import `blueprints.core` and `blueprints.catalog`.
"""
