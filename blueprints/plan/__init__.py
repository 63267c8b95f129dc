"""Requirements -> Blueprints and PlatformConfigs: option search, archetype selection, sizing, scaling,
platform plans, compound services, batch services, edge clusters, cost, quotas, guardrails and stability.

May import `blueprints.simulate`, `blueprints.capacity` and below; never `blueprints.review.stack` or `components`.
"""
