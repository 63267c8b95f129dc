"""What every Kubernetes archetype builds around its workload, one way: its namespace, its Karpenter NodePool, the
model store, IAM identities bound through EKS Pod Identity, the weights sync Jobs, and autoscaling plus monitoring.

`ServiceTarget` says where a service lands: a shared platform (its outputs read through a StackReference) or an
existing cluster (a kubeconfig and the add-ons it declares). The archetype components (`components.archetypes`)
compose these parts; the program only chooses one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from blueprints.contracts.sections import (
    COMPLIANCE_ANNOTATION, COMPLIANCE_TAG, PLATFORM_COMPLIANCE_ANNOTATION, PRIVATE_ONLY_LABEL,
    encode_flags,
)
from blueprints.contracts.blueprint import Blueprint
from blueprints.requirements.hosting import Accelerator
from components.autoscaling import KubernetesScaler, KubernetesScalerArgs
from components.cluster import POOL_LABEL, SYSTEM_POOL, trust_policy
from components.karpenter import ARCH_LABEL, INSTANCE_TYPE_LABEL, NODE_ARCH, node_pool_name, node_pool_spec
from components.labels import recommended_labels, sync_account_name
from components.naming import ROLE, fit
from components.monitoring import KubernetesMonitoring, KubernetesMonitoringArgs
from components.weights_storage import WeightsStorage, WeightsStorageArgs
from components.lora_adapters import served_adapters
from components.weights_sync import WeightsSync, WeightsSyncArgs, hf_models, sync_policy_json, synced_models

#: Namespace label the AWS Load Balancer Controller's pod webhook selects: it injects readiness gates, so a rolling
#: update waits until the new pod is healthy in the NLB target group ([LBC] docs/deploy/pod_readiness_gate.md).
READINESS_GATE_LABEL = "elbv2.k8s.aws/pod-readiness-gate-inject"
POD_SECURITY_ENFORCE = "pod-security.kubernetes.io/enforce"
#: Why the namespace has its Pod Security level (beside the label, for a reviewer and an auditor).
POD_SECURITY_REASON = "servingblueprints.io/pod-security-reason"
#: Every pod a service runs (serving Deployment and weights sync Jobs) is built by `components.hardening`.
RESTRICTED_REASON = ("every pod of this service runs non-root with an explicit UID/GID, no privilege escalation, all "
                     "capabilities dropped and seccomp RuntimeDefault (components/hardening.py); `blueprint preview` "
                     "checks each pod against this level")


@dataclass
class ServiceTarget:
    """Where a Kubernetes service lands. Pass the cluster's Kubernetes provider through the archetype's opts.

    Attributes:
        cluster_name: the EKS cluster, to bind ServiceAccounts with EKS Pod Identity; None on a cluster whose name
            is not known (then the roles must be bound by hand, and the program warns).
        node_class: the platform's EC2NodeClass for this service's NodePool; None on an existing cluster (whose
            capacity is not ours to manage).
        prometheus_url: the Prometheus server KEDA queries.
        vpc_cidrs: the VPC's CIDR(s) (the load balancer's addresses, interface endpoints); None: unknown (an existing
            cluster), then the private address space stands in.
        service_cidr: the cluster's Service CIDR (the platform's `service_cidr` output); None: unknown (an existing
            or edge cluster).
        platform_compliance: the platform's compliance settings as its outputs report them (`audit_logging`,
            `private_endpoint`, `secrets_kms`), recorded on the namespace; None on an existing cluster.
        subnet_ids: subnets for the load balancer (the platform's private or public ones); None: let the load
            balancer controller discover tagged subnets.
        outputs: stack outputs to export besides the archetype's own (cluster name, dashboards).
    """

    cluster_name: pulumi.Input[str] | None
    node_class: pulumi.Input[str] | None
    prometheus_url: pulumi.Input[str]
    subnet_ids: pulumi.Input[list[str]] | None = None
    outputs: dict[str, pulumi.Input] = field(default_factory=dict)
    vpc_cidrs: pulumi.Input[list[str]] | None = None
    service_cidr: pulumi.Input[str] | None = None
    platform_compliance: pulumi.Input[dict[str, bool]] | None = None

    @property
    def on_platform(self) -> bool:
        return self.node_class is not None


def placement(bp: Blueprint, target: ServiceTarget) -> dict[str, str]:
    """The serving pods' nodeSelector: on a platform, the service's own NodePool (its pool label and instance type);
    on an existing cluster, the CPU architecture and, for GPUs, the planned instance type; on an edge cluster, the
    architecture of its owned nodes."""
    selector = {ARCH_LABEL: NODE_ARCH[bp.compute.cpu_arch]}
    if target.on_platform:
        selector[POOL_LABEL] = node_pool_name(bp)
    if bp.compute.instance_type and (target.on_platform or bp.compute.accelerator is Accelerator.NVIDIA_GPU):
        selector[INSTANCE_TYPE_LABEL] = bp.compute.instance_type
    return selector


def service_namespace(name: str, bp: Blueprint, target: ServiceTarget, opts: pulumi.ResourceOptions, *,
                      pod_security: str = "restricted", reason: str = RESTRICTED_REASON) -> k8s.core.v1.Namespace:
    """The service's own namespace (named after it), set up before any pod exists: its Pod Security level with the
    reason beside it (`restricted` unless a pod needs less, then `baseline` and why), the load balancer's
    readiness-gate injection, the stack's derived `private-only` posture, and the platform's compliance settings as
    the platform reports them (checked against the stack's compliance record by the policy pack)."""
    if pod_security not in ("restricted", "baseline"):
        raise ValueError(f"pod_security {pod_security!r}: a service namespace is restricted or baseline")
    annotations: dict[str, pulumi.Input[str]] = {POD_SECURITY_REASON: reason}
    if bp.storage is None:  # no model store bucket to tag with the stack's compliance record (an edge cluster)
        annotations[COMPLIANCE_ANNOTATION] = bp.compliance.to_tag()
    if target.platform_compliance is not None:
        annotations[PLATFORM_COMPLIANCE_ANNOTATION] = pulumi.Output.from_input(target.platform_compliance).apply(
            encode_flags)
    labels = {**recommended_labels(name=bp.engine.kind, instance=bp.stack, component="namespace"),
              POD_SECURITY_ENFORCE: pod_security, PRIVATE_ONLY_LABEL: str(bp.network.private_only).lower()}
    if bp.network.aws_load_balancer:  # readiness gates are the AWS Load Balancer Controller's
        labels[READINESS_GATE_LABEL] = "enabled"
    return k8s.core.v1.Namespace(
        name, metadata={"name": bp.platform.namespace, "labels": labels, "annotations": annotations}, opts=opts)


def service_node_pool(name: str, bp: Blueprint, node_class: pulumi.Input[str],
                      opts: pulumi.ResourceOptions) -> k8s.apiextensions.CustomResource:
    """The service's Karpenter NodePool (`components.karpenter.node_pool_spec`) on the platform's node class."""
    return k8s.apiextensions.CustomResource(
        name, api_version="karpenter.sh/v1", kind="NodePool",
        metadata={"name": node_pool_name(bp), "labels": recommended_labels(
            name=bp.engine.kind, instance=bp.stack, component="node-pool")},
        spec=pulumi.Output.from_input(node_class).apply(lambda nc: node_pool_spec(bp, node_class=nc)),
        opts=opts)


def storage(name: str, bp: Blueprint, opts: pulumi.ResourceOptions) -> WeightsStorage:
    """The stack's model store; its bucket also carries the stack's compliance record (`COMPLIANCE_TAG`)."""
    return WeightsStorage(name, WeightsStorageArgs(
        tags=bp.tags, bucket_tags={COMPLIANCE_TAG: bp.compliance.to_tag()},
        customer_managed_kms=bp.storage.customer_managed_kms,
        retain_on_delete=bp.storage.retain_on_delete,
        noncurrent_version_expiry_days=bp.storage.noncurrent_version_expiry_days), opts=opts)


def pod_identity_role(name: str, bp: Blueprint, policy_json: pulumi.Input[str],
                      opts: pulumi.ResourceOptions) -> aws.iam.Role:
    """An IAM role for EKS Pod Identity (trust `pods.eks.amazonaws.com`) with one inline policy."""
    role = aws.iam.Role(fit(name, "role", ROLE),
                        assume_role_policy=trust_policy("pods.eks.amazonaws.com", tag_session=True),
                        tags=bp.tags, opts=opts)
    aws.iam.RolePolicy(f"{name}-policy", role=role.id, policy=policy_json, opts=opts)
    return role


def bind_service_account(name: str, bp: Blueprint, target: ServiceTarget, role: aws.iam.Role, service_account: str,
                         opts: pulumi.ResourceOptions) -> list[pulumi.Resource]:
    """EKS Pod Identity: the ServiceAccount gets `role` without static keys or annotations.

    Returns the association, which pods using the account must depend on: Pod Identity injects credentials when a
    pod is created, so a pod created before its association never gets them.
    """
    if target.cluster_name is None:
        pulumi.log.warn(f"{name}: no cluster name (set servingblueprints:clusterName) - bind the role to the "
                        "ServiceAccount yourself (EKS Pod Identity or IRSA)")
        return []
    return [aws.eks.PodIdentityAssociation(name, cluster_name=target.cluster_name, namespace=bp.platform.namespace,
                                           service_account=service_account, role_arn=role.arn, tags=bp.tags,
                                           opts=opts)]


def weights_sync(name: str, bp: Blueprint, store: WeightsStorage, target: ServiceTarget, *,
                 hf_token: pulumi.Input[str] | None, namespace: pulumi.Input[str],
                 opts: pulumi.ResourceOptions) -> list[pulumi.Resource]:
    """The source -> model store copy Jobs (after their identity); returns what serving pods must wait for."""
    models = synced_models(bp)
    if not models:
        return []
    if hf_token is None and hf_models(bp):
        pulumi.log.warn("servingblueprints:hfToken is not set: the weights sync Job can only fetch public models "
                        "(set it with `pulumi config set --secret servingblueprints:hfToken ...`)")
    policy = sync_policy_json(store.write_policy_json([m.name for m in models]), models)
    role = pod_identity_role(f"{name}-identity", bp, policy, opts)
    bindings = bind_service_account(f"{name}-binding", bp, target, role, sync_account_name(bp.service), opts)
    sync = WeightsSync(name, WeightsSyncArgs(
        blueprint=bp, bucket_name=store.bucket_name, namespace=namespace, hf_token=hf_token,
        node_selector={POOL_LABEL: SYSTEM_POOL} if target.on_platform else None),
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=bindings)))
    return [sync]


