"""The deployment targets of a service: each `environments` entry (region, its share of the peak traffic, spot,
replica floor and ceiling, production, the platform it lands on) and the `budget` every environment is held to.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import ConfigDict, Field, model_validator

from blueprints.core import bounds
from blueprints.core.errors import FieldProblem
from blueprints.requirements.fields import DNS_1123_LABEL, Region, Section, is_const, when


class Budget(Section):
    max_monthly_usd: float | None = Field(default=None, ge=bounds.MIN_BUDGET_USD, le=bounds.MAX_BUDGET_USD,
                                          description="ceiling per environment, USD/month")


#: JSON Schema: an environment that neither uses spot nor scales to zero (production-on-demand, production-always-on).
ALWAYS_ON_DEMAND = {"properties": {"spot": {"not": {"const": True}}, "min_replicas": {"not": {"const": 0}}}}


class Environment(Section):
    """One deployment target; becomes the stack `<service>-<name>`."""

    model_config = ConfigDict(json_schema_extra={"allOf": [when(is_const("production", True), ALWAYS_ON_DEMAND)]})

    region: Region = Field(description="AWS region, e.g. `us-east-1`")
    traffic_scale: float = Field(default=1.0, ge=bounds.MIN_TRAFFIC_SCALE, le=bounds.MAX_TRAFFIC_SCALE,
                                 description="fraction of peak traffic this env sees (0.001-10)")
    spot: bool = Field(default=False, description="use spot capacity (never allowed in production)")
    min_replicas: int | None = Field(default=None, ge=0, le=bounds.MAX_REPLICAS,
                                     description="floor; 0 allows scale to zero (not in production)")
    max_replicas: int | None = Field(default=None, ge=1, le=bounds.MAX_REPLICAS,
                                     description="ceiling; defaults to twice the peak replicas (at most 1,000)")
    production: bool | None = Field(default=None, description="defaults to true for names starting with `prod`")
    platform: str | None = Field(default=None, pattern=DNS_1123_LABEL, max_length=40,
                                 description="the shared platform this environment lands on (EKS, private SageMaker); "
                                 "defaults to `<environment>-<region>`, stack platform-<that>")

    @model_validator(mode="after")
    def _min_le_max(self) -> Environment:
        if self.min_replicas is not None and self.max_replicas is not None and self.min_replicas > self.max_replicas:
            raise FieldProblem("min_replicas", f"min_replicas ({self.min_replicas}) must be <= max_replicas "
                               f"({self.max_replicas})", rule="min-replicas-not-above-max")
        return self


#: A name for a dict key of `environments` (stack `<service>-<name>`).
EnvironmentName = Annotated[str, Field(pattern=DNS_1123_LABEL, max_length=20)]
