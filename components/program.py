"""The Pulumi program: read this stack's blueprint from config and build its archetype.

`__main__.py` calls `main()`; the offline preview runs that same file under Pulumi's mock engine.

Config keys read here (all namespaced `servingblueprints:`):
- `blueprint` (required): the planned `Blueprint`.
- `kubeconfig` (secret; `platform: existing-cluster` only): the target cluster's kubeconfig.
- `clusterName` (`existing-cluster` only, optional): the existing EKS cluster's name, to bind the serving
  ServiceAccount to its IAM role with EKS Pod Identity. Without it, bind the role yourself (IRSA or Pod Identity).
- `existingVpc` (optional, object): `{"vpc_id", "private_subnet_ids", "public_subnet_ids"}`: use this VPC instead of
  creating one (see `components.network.ExistingVpc`).
- `hfToken` (secret, optional): Hugging Face token for the weights sync Job of gated `hf://` models.
- `prometheusUrl` (optional): the Prometheus server KEDA queries; defaults to kube-prometheus-stack's service
  (`blueprints.defaults.PROMETHEUS_URL`).
- `alarmTopicArn` (optional): an SNS topic the SageMaker CloudWatch alarms notify.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Callable

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from blueprints.blueprint import Archetype, Blueprint
from blueprints.requirements import Accelerator
from blueprints.stackconfig import BLUEPRINT_KEY, PROJECT, blueprint_from_config
from blueprints import defaults
from components.autoscaling import EndpointScaler, EndpointScalerArgs, KubernetesScaler, KubernetesScalerArgs
from components.cluster import Cluster, ClusterArgs, GpuDevicePlugin, GpuDevicePluginArgs
from components.labels import recommended_labels, sync_account_name
from components.monitoring import (
    EndpointMonitoring,
    EndpointMonitoringArgs,
    KubernetesMonitoring,
    KubernetesMonitoringArgs,
)
from components.network import ExistingVpc, Network, NetworkArgs
from components.onnx_service import OnnxRuntimeService, OnnxRuntimeServiceArgs
from components.sagemaker_endpoint import VARIANT_NAME, SageMakerEndpoint, SageMakerEndpointArgs, endpoint_name
from components.triton_service import TritonModelRepository, TritonModelRepositoryArgs, TritonService, TritonServiceArgs
from components.vllm_service import VllmService, VllmServiceArgs
from components.weights_delivery import weights_volume_gib
from components.weights_storage import WeightsStorage, WeightsStorageArgs
from components.weights_sync import WeightsSync, WeightsSyncArgs, hf_models, sync_policy_json, synced_models


def load_blueprint() -> Blueprint:
    """This stack's `Blueprint`, validated; raises `StackConfigError` naming the bad field."""
    config = pulumi.Config(PROJECT)
    value = config.require_object("blueprint")
    bp = blueprint_from_config(value, source=f"stack {pulumi.get_stack()} config {BLUEPRINT_KEY}")
    if bp.stack != pulumi.get_stack():
        pulumi.log.warn(f"blueprint is for stack {bp.stack!r} but this is stack {pulumi.get_stack()!r}")
    return bp


def existing_vpc() -> ExistingVpc | None:
    """`servingblueprints:existingVpc`, validated, or None."""
    value = pulumi.Config(PROJECT).get_object("existingVpc")
    return ExistingVpc.model_validate(value) if value is not None else None


def pod_identity_role(name: str, bp: Blueprint, policy_json: pulumi.Input[str]) -> aws.iam.Role:
    """An IAM role for EKS Pod Identity (trust `pods.eks.amazonaws.com`) with one inline policy."""
    trust = json.dumps({"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"Service": "pods.eks.amazonaws.com"},
        "Action": ["sts:AssumeRole", "sts:TagSession"]}]}, sort_keys=True)
    role = aws.iam.Role(f"{name}-role", assume_role_policy=trust, tags=bp.tags)
    aws.iam.RolePolicy(f"{name}-policy", role=role.id, policy=policy_json)
    return role


@dataclass
class KubernetesPlatform:
    """What the Kubernetes archetypes share: the provider, namespace, and (EKS) the cluster."""

    provider: k8s.Provider
    namespace: pulumi.Output[str]
    cluster_name: pulumi.Input[str] | None
    cluster: Cluster | None = None
    outputs: dict[str, pulumi.Input] = field(default_factory=dict)

    @property
    def opts(self) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(provider=self.provider)


