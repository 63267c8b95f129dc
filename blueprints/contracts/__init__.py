"""What the planner writes and the Pulumi program and the policy pack read: `Blueprint` (a service stack),
`PlatformConfig` and `PlatformOutputs` (a platform stack), stack-config read/write, and the derivations both sides
must agree on (weights on disk, memory, images, scaling queries and alerts), each checked against the catalog.

May import `blueprints.core`, `blueprints.catalog` and the requirement sections a stack records
(`blueprints.requirements.service`); never the planner, the capacity model, the review or `components`.
"""
