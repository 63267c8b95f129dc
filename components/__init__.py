"""Pulumi side of serving blueprints: ComponentResources built from a `Blueprint`.

Type tokens are `servingblueprints:index:<Type>`; children are parented and named `<name>-<suffix>`.
"""
