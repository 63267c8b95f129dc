"""Kubernetes recommended labels (app.kubernetes.io/*) for every object we render."""

from __future__ import annotations

PART_OF = "servingblueprints"

#: Pod-template annotations that let policies check a workload against its model without reading the blueprint.
ANNOTATION_WEIGHTS_GIB = "servingblueprints.io/weights-gib"
#: Seconds from container start to ready that the startup probe must cover (download + load + warm-up).
ANNOTATION_POD_START_S = "servingblueprints.io/pod-start-s"
#: Tensor-parallel degree of the replica (policies size /dev/shm against it).
ANNOTATION_TENSOR_PARALLEL = "servingblueprints.io/tensor-parallel-size"


def sync_account_name(service: str) -> str:
    """ServiceAccount of the weights sync Jobs: `<service>-weights-sync`."""
    return f"{service}-weights-sync"


def recommended_labels(*, name: str, instance: str, component: str, version: str | None = None) -> dict[str, str]:
    """The `app.kubernetes.io/{name,instance,component,part-of,managed-by}` labels (and `version` when given).

    Args:
        name: the application, e.g. `vllm`.
        instance: the unique instance, e.g. the stack `chat-assistant-prod`.
        component: the role, e.g. `server`, `weights-sync`.
        version: the application version (image tag), optional.
    """
    labels = {
        "app.kubernetes.io/name": name,
        "app.kubernetes.io/instance": instance,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/part-of": PART_OF,
        "app.kubernetes.io/managed-by": "pulumi",
    }
    if version:
        labels["app.kubernetes.io/version"] = version[:63]
    return labels


def selector_labels(labels: dict[str, str]) -> dict[str, str]:
    """The immutable subset used in Deployment selectors (name, instance, component)."""
    keys = ("app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/component")
    return {k: labels[k] for k in keys}


def router_labels(instance: str, image: str) -> dict[str, str]:
    """The prefix/session-aware router's labels (`components.router`): name `vllm-router`, component `router`, its
    image tag as the version."""
    return recommended_labels(name="vllm-router", instance=instance, component="router",
                              version=image.rsplit(":", 1)[-1])