def build_storage(bp: Blueprint) -> WeightsStorage:
    return WeightsStorage(f"{bp.stack}-weights", WeightsStorageArgs(
        tags=bp.tags, customer_managed_kms=bp.storage.customer_managed_kms,
        retain_on_delete=bp.storage.retain_on_delete,
        noncurrent_version_expiry_days=bp.storage.noncurrent_version_expiry_days))


def build_network(bp: Blueprint) -> Network:
    return Network(f"{bp.stack}-network", NetworkArgs(
        region=bp.region, tags=bp.tags, private_only=bp.network.private_only, nat_per_az=bp.production,
        existing=existing_vpc()))


def build_kubernetes(bp: Blueprint, app: str) -> KubernetesPlatform:
    """EKS (network, cluster, device plugin) or an existing cluster's kubeconfig; then the namespace."""
    name = bp.stack
    config = pulumi.Config(PROJECT)
    cluster = None
    outputs: dict[str, pulumi.Input] = {}
    if bp.platform.kind == "eks":
        network = build_network(bp)
        scratch = weights_volume_gib(hf_models(bp)) if hf_models(bp) else 0.0
        cluster = Cluster(name, ClusterArgs(blueprint=bp, subnet_ids=network.private_subnet_ids,
                                            security_group_ids=[network.workload_security_group_id],
                                            weights_sync_scratch_gib=scratch))
        provider = k8s.Provider(f"{name}-k8s", kubeconfig=cluster.kubeconfig, enable_server_side_apply=True)
        if bp.compute.accelerator is Accelerator.NVIDIA_GPU:
            GpuDevicePlugin(f"{name}-nvidia", GpuDevicePluginArgs(instance=bp.stack),
                            opts=pulumi.ResourceOptions(provider=provider))
        cluster_name: pulumi.Input[str] | None = cluster.cluster_name
        outputs.update(cluster_name=cluster.cluster_name, vpc_id=network.vpc_id)
        outputs["dashboards"] = {"eks": pulumi.Output.concat(
            f"https://{bp.region}.console.aws.amazon.com/eks/home?region={bp.region}#/clusters/",
            cluster.cluster_name)}
    else:
        provider = k8s.Provider(f"{name}-k8s", kubeconfig=config.require_secret("kubeconfig"),
                                enable_server_side_apply=True)
        cluster_name = config.get("clusterName")
        if cluster_name:
            outputs["cluster_name"] = cluster_name
    namespace = k8s.core.v1.Namespace(
        f"{name}-namespace",
        metadata={"name": bp.platform.namespace,
                  "labels": {**recommended_labels(name=app, instance=bp.stack, component="namespace"),
                             "pod-security.kubernetes.io/enforce": "baseline"}},
        opts=pulumi.ResourceOptions(provider=provider))
    return KubernetesPlatform(provider=provider, namespace=namespace.metadata.name, cluster_name=cluster_name,
                              cluster=cluster, outputs=outputs)


def bind_service_account(name: str, bp: Blueprint, platform: KubernetesPlatform, role: aws.iam.Role,
                         service_account: str) -> list[pulumi.Resource]:
    """EKS Pod Identity: the ServiceAccount gets `role` without static keys or annotations.

    Returns the association, which pods using the account must depend on: Pod Identity injects credentials when a
    pod is created, so a pod created before its association never gets them.
    """
    if platform.cluster_name is None:
        pulumi.log.warn(f"{name}: no cluster name (set servingblueprints:clusterName) - bind role "
                        "to the ServiceAccount yourself (EKS Pod Identity or IRSA)")
        return []
    depends = [platform.cluster.pod_identity_agent] if platform.cluster else []
    return [aws.eks.PodIdentityAssociation(name, cluster_name=platform.cluster_name, namespace=bp.platform.namespace,
                                           service_account=service_account, role_arn=role.arn, tags=bp.tags,
                                           opts=pulumi.ResourceOptions(depends_on=depends))]


