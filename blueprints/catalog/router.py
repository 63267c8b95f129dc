"""The prefix/session-aware router's facts (`router.yaml`): the production-stack router image, its user, resources,
replicas, failover and health path, each with its source in the file."""

from __future__ import annotations

from functools import lru_cache

from pydantic import BaseModel, ConfigDict, Field

from blueprints.catalog.files import read_catalog_file


class RouterCatalog(BaseModel):
    """`blueprints/catalog/router.yaml`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int
    image: str = Field(description="pinned image reference (a version or sha tag, never latest)")
    image_source: str
    run_as_user: int = Field(ge=1, le=2**31 - 1, description="the UID the pod runs the image as (no USER line)")
    cpu: str = Field(description="CPU request, Kubernetes quantity")
    memory: str = Field(description="memory request and limit, Kubernetes quantity")
    replicas: int = Field(ge=2, le=10, description="router replicas (a PodDisruptionBudget keeps one)")
    failover_reroute_attempts: int = Field(ge=0, le=5, description="--max-instance-failover-reroute-attempts")
    health_path: str
    pod_verbs: tuple[str, ...] = Field(description="the Role's verbs on core pods (service discovery)")
    healthy_pods_metric: str = Field(description="the router's gauge of engine pods it routes to")


@lru_cache(maxsize=1)
def load_router_catalog() -> RouterCatalog:
    """The router catalog, validated.

    Raises:
        CatalogError: router.yaml is malformed.
    """
    return read_catalog_file("router.yaml", RouterCatalog)
