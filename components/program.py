"""The Pulumi program: read this stack's config and build a shared platform or one archetype.

`__main__.py` calls `main()`; the offline preview runs that same file under Pulumi's mock engine.

Config keys read here (all namespaced `servingblueprints:`):
- `platform` (a platform stack): the planned `PlatformConfig`; or
- `blueprint` (a service stack): the planned `Blueprint`.
- `platformStack` (optional): the platform stack a service reads, as `<org>/<project>/<stack>`; defaults to
  `<this org>/<this project>/<blueprint.platform.stack>`.
- `kubeconfig` (secret; `platform: existing-cluster` and `edge-cluster`): the target cluster's kubeconfig.
- `clusterName` (`existing-cluster` only, optional): the existing EKS cluster's name, to bind the serving and sync
  ServiceAccounts with EKS Pod Identity. Without it, bind the roles yourself (IRSA or Pod Identity).
- `clusterAddons` (`existing-cluster`, `edge-cluster`): the add-ons the cluster runs (catalog ids), judged by the
  preview.
- `rolesAnywhereCaBundle` (`edge-cluster` with `s3://` sources and no ACM Private CA in the plan): the PEM bundle of
  the CA that issues the pods' certificates (the IAM Roles Anywhere trust anchor).
- `hfToken` (secret; required for a gated `hf://` model, `blueprints/catalog/huggingface.yaml`): Hugging Face token
  for the weights sync Job. Every key `pulumi up` requires is listed by `blueprints.contracts.deploy_inputs`.
- `apiKey` (secret, optional): the self-hosted endpoint's API key; default: a generated one (stack output `api_key`).
- `prometheusUrl` (optional, `existing-cluster` only): the Prometheus KEDA queries; on a platform, the platform's.
- `alarmTopicArn` (optional): an SNS topic the SageMaker CloudWatch alarms notify; default: the plan's
  `alerting.sns_topic_arn` (platform.yaml `alerting.sns_topic_arns`).
- `alertReceiverUrl` (secret; a platform whose `alerting.receiver` is set): the Alertmanager receiver's URL (Slack
  incoming webhook, webhook endpoint) or PagerDuty routing key.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from blueprints.core import defaults
from blueprints.contracts.sections import Archetype
from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.deploy_inputs import HF_TOKEN_KEY, deploy_inputs
from blueprints.requirements.hosting import Accelerator
from blueprints.core.errors import StackConfigError
from blueprints.contracts.stackconfig import (
    BLUEPRINT_KEY, PLATFORM_KEY, PLATFORM_STACK_KEY, PROJECT, ROLES_ANYWHERE_CA_KEY, blueprint_from_config,
    platform_from_config, platform_stack_override_problem,
)
from components.archetypes import (
    KUBERNETES_ARCHETYPES,
    KubernetesArchetypeArgs,
    ManagedEndpoint,
    ManagedEndpointArgs,
)
from components.platform import Platform, PlatformArgs
from blueprints.contracts.platform import PlatformOutputs
from components.exposure import scheme
from components.serving import ServiceTarget


def load_blueprint() -> Blueprint:
    """This stack's `Blueprint`, validated; raises `StackConfigError` naming the bad field."""
    value = pulumi.Config(PROJECT).require_object("blueprint")
    bp = blueprint_from_config(value, source=f"stack {pulumi.get_stack()} config {BLUEPRINT_KEY}")
    if bp.stack != pulumi.get_stack():
        pulumi.log.warn(f"blueprint is for stack {bp.stack!r} but this is stack {pulumi.get_stack()!r}")
    return bp


def platform_reference(bp: Blueprint) -> pulumi.StackReference:
    """The platform stack this service lands on: `servingblueprints:platformStack`, or
    `<organization>/<project>/<blueprint.platform.stack>` (the same backend and project)."""
    override = pulumi.Config(PROJECT).get("platformStack")
    problem = platform_stack_override_problem(override, bp) if override else None
    if problem:
        raise StackConfigError(f"stack {pulumi.get_stack()} config {PLATFORM_STACK_KEY}: {problem}")
    return pulumi.StackReference(override or f"{pulumi.get_organization()}/{pulumi.get_project()}/{bp.platform.stack}")


