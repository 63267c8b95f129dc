"""The `startup-timers` check of `blueprint preview` (`blueprints.review.deployability.checks`): a timer the provider
enforces on a replica's start holds at the slowest copy rate the plan allows for (`defaults.SAGEMAKER_SLOWEST_GIB_PER_S`),
not only at the expected one. A SageMaker endpoint whose model download or startup health check times out fails its
creation (and its rollback) although nothing is wrong; the expected rate is unverified, so 2x of it was little margin
(a 70B got 542 s and 798 s).
"""

from __future__ import annotations

from blueprints.contracts.sections import SageMakerEngine
from blueprints.core import defaults
from blueprints.plan.builders.sagemaker import sagemaker_timer_floors
from blueprints.review.preview import DeployabilityFinding
from blueprints.review.deployability.context import CheckContext, list_of, named

ENDPOINT_CONFIGURATION = "aws:sagemaker/endpointConfiguration:EndpointConfiguration"
TIMERS = (("containerStartupHealthCheckTimeoutInSeconds", "startup health check"),
          ("modelDataDownloadTimeoutInSeconds", "model download"))


def check_startup_timers(ctx: CheckContext) -> list[DeployabilityFinding]:
    if ctx.report.is_platform or not isinstance(ctx.report.blueprint.engine, SageMakerEngine):
        return []
    bp = ctx.report.blueprint
    weights = sum(m.weights_gib for m in bp.models)
    floors = dict(zip((key for key, _ in TIMERS), sagemaker_timer_floors(weights)))
    rate = defaults.SAGEMAKER_SLOWEST_GIB_PER_S * 1024
    findings = []
    for record in (r for r in ctx.report.resources if r.type == ENDPOINT_CONFIGURATION):
        for variant in list_of(record.inputs.get("productionVariants")):
            for key, what in TIMERS:
                value = variant.get(key)
                if value is None or value < floors[key]:
                    findings.append(DeployabilityFinding("startup-timers", record.urn, (
                        f"{named(record)} variant {variant.get('variantName')!r}: its {what} timeout is "
                        f"{value if value is not None else 'the default'} s, but {weights:g} GiB of weights at "
                        f"{rate:.0f} MiB/s (the slowest copy rate planned for) need {floors[key]} s: a slow copy "
                        "fails the endpoint's creation; re-plan the stack")))
    return findings
