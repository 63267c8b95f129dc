"""ClusterAddons: the Helm add-ons of a shared platform, each a `helm.v3.Release` with an explicit name, its pinned
chart version, and `depends_on` edges so that every CRD exists before a custom resource of it and every controller
is running before what it serves.

`helm.v3.Release` is a real Helm install that waits for its resources and runs chart hooks (kube-prometheus-stack's
admission certificates come from a pre-install hook Job, which `helm.v4.Chart` would skip). Chart facts (release
names, namespaces, CRDs, Pod Security levels) are catalog data (`blueprints/catalog/addons.yaml`); the values set
here are each chart's documented keys at the pinned version (sources in the catalog entry).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
import pulumi_random as random

from blueprints.catalog.addons import HelmAddon, load_platform_catalog
from blueprints.catalog.iam import policy_document
from blueprints.contracts.platform import PlatformAlerting, PlatformConfig, prometheus_service_url
from blueprints.contracts.usage import GRAFANA_ADMIN_SECRET
from blueprints.requirements.platform_file import ReceiverKind
from components import karpenter
from components.cluster import GPU_PRESENT_LABEL, GPU_TOLERATION, SYSTEM_NODES, trust_policy
from components.labels import recommended_labels
from components.naming import POLICY, ROLE, fit

#: Pod Security levels from least to most strict; a namespace gets the least strict level its add-ons need.
POD_SECURITY_LEVELS = ("privileged", "baseline", "restricted")
#: The AWS Load Balancer Controller's ServiceAccount for release `aws-load-balancer-controller` (chart fullname).
LBC_SERVICE_ACCOUNT = "aws-load-balancer-controller"
#: The platform's default StorageClass (EBS CSI, gp3, encrypted): Prometheus and Alertmanager volumes.
STORAGE_CLASS = "gp3"
PROMETHEUS_VOLUME_GIB = 50
PROMETHEUS_RETENTION = "15d"
#: The Secret holding the Alertmanager receiver's URL (or PagerDuty routing key), mounted by the Prometheus Operator
#: at /etc/alertmanager/secrets/<name>/ (Alertmanager CRD `spec.secrets`; KPS `alertmanager.alertmanagerSpec.secrets`).
ALERT_RECEIVER_SECRET = "alertmanager-receiver"
ALERT_RECEIVER_FILE = f"/etc/alertmanager/secrets/{ALERT_RECEIVER_SECRET}/url"
#: Controllers run on the system node group, never on a service's Karpenter nodes (which they would keep alive).


#: The chart's alerts that are no page: Watchdog (always firing: the pipeline's heartbeat) and InfoInhibitor (fires
#: while info alerts are inhibited); the chart routes Watchdog to `'null'` ([KPS] values.yaml L553-593).
SILENT_ALERTS = ("Watchdog", "InfoInhibitor")
#: The chart's default inhibition rules ([KPS] values.yaml L556-578), given whole like every other key.
INHIBIT_RULES = [
    {"source_matchers": ["severity = critical"], "target_matchers": ["severity =~ warning|info"],
     "equal": ["namespace", "alertname"]},
    {"source_matchers": ["severity = warning"], "target_matchers": ["severity = info"],
     "equal": ["namespace", "alertname"]},
    {"source_matchers": ["alertname = InfoInhibitor"], "target_matchers": ["severity = info"], "equal": ["namespace"]},
    {"target_matchers": ["alertname = InfoInhibitor"]},
]


def alertmanager_config(alerting: PlatformAlerting) -> dict:
    """kube-prometheus-stack's `alertmanager.config` for the platform's receiver: every alert to it but the chart's
    Watchdog heartbeat and InfoInhibitor (`SILENT_ALERTS`), which go to `'null'`. Every key is given whole (global,
    inhibit_rules, route, receivers, templates; [KPS] values.yaml L553-593), so the merged configuration is exactly
    this one: what `amtool check-config` and `amtool config routes test` judge in the tests. The URL is read from
    `ALERT_RECEIVER_FILE` (Alertmanager: slack `api_url_file`, webhook `url_file` since v0.26, pagerduty
    `routing_key_file` since v0.25; prometheus/alertmanager docs/configuration.md)."""
    kind = alerting.receiver
    if kind is None:
        raise ValueError("no receiver to configure")
    if kind is ReceiverKind.SLACK:
        target = {"slack_configs": [{"api_url_file": ALERT_RECEIVER_FILE, "send_resolved": True,
                                     **({"channel": alerting.slack_channel} if alerting.slack_channel else {})}]}
    elif kind is ReceiverKind.PAGERDUTY:
        target = {"pagerduty_configs": [{"routing_key_file": ALERT_RECEIVER_FILE, "send_resolved": True}]}
    else:
        target = {"webhook_configs": [{"url_file": ALERT_RECEIVER_FILE, "send_resolved": True}]}
    return {
        "global": {"resolve_timeout": "5m"},
        "inhibit_rules": INHIBIT_RULES,
        "route": {"group_by": ["namespace", "alertname"], "group_wait": "30s", "group_interval": "5m",
                  "repeat_interval": "4h", "receiver": kind.value,
                  "routes": [{"receiver": "null", "matchers": [f'alertname = "{name}"']} for name in SILENT_ALERTS]},
        "receivers": [{"name": "null"}, {"name": kind.value, **target}],
        "templates": ["/etc/alertmanager/config/*.tmpl"],
    }


def namespace_pod_security(addons: list[HelmAddon]) -> dict[str, str]:
    """Namespace -> the Pod Security level its add-ons need (the least strict among them)."""
    levels: dict[str, str] = {}
    for addon in addons:
        current = levels.get(addon.namespace, "restricted")
        levels[addon.namespace] = min(current, addon.pod_security, key=POD_SECURITY_LEVELS.index)
    return levels


@dataclass
class ClusterAddonsArgs:
    """Inputs of `ClusterAddons`.

    Args:
        platform: the planned platform (its `addons` and `node_classes`).
        cluster_name: the EKS cluster.
        cluster_ready: what every release waits for (system nodes, CoreDNS, kube-proxy, EBS CSI, access entries).
        vpc_id: the platform's VPC (the load balancer controller needs it: pods cannot reach IMDS).
        subnet_ids: private subnets Karpenter launches nodes into.
        node_security_group_id: the cluster security group Karpenter nodes join.
        alert_receiver_url: the Alertmanager receiver's URL or routing key (a Pulumi secret), for
            `platform.alerting.receiver`. Defaults to none: no receiver.
    """

    platform: PlatformConfig
    cluster_name: pulumi.Input[str]
    cluster_ready: list[pulumi.Resource]
    vpc_id: pulumi.Input[str]
    subnet_ids: pulumi.Input[list[str]]
    node_security_group_id: pulumi.Input[str]
    alert_receiver_url: pulumi.Input[str] | None = None


class ClusterAddons(pulumi.ComponentResource):
    """Namespaces, add-on identities and Helm releases of a platform; Karpenter's EC2NodeClasses; the gp3
    StorageClass. Pass the cluster's Kubernetes provider through `opts` (`providers=[provider]`).

    Outputs: `releases` (add-on id -> release name), `prometheus_url`, `node_classes`.
    """

    def __init__(self, name: str, args: ClusterAddonsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("servingblueprints:index:ClusterAddons", name, None, opts)
        cfg = args.platform
        pcat = load_platform_catalog()
        wanted = {a.id: a.version for a in cfg.addons}
        addons = [pcat.addon(a) for a in wanted]
        self._name = name
        self._cfg = cfg
        self._ready = list(args.cluster_ready)
        child = pulumi.ResourceOptions(parent=self)
        self.namespaces = self._namespaces(addons)
        self.releases: dict[str, k8s.helm.v3.Release] = {}
        self.storage_class = k8s.storage.v1.StorageClass(
            f"{name}-gp3", metadata={"name": STORAGE_CLASS, "labels": recommended_labels(
                name="ebs-csi", instance=cfg.stack, component="storage-class"), "annotations": {
                "storageclass.kubernetes.io/is-default-class": "true"}},
            provisioner="ebs.csi.aws.com", volume_binding_mode="WaitForFirstConsumer", allow_volume_expansion=True,
            reclaim_policy="Delete", parameters={"type": "gp3", "encrypted": "true"},
            opts=pulumi.ResourceOptions(parent=self, depends_on=self._ready))
        self.karpenter_aws = None
        if "karpenter" in wanted:
            self.karpenter_aws = karpenter.karpenter_aws(f"{name}-karpenter", cfg, args.cluster_name, child)
            crd = self._release(pcat.addon("karpenter"), wanted["karpenter"], crd_chart=True)
            self._release(pcat.addon("karpenter"), wanted["karpenter"], depends=[crd, *self.karpenter_aws.ready],
                          values={"settings": {"clusterName": cfg.cluster_name,
                                               "interruptionQueue": cfg.cluster_name,
                                               # A private platform reaches AWS APIs only through VPC endpoints:
                                               # no Price List look-ups, which have none (endpoints.yaml).
                                               "isolatedVPC": bool(cfg.network.interface_endpoints)},
                                  "serviceAccount": {"name": karpenter.SERVICE_ACCOUNT},
                                  "nodeSelector": SYSTEM_NODES,
                                  # The getting-started guide's controller resources (step08).
                                  "controller": {"resources": {"requests": {"cpu": "1", "memory": "1Gi"},
                                                               "limits": {"cpu": "1", "memory": "1Gi"}}}})
        if "aws-load-balancer-controller" in wanted:
            self._load_balancer_controller(pcat.addon("aws-load-balancer-controller"),
                                           wanted["aws-load-balancer-controller"], args)
        if "kube-prometheus-stack" in wanted:
            self._prometheus(pcat.addon("kube-prometheus-stack"), wanted["kube-prometheus-stack"],
                             args.alert_receiver_url)
        if "keda" in wanted:
            self._release(pcat.addon("keda"), wanted["keda"], values={"nodeSelector": SYSTEM_NODES})
        if "keda-http-add-on" in wanted:
            self._release(pcat.addon("keda-http-add-on"), wanted["keda-http-add-on"],
                          depends=[self.releases["keda"]],
                          values={"operator": {"nodeSelector": SYSTEM_NODES},
                                  "scaler": {"nodeSelector": SYSTEM_NODES},
                                  "interceptor": {
                              "nodeSelector": SYSTEM_NODES,
                              # Streamed responses: many concurrent connections per interceptor ([HTTP] values:
                              # 64Mi default limit, small for many SSE streams).
                              "resources": {"requests": {"cpu": "250m", "memory": "128Mi"},
                                            "limits": {"cpu": "1", "memory": "512Mi"}}}})
        if "metrics-server" in wanted:
            self._release(pcat.addon("metrics-server"), wanted["metrics-server"],
                          values={"nodeSelector": SYSTEM_NODES})
        if "nvidia-device-plugin" in wanted:
            # Default affinity: nodes labelled nvidia.com/gpu.present=true (GPU NodePools set it); tolerates the GPU
            # taint by default.
            self._release(pcat.addon("nvidia-device-plugin"), wanted["nvidia-device-plugin"])
        if "dcgm-exporter" in wanted:
            self._release(pcat.addon("dcgm-exporter"), wanted["dcgm-exporter"],
                          depends=[self.releases["kube-prometheus-stack"]],
                          values={"serviceMonitor": {"enabled": True, "honorLabels": True, "interval": "15s"},
                                  "tolerations": [GPU_TOLERATION],
                                  "nodeSelector": {GPU_PRESENT_LABEL: "true"}})
        self.node_classes = self._node_classes(args)
        kps = pcat.addon("kube-prometheus-stack")
        self.prometheus_url = prometheus_service_url(kps.release, kps.namespace) if "kube-prometheus-stack" in \
            wanted else None
        self.register_outputs({"releases": {k: r.name for k, r in self.releases.items()},
                               "prometheus_url": self.prometheus_url,
                               "node_classes": [nc.name for nc in cfg.node_classes]})

    def _namespaces(self, addons: list[HelmAddon]) -> dict[str, k8s.core.v1.Namespace]:
        created = {}
        for namespace, level in sorted(namespace_pod_security(addons).items()):
            if namespace == "kube-system":
                continue  # exists; no Pod Security enforcement there
            created[namespace] = k8s.core.v1.Namespace(
                f"{self._name}-{namespace}-namespace",
                metadata={"name": namespace, "labels": {
                    **recommended_labels(name=namespace, instance=self._cfg.stack, component="add-on-namespace"),
                    "pod-security.kubernetes.io/enforce": level}},
                opts=pulumi.ResourceOptions(parent=self, depends_on=self._ready))
        return created

    def _release(self, addon: HelmAddon, version: str, *, values: dict | None = None,
                 depends: list[pulumi.Resource] | None = None, crd_chart: bool = False) -> k8s.helm.v3.Release:
        """One add-on release (or, with `crd_chart`, its CRD chart) named as the catalog says."""
        chart = addon.crd_chart if crd_chart else addon.chart
        release = f"{addon.release}-crd" if crd_chart else addon.release
        oci = addon.repository.startswith("oci://")
        namespace = self.namespaces.get(addon.namespace)
        created = k8s.helm.v3.Release(
            f"{self._name}-{release}",
            name=release, namespace=addon.namespace, version=version,
            chart=f"{addon.repository}/{chart}" if oci else chart,
            repository_opts=None if oci else {"repo": addon.repository},
            skip_crds=bool(addon.crd_chart) and not crd_chart, values=values or {}, timeout=900,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[
                *self._ready, *([namespace] if namespace is not None else []), *(depends or [])]))
        if not crd_chart:
            self.releases[addon.id] = created
        return created

    def _load_balancer_controller(self, addon: HelmAddon, version: str, args: ClusterAddonsArgs) -> None:
        """IAM policy of the same version (catalog), its role through Pod Identity, then the chart with region and
        VPC id (no IMDS from pods), a webhook certificate kept across upgrades, and no Service mutator webhook (it
        would guard every Service in the cluster with failurePolicy Fail)."""
        cfg = self._cfg
        child = pulumi.ResourceOptions(parent=self)
        partition = aws.get_partition_output(opts=pulumi.InvokeOutputOptions(parent=self))
        role = aws.iam.Role(fit(self._name, "lbc-role", ROLE), assume_role_policy=trust_policy(
            "pods.eks.amazonaws.com", tag_session=True), tags=cfg.tags, opts=child)
        policy = aws.iam.Policy(fit(self._name, "lbc-policy", POLICY), policy=partition.partition.apply(
            lambda p: policy_document("aws-load-balancer-controller", {"Partition": p})), tags=cfg.tags, opts=child)
        attachment = aws.iam.RolePolicyAttachment(f"{self._name}-lbc-policy", role=role.name, policy_arn=policy.arn,
                                                  opts=child)
        association = aws.eks.PodIdentityAssociation(
            f"{self._name}-lbc-identity", cluster_name=args.cluster_name, namespace=addon.namespace,
            service_account=LBC_SERVICE_ACCOUNT, role_arn=role.arn, tags=cfg.tags, opts=child)
        self._release(addon, version, depends=[attachment, association], values={
            "clusterName": cfg.cluster_name, "region": cfg.region, "vpcId": args.vpc_id,
            "serviceAccount": {"name": LBC_SERVICE_ACCOUNT}, "keepTLSSecret": True,
            "enableServiceMutatorWebhook": False, "nodeSelector": SYSTEM_NODES,
            # The platform makes NLBs only: no WAF or Shield calls (their APIs have no VPC endpoint; the EKS user
            # guide's private-cluster settings; the chart renders the flags only for booleans).
            "enableWaf": False, "enableWafv2": False, "enableShield": False})

    def _prometheus(self, addon: HelmAddon, version: str, receiver_url: pulumi.Input[str] | None) -> None:
        """kube-prometheus-stack selecting every ServiceMonitor/PodMonitor/PrometheusRule in the cluster (not only
        `release`-labelled ones), on persistent gp3 storage, Grafana's dashboard sidecar on, a generated Grafana
        admin password held in a Secret (the chart would otherwise regenerate it on each render), and Alertmanager
        routing to the platform's receiver, whose URL is read from a mounted Secret (never in the chart's values)."""
        password = random.RandomPassword(f"{self._name}-grafana-admin", length=32, special=False,
                                         opts=pulumi.ResourceOptions(parent=self))
        secret = k8s.core.v1.Secret(
            f"{self._name}-grafana-admin", metadata={
                "name": GRAFANA_ADMIN_SECRET, "namespace": addon.namespace,
                "labels": recommended_labels(name="grafana", instance=self._cfg.stack, component="admin-credentials")},
            type="Opaque", string_data={"admin-user": "admin", "admin-password": password.result},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.namespaces[addon.namespace]]))
        volume = {"volumeClaimTemplate": {"spec": {"storageClassName": STORAGE_CLASS, "accessModes": ["ReadWriteOnce"],
                                                   "resources": {"requests": {"storage": f"{PROMETHEUS_VOLUME_GIB}Gi"}}}}}
        selectors = {f"{kind}SelectorNilUsesHelmValues": False
                     for kind in ("serviceMonitor", "podMonitor", "rule", "probe", "scrapeConfig")}
        depends: list[pulumi.Resource] = [self.storage_class, secret]
        alertmanager: dict = {"alertmanagerSpec": {"nodeSelector": SYSTEM_NODES}}
        if self._cfg.alerting.receiver is not None:
            if receiver_url is None:
                raise ValueError(f"platform {self._cfg.stack}: alerting.receiver is {self._cfg.alerting.receiver.value} "
                                 "but no receiver URL was given")
            depends.append(k8s.core.v1.Secret(
                f"{self._name}-alert-receiver", metadata={
                    "name": ALERT_RECEIVER_SECRET, "namespace": addon.namespace,
                    "labels": recommended_labels(name="alertmanager", instance=self._cfg.stack,
                                                 component="receiver-credentials")},
                type="Opaque", string_data={"url": receiver_url},
                opts=pulumi.ResourceOptions(parent=self, depends_on=[self.namespaces[addon.namespace]])))
            alertmanager = {"alertmanagerSpec": {"nodeSelector": SYSTEM_NODES, "secrets": [ALERT_RECEIVER_SECRET]},
                            "config": alertmanager_config(self._cfg.alerting)}
        # EKS hides its control plane (and kube-proxy's metrics): no scrape of them, no "...Down" page for ever.
        hidden = {key: {"enabled": False} for key in addon.hidden_on_eks}
        self._release(addon, version, depends=depends, values={
            **hidden,
            "prometheus": {"prometheusSpec": {**selectors, "retention": PROMETHEUS_RETENTION, "storageSpec": volume,
                                              "nodeSelector": SYSTEM_NODES}},
            "alertmanager": alertmanager,
            "prometheusOperator": {"nodeSelector": SYSTEM_NODES,
                                   "admissionWebhooks": {"patch": {"nodeSelector": SYSTEM_NODES}}},
            "kube-state-metrics": {"nodeSelector": SYSTEM_NODES},
            "grafana": {"nodeSelector": SYSTEM_NODES,
                        "admin": {"existingSecret": GRAFANA_ADMIN_SECRET, "userKey": "admin-user",
                                  "passwordKey": "admin-password"},
                        "sidecar": {"dashboards": {"enabled": True, "label": "grafana_dashboard", "labelValue": "1",
                                                   "searchNamespace": "ALL"}}},
        })

    def _node_classes(self, args: ClusterAddonsArgs) -> list[pulumi.Resource]:
        """The platform's EC2NodeClasses (after the Karpenter release, whose CRD chart installs the kind)."""
        if self.karpenter_aws is None:
            return []
        created = []
        for node_class in self._cfg.node_classes:
            created.append(k8s.apiextensions.CustomResource(
                f"{self._name}-nodeclass-{node_class.name}", api_version="karpenter.k8s.aws/v1", kind="EC2NodeClass",
                metadata={"name": node_class.name, "labels": recommended_labels(
                    name="karpenter", instance=self._cfg.stack, component="node-class")},
                spec=karpenter.ec2_node_class_spec(
                    node_class, instance_profile=self.karpenter_aws.instance_profile.name, subnet_ids=args.subnet_ids,
                    security_group_id=args.node_security_group_id, tags=self._cfg.tags),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[self.releases["karpenter"]])))
        return created
