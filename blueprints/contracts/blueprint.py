"""`Blueprint`: the one typed contract between the planner and the Pulumi program.

The planner (`blueprints.plan.planner`) writes one per environment into `stacks/Pulumi.<stack>.yaml` under the config key
`servingblueprints:blueprint`; the program (`__main__.py`) reads it back through this same model, so a hand edit is
validated with the same errors. Units live in field names.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from blueprints.core import bounds, defaults
from blueprints.catalog import load_catalog
from blueprints.core.errors import raise_problems
from blueprints.requirements.exposure import ExposureVia
from blueprints.requirements.fields import (
    DNS_1123_LABEL, TAG_VALUE, Region,
)
from blueprints.core.jsontypes import ClosedModel, absent_when_none
from blueprints.contracts.consistency import blueprint_problems
from blueprints.contracts.sections import (
    BLUEPRINT_SCHEMA_VERSION, MAX_TAGS, Alerting, AppliedOverride, Archetype, Autoscaling, BatchPlan, ComplianceRecord, Compute, Engine, Network,
    PILOT_EXPIRES_TAG, Pipeline, PilotRecord, PlatformSpec, Predictions, RolesAnywhereSpec, SageMakerEngine,
    ServedModel, SloTargets, StartupBudget,
    Storage,
)
from blueprints.contracts.placement import Placement, serving_placement
from blueprints.contracts.router import RouterPlan


class Blueprint(ClosedModel):
    """Everything the Pulumi program needs to build one stack, and why it looks the way it does."""

    schema_version: Literal[3] = BLUEPRINT_SCHEMA_VERSION
    service: str = Field(pattern=DNS_1123_LABEL)
    environment: str = Field(pattern=DNS_1123_LABEL)
    production: bool
    region: Region
    archetype: Archetype
    tags: dict[Annotated[str, Field(pattern=TAG_VALUE, max_length=128)],
               Annotated[str, Field(pattern=TAG_VALUE, max_length=256)]] = Field(
        max_length=MAX_TAGS, description="AWS tags of every resource (also the load balancer's tag annotation): keys of "
        "up to 128 and values of up to 256 letters, digits, spaces and _ . : / + - @, keys not starting with aws:")
    compliance: ComplianceRecord
    models: list[ServedModel] = Field(min_length=1, max_length=bounds.MAX_MODELS)
    compute: Compute
    engine: Engine
    storage: Storage | None = Field(description="the stack's model store; none on an edge cluster (its pods read the "
                                    "sources directly)")
    network: Network
    platform: PlatformSpec
    startup: StartupBudget
    autoscaling: Autoscaling
    slo: SloTargets
    predictions: Predictions
    alerting: Alerting = Field(default_factory=Alerting)
    roles_anywhere: RolesAnywhereSpec | None = Field(default=None, description="edge cluster with s3:// sources: IAM "
                                                     "Roles Anywhere (none elsewhere: EKS Pod Identity)")
    monitored: bool = Field(default=True, description="the stack renders its ServiceMonitor, PrometheusRule and "
                            "dashboard (its cluster runs kube-prometheus-stack); false on an edge cluster that "
                            "declares none")
    pipeline: Pipeline | None = Field(default=None, description="compound services only: this part's place in the "
                                      "service's end-to-end latency")
    overrides: list[AppliedOverride] = Field(default_factory=list, max_length=20, description="the requirements' "
                                             "`overrides:` applied to this stack, each with its reason")
    rationale: list[str] = Field(min_length=1, max_length=200)
    router: RouterPlan | None = Field(default=None, exclude_if=absent_when_none,
                                      description="vLLM with prompt reuse over more than one replica: "
                                      "the prefix/session-aware router in front (blueprints.contracts.router; absent: "
                                      "the Service spreads requests)")
    batch: BatchPlan | None = Field(default=None, exclude_if=absent_when_none, description="a batch service "
                                    "(requirements traffic.batch): its daily run, schedule and simulated completion; "
                                    "absent: interactive traffic")
    pilot: PilotRecord | None = Field(default=None, exclude_if=absent_when_none, description="a pilot stack of a "
                                      "finalist (`blueprint pilot`), on its environment's platform until it expires; "
                                      "absent: the environment's own stack (`blueprint plan`)")

    @model_validator(mode="after")
    def _consistent(self) -> Blueprint:
        """Every field against the others and the catalog (`blueprints.contracts.consistency.blueprint_problems`)."""
        raise_problems(blueprint_problems(self))
        if self.pilot is not None:  # its own namespace beside the environment's stack, its expiry on every resource
            if self.tags.get(PILOT_EXPIRES_TAG) != self.pilot.expires:
                raise ValueError(f"tags.{PILOT_EXPIRES_TAG} must be the pilot's expiry {self.pilot.expires}")
            if self.platform.namespace != self.stack:
                raise ValueError(f"platform.namespace of a pilot must be its stack's name {self.stack}")
        return self

    @property
    def stack(self) -> str:
        """The Pulumi stack name, `<service>-<environment>`; a pilot's `<service>-pilot-<candidate>`."""
        if self.pilot is not None:
            return f"{self.service}-pilot-{self.pilot.candidate}"
        return f"{self.service}-{self.environment}"

    @property
    def workload_name(self) -> str:
        """Name of the serving Deployment, Service and ServiceAccount: `<service>-<engine kind>`. Deterministic, so
        IAM bindings, autoscalers and alert selectors can name the workload before it exists."""
        return f"{self.service}-{self.engine.kind}"

    @property
    def metrics_service_name(self) -> str:
        """The ClusterIP Service Prometheus scrapes the engine through (`<workload>-metrics`): prometheus-operator
        labels every series it scrapes through a ServiceMonitor `job=<that Service's name>` (its default jobLabel),
        so alert and scaler selectors on `job` name it."""
        return f"{self.workload_name}-metrics"

    @property
    def placement(self) -> Placement:
        """How the serving pods take nodes (`blueprints.contracts.placement`): `compute.replicas_per_node` to a node,
        spread over the platform's zones (the topology spread the program renders)."""
        return serving_placement(per_node=self.compute.replicas_per_node, zones=self.platform.zones,
                                 strict_zone_spread=self.strict_zone_spread)

    @property
    def wakes_on_request(self) -> bool:
        """Scales to zero between requests, woken by the KEDA HTTP add-on's interceptor (`autoscaling.min_replicas`
        0 and not a batch: a batch's zero is its cron schedule's, `BatchPlan.min_replicas`, and nothing waits on a
        request to wake it)."""
        return self.autoscaling.min_replicas == 0 and self.batch is None

    @property
    def least_running_replicas(self) -> int:
        """The fewest replicas that run while the service runs (what a PodDisruptionBudget protects): a batch's
        replicas during its run (`autoscaling.max_replicas`, none outside it), else `autoscaling.min_replicas` and
        at least 1."""
        return self.autoscaling.max_replicas if self.batch is not None else max(1, self.autoscaling.min_replicas)

    @property
    def node_pool_max_nodes(self) -> int:
        """Nodes the workload pool must be able to reach: the autoscaler's maximum plus the rollout surge
        (`defaults.SURGE_REPLICAS`), placed as the scheduler places them (`placement`: spread evenly over the
        platform's zones, whole nodes per zone). For GPUs: `max_nodes x gpus_per_node >= (max_replicas + surge) x
        gpus_per_replica`."""
        return self.placement.nodes(self.autoscaling.max_replicas + defaults.SURGE_REPLICAS)

    @property
    def planned_nodes(self) -> int:
        """Nodes (or SageMaker instances) the planned peak replicas take (`placement`); on an edge cluster, the
        owned nodes they use."""
        return self.placement.nodes(self.compute.replicas)

    @property
    def planned_monthly_usd(self) -> float:
        """What the planned peak costs a month, USD: the nodes its replicas take (`planned_nodes`) at the nodes' cost
        line price, plus the fixed items (the stated peak, `predictions.monthly_cost_usd`, is never below it: the
        simulated autoscaler may run more for a cooldown)."""
        first = self.predictions.cost_lines[0]
        return (self.planned_nodes * first.usd_per_hour * load_catalog().hours_per_month
                + sum(line.monthly_usd for line in self.predictions.cost_lines[1:]))

    @property
    def max_monthly_usd(self) -> float:
        """What the autoscaler's maximum costs a month, USD (`predictions.max_monthly_cost_usd`, else the peak)."""
        return self.predictions.max_monthly_cost_usd or self.predictions.monthly_cost_usd

    @property
    def rollout_surge(self) -> int:
        """Extra replicas a rolling update starts before stopping an old one: `defaults.SURGE_REPLICAS`, or 0 on an
        edge cluster whose owned nodes have no room beside the autoscaler's maximum (then a rollout replaces one
        replica at a time, `maxUnavailable: 1`)."""
        if self.compute.owned_nodes is None:
            return defaults.SURGE_REPLICAS
        room = self.compute.owned_nodes * self.compute.replicas_per_node - self.autoscaling.max_replicas
        return defaults.SURGE_REPLICAS if room >= defaults.SURGE_REPLICAS else 0

    @property
    def strict_zone_spread(self) -> bool:
        """Availability >= `defaults.HIGH_AVAILABILITY_PCT` in production: replicas must spread over at least
        `defaults.MIN_ZONES_FOR_HIGH_AVAILABILITY` zones (topology spread with `minDomains`, DoNotSchedule)."""
        return self.production and self.slo.availability_pct >= defaults.HIGH_AVAILABILITY_PCT

    @property
    def proxy_terminates_tls(self) -> bool:
        """The pod's authenticating proxy serves TLS itself (a Kubernetes TLS Secret behind a NodePort or a MetalLB
        LoadBalancer); an NLB and an Ingress terminate TLS before it."""
        exposure = self.network.exposure
        return bool(exposure.tls_secret_name) and exposure.via is not ExposureVia.INGRESS

    @property
    def serving_port(self) -> int | None:
        """The serving Service's port clients send HTTP requests to: the authenticating proxy's, 443 when TLS ends at
        the NLB or at the proxy and 80 otherwise (behind an Ingress, which terminates TLS, the Service speaks plain
        HTTP); the engine's own port is never on the Service. None on SageMaker."""
        if isinstance(self.engine, SageMakerEngine):
            return None
        tls = self.network.exposure.tls_certificate_arn or self.proxy_terminates_tls
        return defaults.TLS_PORT if tls else defaults.PLAIN_PORT

    @property
    def model(self) -> ServedModel:
        """The first (for single-model archetypes, the only) model."""
        return self.models[0]
