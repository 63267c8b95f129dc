"""The four archetypes, each one `ComponentResource` composed from the building blocks and usable from any Pulumi
program: `VllmGpu`, `TritonMultiModel` and `OnnxCpu` on Kubernetes (a shared platform or an existing cluster),
and `ManagedEndpoint` (SageMaker real-time).

A Kubernetes archetype brings its own namespace, NodePool (on a platform), model store, Pod Identity roles, weights
sync Jobs, workload, autoscaler and monitoring; the platform's cluster, add-ons and node classes are read, never
created. Pass the cluster's Kubernetes provider through opts (`providers=[provider]`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi

from blueprints.core import defaults
from blueprints.contracts.sections import Archetype
from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.usage import usage_outputs
from blueprints.catalog.addons import load_platform_catalog
from blueprints.requirements.exposure import ExposureScope, ExposureVia
from components.access import ApiKey, ApiKeyArgs
from components.autoscaling import EndpointScaler, EndpointScalerArgs, instance_type_gate
from components.monitoring import EndpointMonitoring, EndpointMonitoringArgs
from components.onnx_service import OnnxRuntimeService, OnnxRuntimeServiceArgs
from components.sagemaker_endpoint import VARIANT_NAME, SageMakerEndpoint, SageMakerEndpointArgs, endpoint_name
from components.serving import (
    ServiceTarget,
    operations,
    placement,
    service_namespace,
    service_node_pool,
    serving_identity,
    storage,
    weights_sync,
)
from components.edge_weights import EdgeWeightsAccess, EdgeWeightsAccessArgs
from components.triton_service import (
    TritonModelRepository,
    TritonModelRepositoryArgs,
    TritonService,
    TritonServiceArgs,
    repository_configs,
)
from components.weights_delivery import StoreDelivery, WeightsDelivery
from components.weights_storage import WeightsStorage
from components.network_policy import default_deny
from blueprints.requirements.hosting import CpuArch
from components.cluster import POOL_LABEL, SYSTEM_POOL
from components.karpenter import ARCH_LABEL, NODE_ARCH
from components.vllm_service import VllmService, VllmServiceArgs
from components.weights_copy import WeightsCopy, WeightsCopyArgs
from components.weights_sync import S3_SCHEME
from components.workload import Endpoint


def exposure_summary(bp: Blueprint) -> str:
    """Who can reach the endpoint, one line (a stack output beside `endpoint`)."""
    exposure = bp.network.exposure
    cidrs = ", ".join(exposure.allowed_cidrs)
    if exposure.via is not None and not bp.network.aws_load_balancer:  # off AWS load balancers
        how = f"via {exposure.via.value}" + (f" ({bp.network.exposed_by})" if bp.network.exposed_by else "")
        who = (cidrs or f"the {bp.network.exposed_by} controller's clients" if exposure.via is ExposureVia.INGRESS
               else cidrs or "private networks")
        return (f"{exposure.scope.value} {how} ({'TLS' if exposure.tls else 'plain HTTP'}; from {who}); "
                "API key required")
    if exposure.scope is ExposureScope.PUBLIC:
        return f"public (TLS; from {cidrs}); API key required"
    return f"internal (the VPC{', ' + cidrs if cidrs else ''}); API key required"


@dataclass
class KubernetesArchetypeArgs:
    """Inputs of a Kubernetes archetype.

    Args:
        blueprint: the planned stack (its archetype must match the component).
        target: where it lands (`components.serving.ServiceTarget`).
        hf_token: Hugging Face token (a Pulumi secret) for gated `hf://` models. Defaults to none: public models only.
        api_key: the endpoint's API key (a Pulumi secret, `servingblueprints:apiKey`). Defaults to a generated one.
        roles_anywhere_ca_bundle: an edge cluster's IAM Roles Anywhere trust anchor CA bundle (PEM,
            `servingblueprints:rolesAnywhereCaBundle`), when the plan names no ACM Private CA. Defaults to none.
    """

    blueprint: Blueprint
    target: ServiceTarget
    hf_token: pulumi.Input[str] | None = None
    api_key: pulumi.Input[str] | None = None
    roles_anywhere_ca_bundle: pulumi.Input[str] | None = None


def exposed(bp: Blueprint) -> bool:
    """Whether the serving Service gets a load balancer. Not when the service scales to zero: a load balancer in front
    of zero pods resets the connection (and the NLB reports no request count, its flow metrics come every 60 s and
    not at zero, so it cannot wake the service); clients go through the KEDA HTTP interceptor
    (`components.autoscaling`), which holds the request while a replica starts."""
    return not bp.wakes_on_request


class _KubernetesArchetype(pulumi.ComponentResource):
    """The shared construction of the Kubernetes archetypes; subclasses build the workload."""

    TYPE = ""
    ARCHETYPE: Archetype
    #: The serving role may list the models root (Triton reads `config.pbtxt` beside each model).
    LIST_REPOSITORY_ROOT = False

    def __init__(self, name: str, args: KubernetesArchetypeArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        bp, target = args.blueprint, args.target
        if bp.archetype is not self.ARCHETYPE:
            raise ValueError(f"{type(self).__name__} builds archetype {self.ARCHETYPE.value}; the blueprint is "
                             f"{bp.archetype.value}")
        child = pulumi.ResourceOptions(parent=self)
        self.namespace = service_namespace(f"{name}-namespace", bp, target, child)
        namespace = self.namespace.metadata.name
        in_namespace = pulumi.ResourceOptions(parent=self, depends_on=[self.namespace])
        self.default_deny = default_deny(f"{name}-default-deny", bp, namespace, in_namespace)
        self.api_key = ApiKey(f"{name}-api-key", ApiKeyArgs(blueprint=bp, namespace=namespace, value=args.api_key),
                              opts=in_namespace)
        pcat = load_platform_catalog()
        via = bp.network.exposure.via
        self.access = Endpoint(
            api_key_secret=self.api_key.secret_name,
            vpc_cidrs=target.vpc_cidrs if target.vpc_cidrs is not None else list(defaults.PRIVATE_CIDRS),
            service_cidr=target.service_cidr,
            load_balancer_subnet_ids=target.subnet_ids,
            monitoring_namespace=pcat.addon("kube-prometheus-stack").namespace,
            interceptor_namespace=None if exposed(bp) else pcat.addon("keda-http-add-on").namespace,
            ingress_namespace=bp.network.exposure.ingress_namespace if via is ExposureVia.INGRESS else None)
        self.node_pool = service_node_pool(f"{name}-node-pool", bp, target.node_class, child) \
            if target.node_class is not None else None
        self.storage: WeightsStorage | None = None
        self.edge_access: EdgeWeightsAccess | None = None
        if bp.platform.kind == "edge-cluster":
            # No model store and no Pod Identity: pods read the sources with IAM Roles Anywhere (or a checksum).
            self.edge_access = EdgeWeightsAccess(f"{name}-weights-access", EdgeWeightsAccessArgs(
                blueprint=bp, namespace=namespace, ca_bundle=args.roles_anywhere_ca_bundle,
                repository_configs=repository_configs(bp) if self.TRITON_REPOSITORY else {}), opts=in_namespace)
            delivery: WeightsDelivery = self.edge_access.delivery
            before = [self.edge_access]
            identity = {"serving_role_arn": self.edge_access.delivery.role_arn,
                        "roles_anywhere_profile_arn": self.edge_access.delivery.profile_arn,
                        "roles_anywhere_trust_anchor_arn": self.edge_access.delivery.trust_anchor_arn,
                        "weights_source": [m.source_uri for m in bp.models]}
        else:
            self.storage = storage(f"{name}-weights", bp, child)
            waits = weights_sync(f"{name}-weights-sync", bp, self.storage, target, hf_token=args.hf_token,
                                 namespace=namespace, opts=in_namespace)
            self.role, bindings = serving_identity(f"{name}-serving", bp, self.storage, target, child,
                                                   list_repository_root=self.LIST_REPOSITORY_ROOT)
            delivery = StoreDelivery(self.storage.bucket_name)
            before = [*self._prepare(name, bp), *waits, *bindings]
            identity = {"weights_bucket": self.storage.bucket_name, "serving_role_arn": self.role.arn,
                        **self._extra_outputs(bp)}
        before += [self.node_pool] if self.node_pool else []
        self.workload = self._workload(f"{name}-server", bp, target, namespace, delivery,
                                       pulumi.ResourceOptions(parent=self, depends_on=[self.namespace, *before]))
        self.outputs: dict[str, pulumi.Input] = {
            "endpoint": self.workload.endpoint, "api_key": self.api_key.api_key,
            "exposure": exposure_summary(bp), "namespace": namespace, **identity, **target.outputs,
            **operations(name, bp, target, self.workload, namespace=namespace, opts=in_namespace),
            **usage_outputs(bp)}
        self.register_outputs(self.outputs)

    #: The server reads a Triton model repository (`config.pbtxt` beside the weights).
    TRITON_REPOSITORY = False

    def _prepare(self, name: str, bp: Blueprint) -> list[pulumi.Resource]:
        """Resources the workload waits for besides weights and identity (e.g. Triton's repository in the store)."""
        return []

    def _extra_outputs(self, bp: Blueprint) -> dict[str, pulumi.Input]:
        return {"weights_uri": self.storage.model_uri(bp.model.name)}  # type: ignore[union-attr]

    def _workload(self, name: str, bp: Blueprint, target: ServiceTarget, namespace: pulumi.Input[str],
                  weights: WeightsDelivery, opts: pulumi.ResourceOptions):
        raise NotImplementedError


class VllmGpu(_KubernetesArchetype):
    """Archetype `vllm-gpu`: vLLM's OpenAI server on GPU nodes with tensor parallel, KEDA on queue depth.

    Outputs: `endpoint` (the URL clients use), `api_key` (secret), `exposure` (who can reach it), `namespace`,
    `weights_bucket`, `weights_uri`, `serving_role_arn`, `autoscaler`, `alerts`, and how to use it
    (`blueprints.contracts.usage`): `api_key_command`, `example_request`, `reach`, `dashboards` (when monitored),
    `alerting`.
    """

    TYPE = "servingblueprints:index:VllmGpu"
    ARCHETYPE = Archetype.VLLM_GPU

    def _workload(self, name, bp, target, namespace, weights, opts):
        return VllmService(name, VllmServiceArgs(
            blueprint=bp, weights=weights, namespace=namespace, endpoint=self.access, expose=exposed(bp),
            node_selector=placement(bp, target),
            # The router runs on the platform's system nodes; its image is built for amd64 only (images.yaml).
            router_node_selector={**({POOL_LABEL: SYSTEM_POOL} if target.on_platform else {}),
                                  ARCH_LABEL: NODE_ARCH[CpuArch.X86_64]}), opts=opts)


class TritonMultiModel(_KubernetesArchetype):
    """Archetype `triton-multi-model`: Triton serving several models from a generated repository, GPU or CPU.

    Outputs: as `VllmGpu`, with `repository_uri` instead of `weights_uri`.
    """

    TYPE = "servingblueprints:index:TritonMultiModel"
    ARCHETYPE = Archetype.TRITON_MULTI_MODEL
    TRITON_REPOSITORY = True

    def _prepare(self, name, bp):
        self.repository = TritonModelRepository(f"{name}-repository", TritonModelRepositoryArgs(
            blueprint=bp, bucket_name=self.storage.bucket_name, tags=bp.tags), opts=pulumi.ResourceOptions(parent=self))
        return [self.repository]

    def _extra_outputs(self, bp):
        return {"repository_uri": self.repository.repository_uri}

    def _workload(self, name, bp, target, namespace, weights, opts):
        return TritonService(name, TritonServiceArgs(
            blueprint=bp, weights=weights, namespace=namespace, endpoint=self.access, expose=exposed(bp),
            node_selector=placement(bp, target)), opts=opts)


class OnnxCpu(_KubernetesArchetype):
    """Archetype `onnx-cpu`: ONNX Runtime (Triton's onnxruntime backend) on CPU nodes, threads = CPU limit, CPU HPA.

    Outputs: as `VllmGpu`.
    """

    TYPE = "servingblueprints:index:OnnxCpu"
    ARCHETYPE = Archetype.ONNX_CPU
    TRITON_REPOSITORY = True

    def _prepare(self, name, bp):
        self.repository = TritonModelRepository(f"{name}-repository", TritonModelRepositoryArgs(
            blueprint=bp, bucket_name=self.storage.bucket_name, tags=bp.tags), opts=pulumi.ResourceOptions(parent=self))
        return [self.repository]

    def _workload(self, name, bp, target, namespace, weights, opts):
        return OnnxRuntimeService(name, OnnxRuntimeServiceArgs(
            blueprint=bp, weights=weights, namespace=namespace, endpoint=self.access, expose=exposed(bp),
            node_selector=placement(bp, target)), opts=opts)


@dataclass
class ManagedEndpointArgs:
    """Inputs of `ManagedEndpoint`.

    Args:
        blueprint: the planned stack (archetype `sagemaker-endpoint`).
        subnet_ids, security_group_ids: the platform VPC's private subnets and workload security group, for a
            private endpoint (`network.private_only`); None otherwise.
        alarm_topic_arns: SNS topics the CloudWatch alarms notify. Defaults to none.
    """

    blueprint: Blueprint
    subnet_ids: pulumi.Input[list[str]] | None = None
    security_group_ids: list[pulumi.Input[str]] | None = None
    alarm_topic_arns: list[pulumi.Input[str]] = field(default_factory=list)


class ManagedEndpoint(pulumi.ComponentResource):
    """Archetype `sagemaker-endpoint`: model store (an `s3://` source copied into it: `WeightsCopy`), CloudWatch alarms
    and dashboard, the SageMaker endpoint (blue/green with auto-rollback on the alarms) reading the store, and
    target-tracking autoscaling. IAM-authorised: callers need `sagemaker:InvokeEndpoint` on it.

    Outputs: `endpoint`, `endpoint_name`, `weights_bucket`, `weights_uri`, `execution_role_arn`, `alarms`, `dashboards`,
    `example_request`, `reach`, `alerting`.
    """

    def __init__(self, name: str, args: ManagedEndpointArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("servingblueprints:index:ManagedEndpoint", name, None, opts)
        bp = args.blueprint
        if bp.archetype is not Archetype.SAGEMAKER_ENDPOINT:
            raise ValueError(f"ManagedEndpoint builds archetype sagemaker-endpoint; the blueprint is "
                             f"{bp.archetype.value}")
        child = pulumi.ResourceOptions(parent=self)
        self.storage = storage(f"{name}-weights", bp, child)
        copy = WeightsCopy(f"{name}-weights-copy", WeightsCopyArgs(blueprint=bp, model=bp.model, store=self.storage),
                           opts=child) if bp.model.source_uri.startswith(S3_SCHEME) else None
        # Registered before the endpoint: replaced (delete first) when the instance type changes, taking the
        # scalable target and its policy with it, so the endpoint update runs deregistered (see EndpointScaler).
        gate = instance_type_gate(f"{name}-autoscaling", bp, child)
        monitoring = EndpointMonitoring(f"{name}-monitoring", EndpointMonitoringArgs(
            blueprint=bp, endpoint_name=endpoint_name(bp), variant_name=VARIANT_NAME,
            alarm_actions=list(args.alarm_topic_arns)), opts=child)
        endpoint = SageMakerEndpoint(f"{name}-endpoint", SageMakerEndpointArgs(
            blueprint=bp, bucket_name=self.storage.bucket_name, kms_key_arn=self.storage.kms_key_arn,
            subnet_ids=args.subnet_ids, security_group_ids=args.security_group_ids,
            rollback_alarm_names=monitoring.rollback_alarm_names, instance_type_gate=gate, weights_ready=copy),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[monitoring]))
        EndpointScaler(f"{name}-autoscaling", EndpointScalerArgs(
            blueprint=bp, endpoint_name=endpoint.endpoint_name, variant_name=VARIANT_NAME, instance_type_gate=gate),
            opts=child)
        console = f"https://{bp.region}.console.aws.amazon.com"
        self.outputs: dict[str, pulumi.Input] = {
            "endpoint": endpoint.invocation_url, "endpoint_name": endpoint.endpoint_name,
            "weights_bucket": self.storage.bucket_name, "weights_uri": self.storage.model_uri(bp.model.name),
            "execution_role_arn": endpoint.execution_role.arn, "alarms": monitoring.alarm_names,
            "dashboards": {
                "sagemaker": pulumi.Output.concat(f"{console}/sagemaker/home?region={bp.region}#/endpoints/",
                                                  endpoint.endpoint_name),
                "cloudwatch": pulumi.Output.concat(f"{console}/cloudwatch/home?region={bp.region}"
                                                   "#dashboards/dashboard/", monitoring.dashboard_name),
                "logs": pulumi.Output.concat(f"{console}/cloudwatch/home?region={bp.region}#logsV2:log-groups/"
                                             "log-group/$252Faws$252Fsagemaker$252FEndpoints$252F",
                                             endpoint.endpoint_name)},
            **usage_outputs(bp),
        }
        self.register_outputs(self.outputs)


#: The component class of each Kubernetes archetype.
KUBERNETES_ARCHETYPES: dict[Archetype, type[_KubernetesArchetype]] = {
    Archetype.VLLM_GPU: VllmGpu, Archetype.TRITON_MULTI_MODEL: TritonMultiModel, Archetype.ONNX_CPU: OnnxCpu}
