"""The Pulumi program: read this stack's blueprint from config and build its archetype.

`__main__.py` calls `main()`; the offline preview runs that same file under Pulumi's mock engine.
"""

from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from blueprints.blueprint import Archetype, Blueprint
from blueprints.stackconfig import BLUEPRINT_KEY, PROJECT, blueprint_from_config
from components.labels import recommended_labels
from components.vllm_service import VllmService, VllmServiceArgs
from components.weights_storage import WeightsStorage, WeightsStorageArgs


def load_blueprint() -> Blueprint:
    """This stack's `Blueprint`, validated; raises `StackConfigError` naming the bad field."""
    config = pulumi.Config(PROJECT)
    value = config.require_object("blueprint")
    bp = blueprint_from_config(value, source=f"stack {pulumi.get_stack()} config {BLUEPRINT_KEY}")
    if bp.stack != pulumi.get_stack():
        pulumi.log.warn(f"blueprint is for stack {bp.stack!r} but this is stack {pulumi.get_stack()!r}")
    return bp


def kubernetes_provider(bp: Blueprint) -> k8s.Provider:
    """The Kubernetes provider for the serving workloads.

    With `servingblueprints:kubeconfig` set (a Pulumi secret), it targets that cluster; otherwise the ambient
    kubeconfig context. Resources are never created on an implicit default provider.
    """
    kubeconfig = pulumi.Config(PROJECT).get_secret("kubeconfig")
    return k8s.Provider(f"{bp.stack}-k8s", kubeconfig=kubeconfig, enable_server_side_apply=True)


def serving_role(name: str, bp: Blueprint, policy_json: pulumi.Input[str],
                 opts: pulumi.ResourceOptions) -> aws.iam.Role:
    """The serving pods' IAM role for EKS Pod Identity (trust `pods.eks.amazonaws.com`), with an inline read policy."""
    trust = json.dumps({"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"Service": "pods.eks.amazonaws.com"},
        "Action": ["sts:AssumeRole", "sts:TagSession"]}]}, sort_keys=True)
    role = aws.iam.Role(f"{name}-serving-role", assume_role_policy=trust, tags=bp.tags, opts=opts)
    aws.iam.RolePolicy(f"{name}-serving-read-weights", role=role.id, policy=policy_json, opts=opts)
    return role


def build_vllm(bp: Blueprint) -> dict[str, pulumi.Input]:
    """Model store, IAM identity and the vLLM service; returns the stack outputs."""
    name = bp.stack
    storage = WeightsStorage(f"{name}-weights", WeightsStorageArgs(
        tags=bp.tags, customer_managed_kms=bp.storage.customer_managed_kms,
        retain_on_delete=bp.storage.retain_on_delete,
        noncurrent_version_expiry_days=bp.storage.noncurrent_version_expiry_days))
    role = serving_role(name, bp, storage.read_policy_json([m.name for m in bp.models]), pulumi.ResourceOptions())
    provider = kubernetes_provider(bp)
    k8s_opts = pulumi.ResourceOptions(provider=provider)
    namespace = k8s.core.v1.Namespace(
        f"{name}-namespace",
        metadata={"name": bp.platform.namespace,
                  "labels": {**recommended_labels(name="vllm", instance=bp.stack, component="namespace"),
                             "pod-security.kubernetes.io/enforce": "baseline"}},
        opts=k8s_opts)
    service = VllmService(name, VllmServiceArgs(blueprint=bp, bucket_name=storage.bucket_name,
                                                namespace=namespace.metadata.name),
                          opts=k8s_opts)
    cluster_name = pulumi.Config(PROJECT).get("clusterName")
    if cluster_name:  # EKS Pod Identity: the ServiceAccount gets the role without static keys or annotations
        aws.eks.PodIdentityAssociation(f"{name}-pod-identity", cluster_name=cluster_name,
                                       namespace=bp.platform.namespace,
                                       service_account=service.service_account.metadata.name, role_arn=role.arn,
                                       tags=bp.tags)
    return {"endpoint": service.endpoint, "weights_bucket": storage.bucket_name,
            "weights_uri": storage.model_uri(bp.model.name), "serving_role_arn": role.arn}


BUILDERS = {Archetype.VLLM_GPU: build_vllm}


def main() -> None:
    """Entry point of the Pulumi program: build the stack's archetype and export its outputs."""
    bp = load_blueprint()
    builder = BUILDERS.get(bp.archetype)
    if builder is None:
        raise pulumi.RunError(f"archetype {bp.archetype.value} is not built by this version of the program")
    outputs = builder(bp)
    pulumi.export("archetype", bp.archetype.value)
    pulumi.export("monthly_cost_usd", bp.predictions.monthly_cost_usd)
    for key, value in outputs.items():
        pulumi.export(key, value)