def kubernetes_target(bp: Blueprint) -> tuple[k8s.Provider, ServiceTarget]:
    """The cluster a Kubernetes archetype lands on: its shared platform (outputs through a StackReference) or an
    existing cluster (kubeconfig secret); (provider, target)."""
    config = pulumi.Config(PROJECT)
    if bp.platform.kind == "eks":
        ref = platform_reference(bp)
        provider = k8s.Provider(f"{bp.stack}-k8s", kubeconfig=ref.require_output("kubeconfig"),
                                enable_server_side_apply=True)
        pool = "gpu" if bp.compute.accelerator is Accelerator.NVIDIA_GPU else "cpu"
        # An internet-facing load balancer needs public subnets; an internal one stays in the private subnets.
        subnets = ref.require_output("public_subnet_ids" if scheme(bp) == "internet-facing" else "private_subnet_ids")
        cluster_name = ref.require_output("cluster_name")
        compliance = pulumi.Output.all(*[ref.get_output(f) for f in PlatformOutputs.COMPLIANCE_FIELDS]).apply(
            lambda values: {f: bool(v) for f, v in zip(PlatformOutputs.COMPLIANCE_FIELDS, values)})
        return provider, ServiceTarget(
            # A platform without that node class (or Karpenter) leaves the name dangling: the preview names it.
            cluster_name=cluster_name, node_class=ref.require_output("node_classes").apply(lambda nc: nc.get(pool, pool)),
            # A platform without kube-prometheus-stack exports none: the preview's deployability check names it.
            prometheus_url=ref.get_output("prometheus_url").apply(lambda url: url or "none-installed"),
            subnet_ids=subnets,
            vpc_cidrs=ref.require_output("vpc_cidr").apply(lambda cidr: [cidr]), platform_compliance=compliance,
            service_cidr=ref.require_output("service_cidr"),
            outputs={"platform": bp.platform.stack, "cluster_name": cluster_name})
    provider = k8s.Provider(f"{bp.stack}-k8s", kubeconfig=config.require_secret("kubeconfig"),
                            enable_server_side_apply=True)
    # An edge cluster is not EKS: no cluster name, no Pod Identity (its pods use IAM Roles Anywhere).
    cluster_name = config.get("clusterName") if bp.platform.kind == "existing-cluster" else None
    return provider, ServiceTarget(
        cluster_name=cluster_name, node_class=None,
        prometheus_url=config.get("prometheusUrl") or defaults.PROMETHEUS_URL,
        outputs={"cluster_name": cluster_name} if cluster_name else {})


def build_service(bp: Blueprint) -> dict[str, pulumi.Input]:
    """One archetype component for the blueprint; returns its outputs."""
    config = pulumi.Config(PROJECT)
    if bp.archetype is Archetype.SAGEMAKER_ENDPOINT:
        subnets, groups, extra = None, None, {}
        if bp.platform.stack is not None:  # private: the platform's VPC
            ref = platform_reference(bp)
            subnets = ref.require_output("private_subnet_ids")
            groups = [ref.require_output("workload_security_group_id")]
            extra = {"platform": bp.platform.stack, "vpc_id": ref.require_output("vpc_id")}
        topic = config.get("alarmTopicArn") or bp.alerting.sns_topic_arn
        endpoint = ManagedEndpoint(bp.stack, ManagedEndpointArgs(
            blueprint=bp, subnet_ids=subnets, security_group_ids=groups, alarm_topic_arns=[topic] if topic else []))
        return {**endpoint.outputs, **extra}
    provider, target = kubernetes_target(bp)
    component = KUBERNETES_ARCHETYPES[bp.archetype]
    ca_bundle = None
    if bp.roles_anywhere is not None and bp.roles_anywhere.acm_pca_arn is None:
        ca_bundle = config.require(ROLES_ANYWHERE_CA_KEY.split(":", 1)[1])
    # A gated Hugging Face model's sync Job fails with 401 without a token: required, so `pulumi up` stops at once.
    gated_model = HF_TOKEN_KEY in {i.key for i in deploy_inputs(bp)}
    hf_token = config.require_secret("hfToken") if gated_model else config.get_secret("hfToken")
    archetype = component(bp.stack, KubernetesArchetypeArgs(
        blueprint=bp, target=target, hf_token=hf_token, api_key=config.get_secret("apiKey"),
        roles_anywhere_ca_bundle=ca_bundle), opts=pulumi.ResourceOptions(providers=[provider]))
    return archetype.outputs


def main() -> None:
    """Entry point of the Pulumi program: build the stack's platform or archetype and export its outputs."""
    config = pulumi.Config(PROJECT)
    platform_value = config.get_object("platform")
    if platform_value is not None:
        cfg = platform_from_config(platform_value, source=f"stack {pulumi.get_stack()} config {PLATFORM_KEY}")
        if cfg.stack != pulumi.get_stack():
            pulumi.log.warn(f"platform config is for stack {cfg.stack!r} but this is stack {pulumi.get_stack()!r}")
        receiver = config.require_secret("alertReceiverUrl") if cfg.alerting.receiver is not None else None
        platform = Platform(cfg.stack, PlatformArgs(config=cfg, alert_receiver_url=receiver))
        pulumi.export("monthly_cost_usd", cfg.monthly_cost_usd)
        for key, value in platform.outputs().items():
            pulumi.export(key, value)
        return
    bp = load_blueprint()
    outputs = build_service(bp)
    pulumi.export("archetype", bp.archetype.value)
    pulumi.export("monthly_cost_usd", bp.predictions.monthly_cost_usd)
    for key, value in outputs.items():
        pulumi.export(key, value)
