"""Planner side of serving blueprints: requirements in, one typed `Blueprint` per environment out, and the review.

Stages, each a package importing only those below it (`[tool.importlinter]` in pyproject.toml): `core` < `catalog`
< `requirements` < `contracts` < `capacity` < `simulate` < `plan` < `review` < `workspace` < `cli`.
Nothing in this package creates cloud resources; only `blueprints.review.preview` runs the Pulumi program, under
Pulumi's mock engine.
"""
