"""What an existing cluster must run for a plan to deploy on it, checked when planning.

The program's objects on an existing cluster need add-ons the stack does not install: the monitoring CRDs and the
Prometheus the autoscaler queries (kube-prometheus-stack, whose kube-state-metrics the alerts read), KEDA for a
ScaledObject (and its HTTP add-on to wake a service scaled to zero), metrics-server for a CPU HPA, the NVIDIA device
plugin for GPU pods and dcgm-exporter for the dashboard's GPU panels, and the controller implementing the exposure.
The preview fails a stack whose cluster lacks one (`addon-installed`, `prometheus-address`, `metric-unknown`); the
planner refuses the same plan first, naming `operations.cluster_addons` and what to install, so that a plan that
succeeds previews clean.
"""

from __future__ import annotations

from blueprints.catalog.addons import load_platform_catalog
from blueprints.catalog.metrics import load_metric_catalog
from blueprints.contracts.blueprint import Blueprint
from blueprints.core.errors import CatalogError
from blueprints.contracts.observability import scaling_signal
from blueprints.contracts.sections import CRON_SCHEDULE, FIXED_REPLICAS, Archetype
from blueprints.requirements.hosting import Accelerator, Operations, Platform


#: The custom resources the program renders for a monitored service and for a KEDA-scaled one (`group/Kind`); the
#: catalog names the add-on installing each (`PlatformCatalog.crd_owner`, as the preview's `addon-installed` reads it).
MONITORING_KINDS = ("monitoring.coreos.com/ServiceMonitor", "monitoring.coreos.com/PrometheusRule")
SCALED_KIND = "keda.sh/ScaledObject"
WAKE_KIND = "http.keda.sh/HTTPScaledObject"
#: Add-ons the preview requires by what an object does rather than by its kind (`blueprints.review.deployability.
#: addons.needed_addons`), and the exporter of the dashboard's GPU series (`blueprints/catalog/metrics.yaml`).
METRICS_SERVER = "metrics-server"
DEVICE_PLUGIN = "nvidia-device-plugin"
GPU_EXPORTER = "dcgm-exporter"


def _owner(kind: str) -> str:
    owner = load_platform_catalog().crd_owner(kind)
    if owner is None:
        raise CatalogError(f"blueprints/catalog/addons.yaml: no add-on installs {kind}, which the program renders")
    return owner.id


def cluster_addons_needed(bp: Blueprint) -> dict[str, str]:
    """Add-on id -> why, for every add-on the program's objects for `bp` need on its cluster ({} for SageMaker)."""
    if bp.archetype is Archetype.SAGEMAKER_ENDPOINT:
        return {}
    needs: dict[str, str] = {}
    if bp.monitored:
        needs[_owner(MONITORING_KINDS[0])] = ("its ServiceMonitor, PrometheusRule and dashboard, and the "
                                              "kube-state-metrics series its alerts read")
    if scaling_signal(bp) is not None:
        needs[_owner(SCALED_KIND)] = "its ScaledObject"
        needs.setdefault(_owner(MONITORING_KINDS[0]), "the Prometheus its ScaledObject queries")
        if bp.wakes_on_request:
            needs[_owner(WAKE_KIND)] = "its HTTPScaledObject, whose interceptor wakes it from zero replicas"
    elif bp.autoscaling.metric == CRON_SCHEDULE:
        needs[_owner(SCALED_KIND)] = "its ScaledObject (the batch's cron schedule)"
    elif bp.autoscaling.metric != FIXED_REPLICAS:
        needs[METRICS_SERVER] = "its CPU HorizontalPodAutoscaler"
    if bp.compute.accelerator is Accelerator.NVIDIA_GPU:
        needs[DEVICE_PLUGIN] = "its pods request nvidia.com/gpu"
        if bp.monitored:
            exporter = next(e for e in load_metric_catalog().exporters if e.exporter == GPU_EXPORTER)
            needs[exporter.addon] = "the GPU series of its dashboard"
    if bp.network.exposed_by is not None:
        needs[bp.network.exposed_by] = f"exposure.via {bp.network.exposure.via.value if bp.network.exposure.via else ''}"
    return needs


def cluster_addon_problems(planned: list[Blueprint], ops: Operations) -> list[str]:
    """Why an existing cluster cannot run the planned environments as declared (`operations.cluster_addons`), with
    the fix; [] when it can (or they land on the shared platform, or an edge cluster, whose plan adapts to what it
    declares)."""
    if ops.platform is not Platform.EXISTING_CLUSTER:
        return []
    declared = set(ops.declared_addons or [])
    missing: dict[str, str] = {}
    envs: list[str] = []
    for bp in planned:
        lacking = {a: why for a, why in cluster_addons_needed(bp).items() if a not in declared}
        if lacking:
            missing.update(lacking)
            envs.append(bp.environment)
    if not missing:
        return []
    said = "declares none" if ops.declared_addons is None else f"declares only {', '.join(sorted(declared)) or 'none'}"
    return [f"operations.cluster_addons: the existing cluster must run "
            + "; ".join(f"{a} ({why})" for a, why in sorted(missing.items()))
            + f" for environments {', '.join(dict.fromkeys(envs))}, but it {said}: install them on the cluster "
            "and list them in operations.cluster_addons"]
