"""One builder per archetype: an option found by the search, turned into a `Blueprint` with its cost lines
and rationale, over the context every builder shares.
"""
