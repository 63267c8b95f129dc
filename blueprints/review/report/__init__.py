"""Reports for people: a stack's preview (terminal, plan.md, plan.json, manifests), a platform's table
and install order, and the review of a change.
"""
