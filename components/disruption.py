"""Rollout safety of a serving workload as resources and options: its PodDisruptionBudget (from
`components.rollout.disruption_budget_spec`) and how long Pulumi waits for its Deployment."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from blueprints.contracts.blueprint import Blueprint
from blueprints.core import defaults
from components.labels import selector_labels
from components.rollout import disruption_budget_spec, progress_deadline_s

#: Slack past the Deployment's progress deadline before Pulumi stops waiting, s.
AWAIT_SLACK_S = 300


def disruption_budget(resource_name: str, bp: Blueprint, name: str, namespace: pulumi.Input[str],
                      labels: dict[str, str], opts: pulumi.ResourceOptions) -> k8s.policy.v1.PodDisruptionBudget | None:
    """A PDB over the workload's pods (`components.rollout.disruption_budget_spec`), or None where it gets none."""
    spec = disruption_budget_spec(bp, selector_labels(labels))
    if spec is None:
        return None
    return k8s.policy.v1.PodDisruptionBudget(
        resource_name, metadata={"name": name, "namespace": namespace, "labels": labels}, spec=spec, opts=opts)


def deployment_options(bp: Blueprint) -> pulumi.ResourceOptions:
    """Options of a serving Deployment.

    Pulumi waits for it as long as Kubernetes would (the progress deadline, from the cold-start budget) plus slack,
    instead of the provider's 10-minute default, which a GPU node's cold start can outlast. Where an autoscaler owns
    the replica count (`Autoscaling.autoscaled`: KEDA's ScaledObject or an HPA), `spec.replicas` is set at creation
    only (`ignore_changes`): under server-side apply the pinned pulumi-kubernetes then drops the field from its
    update once the autoscaler's manager owns it, so a second `pulumi up` neither conflicts on `.spec.replicas` nor
    resets a scaled-out fleet (`defaults.AUTOSCALED_REPLICAS_PATH`: the upstream facts). A fixed replica count keeps
    the field: a re-plan to another count must reach the cluster.
    """
    wait = f"{progress_deadline_s(bp) + AWAIT_SLACK_S}s"
    return pulumi.ResourceOptions(custom_timeouts=pulumi.CustomTimeouts(create=wait, update=wait),
                                  ignore_changes=[defaults.AUTOSCALED_REPLICAS_PATH] if bp.autoscaling.autoscaled
                                  else None)