def build_weights_sync(bp: Blueprint, storage: WeightsStorage, platform: KubernetesPlatform) -> list[pulumi.Resource]:
    """The source -> model store copy Jobs (after their identity); returns what serving pods must wait for."""
    models = synced_models(bp)
    if not models:
        return []
    token = pulumi.Config(PROJECT).get_secret("hfToken")
    if token is None and hf_models(bp):
        pulumi.log.warn("servingblueprints:hfToken is not set: the weights sync Job can only fetch public models "
                        "(set it with `pulumi config set --secret servingblueprints:hfToken ...`)")
    policy = sync_policy_json(storage.write_policy_json([m.name for m in models]), models)
    role = pod_identity_role(f"{bp.stack}-weights-sync", bp, policy)
    bindings = bind_service_account(f"{bp.stack}-weights-sync-identity", bp, platform, role,
                                    sync_account_name(bp.service))
    sync = WeightsSync(f"{bp.stack}-weights-sync", WeightsSyncArgs(
        blueprint=bp, bucket_name=storage.bucket_name, namespace=platform.namespace, hf_token=token,
        on_system_nodes=platform.cluster is not None),
        opts=pulumi.ResourceOptions(provider=platform.provider, depends_on=bindings))
    return [sync]


def serving_identity(bp: Blueprint, storage: WeightsStorage, platform: KubernetesPlatform, *,
                     list_repository_root: bool = False) -> tuple[aws.iam.Role, list[pulumi.Resource]]:
    """The serving pods' role (read of the models' prefixes) bound to `<service>-<engine>`; (role, bindings)."""
    role = pod_identity_role(f"{bp.stack}-serving", bp, storage.read_policy_json(
        [m.name for m in bp.models], list_repository_root=list_repository_root))
    bindings = bind_service_account(f"{bp.stack}-pod-identity", bp, platform, role,
                                    bp.workload_name)
    return role, bindings


def build_operations(bp: Blueprint, platform: KubernetesPlatform,
                     service: VllmService | TritonService | OnnxRuntimeService) -> dict[str, pulumi.Input]:
    """The workload's autoscaler (KEDA on the plan's signal, or a CPU HPA) and its SLO monitoring."""
    prometheus = pulumi.Config(PROJECT).get("prometheusUrl") or defaults.PROMETHEUS_URL
    scaler = KubernetesScaler(f"{bp.stack}-autoscaling", KubernetesScalerArgs(
        blueprint=bp, deployment_name=service.deployment_name, namespace=platform.namespace,
        prometheus_url=prometheus), opts=pulumi.ResourceOptions(provider=platform.provider, depends_on=[service]))
    monitoring = KubernetesMonitoring(f"{bp.stack}-monitoring", KubernetesMonitoringArgs(
        blueprint=bp, namespace=platform.namespace, selector=service.selector,
        metrics_port=service.metrics_port_name), opts=platform.opts)
    return {"autoscaler": scaler.kind, "alerts": monitoring.alert_names}


def build_vllm(bp: Blueprint) -> dict[str, pulumi.Input]:
    """Model store, cluster (EKS) or provider, weights sync, IAM identity and the vLLM service."""
    storage = build_storage(bp)
    platform = build_kubernetes(bp, "vllm")
    waits = build_weights_sync(bp, storage, platform)
    role, bindings = serving_identity(bp, storage, platform)
    service = VllmService(bp.stack, VllmServiceArgs(blueprint=bp, bucket_name=storage.bucket_name,
                                                    namespace=platform.namespace),
                          opts=pulumi.ResourceOptions(provider=platform.provider, depends_on=[*waits, *bindings]))
    return {"endpoint": service.endpoint, "weights_bucket": storage.bucket_name,
            "weights_uri": storage.model_uri(bp.model.name), "serving_role_arn": role.arn, **platform.outputs,
            **build_operations(bp, platform, service)}


def build_triton(bp: Blueprint) -> dict[str, pulumi.Input]:
    """Model store with a generated Triton repository, cluster or provider, and the Triton service."""
    storage = build_storage(bp)
    repository = TritonModelRepository(f"{bp.stack}-repository", TritonModelRepositoryArgs(
        blueprint=bp, bucket_name=storage.bucket_name, tags=bp.tags))
    platform = build_kubernetes(bp, "triton")
    waits = build_weights_sync(bp, storage, platform)
    role, bindings = serving_identity(bp, storage, platform, list_repository_root=True)
    service = TritonService(bp.stack, TritonServiceArgs(blueprint=bp, repository_uri=repository.repository_uri,
                                                        namespace=platform.namespace),
                            opts=pulumi.ResourceOptions(provider=platform.provider,
                                                        depends_on=[*waits, *bindings, repository]))
    return {"endpoint": service.endpoint, "weights_bucket": storage.bucket_name,
            "repository_uri": repository.repository_uri, "serving_role_arn": role.arn, **platform.outputs,
            **build_operations(bp, platform, service)}


