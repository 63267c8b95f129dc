"""What every stage shares: the error types, the bounds on user numbers, JSON types, bounded YAML,
the named defaults and where a project keeps its parts.

Imports nothing of ours.
"""