def serving_identity(name: str, bp: Blueprint, store: WeightsStorage, target: ServiceTarget,
                     opts: pulumi.ResourceOptions, *,
                     list_repository_root: bool = False) -> tuple[aws.iam.Role, list[pulumi.Resource]]:
    """The serving pods' role (read of the models' prefixes) bound to `<service>-<engine>`; (role, bindings)."""
    # The models' prefixes and, on vLLM with LoRA, the adapters' (`models/<adapter>/`, copied at start).
    names = [*(m.name for m in bp.models), *(a.name for a in served_adapters(bp))]
    role = pod_identity_role(name, bp, store.read_policy_json(names, list_repository_root=list_repository_root), opts)
    return role, bind_service_account(f"{name}-binding", bp, target, role, bp.workload_name, opts)


def operations(name: str, bp: Blueprint, target: ServiceTarget, workload, *, namespace: pulumi.Input[str],
               opts: pulumi.ResourceOptions) -> dict[str, pulumi.Input]:
    """The workload's autoscaler (KEDA on the plan's signal, or a CPU HPA; none for a fixed replica count) and its
    SLO monitoring (only where the cluster runs kube-prometheus-stack, `Blueprint.monitored`). A service that scales
    to zero is reached through the KEDA HTTP interceptor: its `endpoint` output is the proxy URL, ending in the API's
    base path like every endpoint (`blueprints.contracts.client_api`)."""
    outputs: dict[str, pulumi.Input] = {"autoscaler": f"none ({bp.autoscaling.min_replicas} fixed replicas)",
                                        "alerts": []}
    if bp.autoscaling.autoscaled:
        scaler = KubernetesScaler(f"{name}-autoscaling", KubernetesScalerArgs(
            blueprint=bp, deployment_name=workload.deployment_name, namespace=namespace,
            prometheus_url=target.prometheus_url, service_name=workload.service_name),
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[workload])))
        outputs["autoscaler"] = scaler.kind
        if scaler.endpoint is not None:
            outputs["endpoint"] = scaler.endpoint
    if bp.monitored:
        monitoring = KubernetesMonitoring(f"{name}-monitoring", KubernetesMonitoringArgs(
            blueprint=bp, namespace=namespace, selector=workload.selector, metrics_port=workload.metrics_port_name),
            opts=opts)
        outputs["alerts"] = monitoring.alert_names
    return outputs
