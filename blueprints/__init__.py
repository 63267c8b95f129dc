"""Planner side of serving blueprints: requirements in, one typed `Blueprint` per environment out.

Nothing in this package creates cloud resources; only `blueprints.preview` runs the Pulumi program, under
Pulumi's mock engine.
"""
