"""The Kubernetes objects every serving workload has, built one way: ServiceAccount, Deployment (with the rollout
options of `components.disruption.deployment_options`), PodDisruptionBudget and the serving Service (an NLB when
exposed, see `components.exposure`). All are named `Blueprint.workload_name`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pulumi
import pulumi_kubernetes as k8s

from blueprints.blueprint import Blueprint
from components.disruption import deployment_options, disruption_budget
from components.exposure import load_balancer_annotations
from components.labels import selector_labels


@dataclass
class ServingObjects:
    service_account: k8s.core.v1.ServiceAccount
    deployment: k8s.apps.v1.Deployment
    disruption_budget: k8s.policy.v1.PodDisruptionBudget | None
    service: k8s.core.v1.Service


def serving_objects(name: str, bp: Blueprint, *, labels: dict[str, str], namespace: pulumi.Input[str],
                    deployment_spec: Callable[[pulumi.Output[str]], dict], ports: list[dict], expose: bool,
                    opts: pulumi.ResourceOptions,
                    service_account_annotations: dict[str, pulumi.Input[str]] | None = None,
                    load_balancer_subnet_ids: pulumi.Input[list[str]] | None = None) -> ServingObjects:
    """Create the workload's objects as children (`opts`) of a serving component named `name`.

    Args:
        deployment_spec: builds the Deployment spec from the ServiceAccount's name.
        ports: the serving Service's ports (`name`, `port`, `targetPort`, `protocol`); all go on the load balancer.
        expose: a LoadBalancer Service; otherwise ClusterIP.
        load_balancer_subnet_ids: the load balancer's subnets (the platform's); None lets the controller discover
            subnets by their role tags.
    """
    workload = bp.workload_name
    account = k8s.core.v1.ServiceAccount(
        f"{name}-sa", metadata={"name": workload, "namespace": namespace, "labels": labels,
                                "annotations": service_account_annotations or {}},
        automount_service_account_token=True, opts=opts)
    deployment = k8s.apps.v1.Deployment(
        f"{name}-deployment", metadata={"name": workload, "namespace": namespace, "labels": labels},
        spec=deployment_spec(account.metadata.name), opts=pulumi.ResourceOptions.merge(opts, deployment_options(bp)))
    budget = disruption_budget(f"{name}-pdb", bp, workload, namespace, labels, opts)
    service = k8s.core.v1.Service(
        f"{name}-service",
        metadata={"name": workload, "namespace": namespace, "labels": labels,
                  "annotations": load_balancer_annotations(bp, [p["port"] for p in ports],
                                                           subnet_ids=load_balancer_subnet_ids) if expose else {}},
        spec={"type": "LoadBalancer" if expose else "ClusterIP", "selector": selector_labels(labels), "ports": ports},
        opts=opts)
    return ServingObjects(account, deployment, budget, service)
