"""Pulumi program of serving blueprints: builds the archetype named by this stack's config.

Run `blueprint plan` to generate `stacks/Pulumi.<stack>.yaml`, then `pulumi up --stack <stack>`.
"""

from components.program import main

main()