def build_onnx(bp: Blueprint) -> dict[str, pulumi.Input]:
    """Model store with the model's generated config, cluster or provider, and the ONNX Runtime CPU service."""
    storage = build_storage(bp)
    repository = TritonModelRepository(f"{bp.stack}-repository", TritonModelRepositoryArgs(
        blueprint=bp, bucket_name=storage.bucket_name, tags=bp.tags))
    platform = build_kubernetes(bp, "onnxruntime")
    waits = build_weights_sync(bp, storage, platform)
    role, bindings = serving_identity(bp, storage, platform)
    service = OnnxRuntimeService(bp.stack, OnnxRuntimeServiceArgs(
        blueprint=bp, bucket_name=storage.bucket_name, namespace=platform.namespace,
        pin_to_node_pool=platform.cluster is not None),
        opts=pulumi.ResourceOptions(provider=platform.provider, depends_on=[*waits, *bindings, repository]))
    return {"endpoint": service.endpoint, "weights_bucket": storage.bucket_name,
            "weights_uri": storage.model_uri(bp.model.name), "serving_role_arn": role.arn, **platform.outputs,
            **build_operations(bp, platform, service)}


def build_sagemaker(bp: Blueprint) -> dict[str, pulumi.Input]:
    """Model store, (private_only) network, and the SageMaker endpoint with its execution role."""
    storage = build_storage(bp)
    network = build_network(bp) if bp.network.private_only else None
    topic = pulumi.Config(PROJECT).get("alarmTopicArn")
    monitoring = EndpointMonitoring(f"{bp.stack}-monitoring", EndpointMonitoringArgs(
        blueprint=bp, endpoint_name=endpoint_name(bp), variant_name=VARIANT_NAME,
        alarm_actions=[topic] if topic else []))
    endpoint = SageMakerEndpoint(bp.stack, SageMakerEndpointArgs(
        blueprint=bp, bucket_name=storage.bucket_name,
        kms_key_arn=storage.kms_key_arn,
        subnet_ids=network.private_subnet_ids if network else None,
        security_group_ids=[network.workload_security_group_id] if network else None,
        rollback_alarm_names=monitoring.alarm_names),
        opts=pulumi.ResourceOptions(depends_on=[monitoring]))
    EndpointScaler(f"{bp.stack}-autoscaling", EndpointScalerArgs(
        blueprint=bp, endpoint_name=endpoint.endpoint_name, variant_name=VARIANT_NAME))
    outputs: dict[str, pulumi.Input] = {
        "endpoint": endpoint.invocation_url, "endpoint_name": endpoint.endpoint_name,
        "weights_bucket": storage.bucket_name, "weights_uri": storage.model_uri(bp.model.name),
        "execution_role_arn": endpoint.execution_role.arn, "alarms": monitoring.alarm_names,
        "dashboards": {"sagemaker": pulumi.Output.concat(
            f"https://{bp.region}.console.aws.amazon.com/sagemaker/home?region={bp.region}#/endpoints/",
            endpoint.endpoint_name),
            "cloudwatch": pulumi.Output.concat(
            f"https://{bp.region}.console.aws.amazon.com/cloudwatch/home?region={bp.region}#dashboards/dashboard/",
            monitoring.dashboard_name),
            "logs": pulumi.Output.concat(
            f"https://{bp.region}.console.aws.amazon.com/cloudwatch/home?region={bp.region}"
            "#logsV2:log-groups/log-group/$252Faws$252Fsagemaker$252FEndpoints$252F", endpoint.endpoint_name)},
    }
    if network:
        outputs["vpc_id"] = network.vpc_id
    return outputs


BUILDERS: dict[Archetype, Callable[[Blueprint], dict[str, pulumi.Input]]] = {
    Archetype.VLLM_GPU: build_vllm,
    Archetype.TRITON_MULTI_MODEL: build_triton,
    Archetype.ONNX_CPU: build_onnx,
    Archetype.SAGEMAKER_ENDPOINT: build_sagemaker,
}


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
