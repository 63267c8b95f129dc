"""Endpoint catalog: the AWS APIs each part of a stack calls and the VPC endpoints that reach them (`endpoints.yaml`,
with sources).

`load_endpoint_catalog()` reads it once per process. The planner sizes a private platform's endpoints from it
(`needed`), the program creates them, and `blueprints.review.deployability.reachability` proves every caller reaches
every API it calls.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from pydantic import BaseModel, ConfigDict, Field

from blueprints.catalog.files import read_catalog_file
from blueprints.core.errors import CatalogError

SCHEMA_VERSION = 1
#: The caller id of every EC2 node, of a service stack's pods and of a private SageMaker endpoint (`callers:`).
NODES, SERVICE, SAGEMAKER = "nodes", "service", "sagemaker"


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class EndpointService(_Record):
    """An AWS service with a VPC endpoint `com.amazonaws.<region>.<name>`."""

    name: str = Field(pattern=r"^[a-z0-9.-]+$")
    gateway: bool = Field(default=False, description="it also has a gateway endpoint (route-table entries)")
    source: str


class NoEndpoint(_Record):
    """An AWS API without a VPC endpoint, and what keeps a private stack from calling it."""

    name: str
    avoided_by: str
    source: str


class Caller(_Record):
    calls: list[str] = Field(min_length=1, description="endpoint service names")
    source: str


class EndpointCatalog(_Record):
    schema_version: int
    services: list[EndpointService]
    no_endpoint: list[NoEndpoint]
    callers: dict[str, Caller]

    def service_name(self, region: str, service: str) -> str:
        """The endpoint service name, e.g. `com.amazonaws.eu-central-1.eks-auth`."""
        return f"com.amazonaws.{region}.{service}"

    def calls(self, caller: str) -> list[str]:
        """The endpoint services `caller` (`nodes`, `eks:<id>`, `helm:<id>`, `service`, `sagemaker`) calls; none for
        a caller not listed (an add-on that calls no AWS API)."""
        found = self.callers.get(caller)
        return list(found.calls) if found else []

    def needed(self, callers: Iterable[str]) -> list[str]:
        """Every endpoint service the callers call, in the catalog's order."""
        wanted = {s for c in callers for s in self.calls(c)}
        return [s.name for s in self.services if s.name in wanted]


@lru_cache(maxsize=1)
def load_endpoint_catalog() -> EndpointCatalog:
    """`endpoints.yaml`, validated.

    Raises:
        CatalogError: the file is malformed, or a caller calls a service the file does not list.
    """
    data = read_catalog_file("endpoints.yaml", EndpointCatalog, schema_version=SCHEMA_VERSION)
    known = {s.name for s in data.services}
    for caller, entry in data.callers.items():
        unknown = sorted(set(entry.calls) - known)
        if unknown:
            raise CatalogError(f"endpoints.yaml: caller {caller} calls {unknown}, which services: does not list")
    return data
