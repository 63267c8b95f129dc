"""What a reviewer sees: the offline preview (the real program under Pulumi's mock engine), deployability and
signal checks, the policy pack run offline, what changed, and the reports (terminal, plan.md, plan.json).

May import `blueprints.plan` and below, and `policies`; runs `components` only through `__main__.py`.
"""
