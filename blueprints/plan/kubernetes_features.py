"""Kubernetes versions against the API fields the service workloads use (`workload_features` in
`blueprints/catalog/kubernetes.yaml`, each with the first version where it works by default and its source).

An existing cluster's version is given, and a platform's may be pinned in platform.yaml: a version older than a field
the plan's workloads render would fail the strict manifest check of `blueprint preview` (and the API server), so the
plan is refused naming the field, the version and the fix. The platform's default version is chosen no older than
the newest such minimum (`minimum_version`).
"""

from __future__ import annotations

from blueprints.contracts.sections import Archetype
from blueprints.contracts.blueprint import Blueprint
from blueprints.catalog.addons import WorkloadFeature, load_platform_catalog
from blueprints.contracts.platform import kubernetes_minor


def features_used(bp: Blueprint) -> list[WorkloadFeature]:
    """The version-dependent fields a service's workloads render: none on SageMaker (no Kubernetes)."""
    if bp.archetype is Archetype.SAGEMAKER_ENDPOINT:
        return []
    return [f for f in load_platform_catalog().workload_features
            if f.used_when == "always" or (f.used_when == "strict-zone-spread" and bp.strict_zone_spread)]


def minimum_version() -> str:
    """The oldest Kubernetes version every field any service workload may render works on."""
    features = load_platform_catalog().workload_features
    return max((f.min_version for f in features), key=kubernetes_minor, default="1.0")


def feature_problems(bp: Blueprint, *, source: str) -> list[str]:
    """A sentence per field the blueprint's workloads use that its Kubernetes version lacks; empty when none.

    Args:
        bp: a planned service.
        source: where its version comes from (named in the message).
    """
    version = bp.platform.kubernetes_version
    return [f"environments.{bp.environment}: Kubernetes {version} ({source}) lacks {f.field}, which the "
            f"{bp.archetype.value} workloads use (on by default from Kubernetes {f.min_version}: {f.id}); upgrade the "
            f"cluster to >= {f.min_version} and set that version"
            for f in features_used(bp) if kubernetes_minor(version) < kubernetes_minor(f.min_version)]
