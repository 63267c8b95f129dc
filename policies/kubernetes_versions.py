"""Kubernetes version rules: EKS clusters on a supported version, and a flag for extended support."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from policies.resources import Res

def _eks_version_phase(res: Res, config: Mapping[str, Any]) -> tuple[str, Any] | None:
    """(version, its catalog record or None) of an EKS cluster, and the date it is judged on (`asOf`, default
    today: the day the pack runs)."""
    if res.type != "aws:eks/cluster:Cluster":
        return None
    version = res.props.get("version")
    if not isinstance(version, str):
        return None  # unset: EKS picks its default (a supported version); unknown: judged at `pulumi up`
    from blueprints.catalog.addons import load_platform_catalog

    return version, load_platform_catalog().versions.get(version)


def _as_of(config: Mapping[str, Any]) -> datetime.date:
    value = config.get("asOf")
    return datetime.date.fromisoformat(value) if value else datetime.date.today()


def check_kubernetes_version_supported(res: Res, config: Mapping[str, Any]) -> list[str]:
    """EKS clusters run a Kubernetes version EKS still supports (standard or extended support) on `asOf`."""
    found = _eks_version_phase(res, config)
    if found is None:
        return []
    version, record = found
    if record is None:
        return [f"{res.label} runs Kubernetes {version}, which is not in blueprints/catalog/kubernetes.yaml; use a "
                "catalogued EKS version"]
    on = _as_of(config)
    if record.phase(on) == "unsupported":
        return [f"{res.label} runs Kubernetes {version}, out of EKS extended support since {record.end_of_extended} "
                f"(judged on {on}): EKS upgrades it automatically; plan the upgrade (kubernetes_version in "
                "platform.yaml, or re-plan for the default)"]
    return []


def check_kubernetes_version_extended(res: Res, config: Mapping[str, Any]) -> list[str]:
    """EKS clusters in extended support are flagged: the control plane costs six times the standard price."""
    found = _eks_version_phase(res, config)
    if found is None or found[1] is None:
        return []
    version, record = found
    on = _as_of(config)
    if record.phase(on) != "extended":
        return []
    return [f"{res.label} runs Kubernetes {version}, in EKS extended support since {record.end_of_standard} (until "
            f"{record.end_of_extended}, judged on {on}): the control plane costs $0.60/hour instead of $0.10; upgrade"]

