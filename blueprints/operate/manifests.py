"""What `verify` and `benchmark` read from a stack's rendered manifests: the offline preview's Kubernetes objects (the
real program under Pulumi's mock engine, `blueprints.review.preview`), so the queries checked against a live
Prometheus are the very expressions the stack deploys, never rewritten from the plan.

Deploy-time names (the model store bucket, the load balancer's host) are the preview's stand-ins; a deployed stack's
come from its outputs (`blueprints.operate.deployed`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.proxy import API_KEY_FIELD, PROXY_CONFIG_FIELD

#: Kinds of the objects read here.
SCALED_OBJECT = ("keda.sh/v1alpha1", "ScaledObject")
HPA = ("autoscaling/v2", "HorizontalPodAutoscaler")
PROMETHEUS_RULE = ("monitoring.coreos.com/v1", "PrometheusRule")
NODE_POOL = ("karpenter.sh/v1", "NodePool")
#: The container of a serving pod that holds the API key for clients (the authenticating proxy's port).
PROXY_PORT_NAME = "api"


@dataclass(frozen=True)
class Query:
    """One PromQL expression the stack deploys: `source` names the object and rule, `expr` is verbatim."""

    source: str
    expr: str
    kind: str  # "scaler" or "alert"
    alert: str | None = None


@dataclass(frozen=True)
class StackManifests:
    """A service stack's rendered Kubernetes objects, by role (`manifests`: plain dicts as `run_preview` gives them)."""

    blueprint: Blueprint
    manifests: tuple[dict[str, Any], ...]

    def _of(self, api_version: str, kind: str) -> list[dict[str, Any]]:
        return [m for m in self.manifests if m.get("apiVersion") == api_version and m.get("kind") == kind]

    @property
    def namespace(self) -> str:
        return self.blueprint.platform.namespace

    @property
    def deployment(self) -> dict[str, Any] | None:
        """The serving Deployment (named after the workload)."""
        name = self.blueprint.workload_name
        return next((m for m in self._of("apps/v1", "Deployment") if m["metadata"]["name"] == name), None)

    def pod_spec(self) -> dict[str, Any]:
        """The serving pods' spec; KeyError-free: a stack without a Deployment raises ValueError."""
        deployment = self.deployment
        if deployment is None:
            raise ValueError(f"{self.blueprint.stack} renders no serving Deployment {self.blueprint.workload_name}")
        return deployment["spec"]["template"]["spec"]

    @property
    def pod_selector(self) -> dict[str, str]:
        deployment = self.deployment
        return dict(deployment["spec"]["selector"]["matchLabels"]) if deployment else {}

    def container(self, name: str) -> dict[str, Any] | None:
        return next((c for c in self.pod_spec().get("containers", []) if c["name"] == name), None)

    @property
    def engine_container(self) -> dict[str, Any]:
        """The engine's container: the first one (the proxy follows it)."""
        return self.pod_spec()["containers"][0]

    @property
    def proxy_port(self) -> int:
        """The authenticating proxy's container port (`api`), where clients' requests enter a pod."""
        for container in self.pod_spec()["containers"]:
            for port in container.get("ports", []):
                if port.get("name") == PROXY_PORT_NAME:
                    return int(port["containerPort"])
        raise ValueError(f"{self.blueprint.stack}: no container port named {PROXY_PORT_NAME!r} in the serving pods")

    @property
    def proxy_serves_tls(self) -> bool:
        """The authenticating proxy terminates TLS itself (it mounts a kubernetes.io/tls Secret's `tls.crt`: a NodePort
        or MetalLB exposure, `Blueprint.proxy_terminates_tls`), so clients of its `api` port speak HTTPS."""
        volumes = {v["name"]: v for v in self.pod_spec().get("volumes", [])}
        for container in self.pod_spec()["containers"]:
            if any(p.get("name") == PROXY_PORT_NAME for p in container.get("ports", [])):
                for mount in container.get("volumeMounts", []):
                    secret = (volumes.get(mount["name"]) or {}).get("secret") or {}
                    if any(item.get("key") == "tls.crt" for item in secret.get("items", [])):
                        return True
        return False

    def api_key_ref(self) -> dict[str, str]:
        """`{"name": <Secret>, "key": <field>}` of the API key the authenticating proxy checks: the Secret whose
        `envoy.json` the container serving port `api` mounts, field `API_KEY_FIELD` (the same for every engine:
        vLLM, SGLang and TensorRT-LLM alike sit behind the proxy, whatever key check of their own they have)."""
        volumes = {v["name"]: v for v in self.pod_spec().get("volumes", [])}
        for container in self.pod_spec()["containers"]:
            if not any(p.get("name") == PROXY_PORT_NAME for p in container.get("ports", [])):
                continue
            for mount in container.get("volumeMounts", []):
                secret = (volumes.get(mount["name"]) or {}).get("secret") or {}
                if any(item.get("path") == PROXY_CONFIG_FIELD for item in secret.get("items", [])):
                    return {"name": secret["secretName"], "key": API_KEY_FIELD}
        raise ValueError(f"{self.blueprint.stack}: the serving pods' proxy mounts no API-key Secret")

    @property
    def service_account(self) -> str | None:
        return self.pod_spec().get("serviceAccountName")

    @property
    def fetch_image(self) -> str | None:
        """The image of the init container that copies weights from the model store (aws-cli), if any."""
        init = self.pod_spec().get("initContainers") or []
        return init[0]["image"] if init else None

    @property
    def system_node_selector(self) -> dict[str, str] | None:
        """Where the stack's helper Jobs run (the weights sync Job's nodeSelector: the platform's system nodes), or
        None (an existing cluster: no selector)."""
        for job in self._of("batch/v1", "Job"):
            selector = job["spec"]["template"]["spec"].get("nodeSelector")
            if selector:
                return dict(selector)
        return None

    def serving_network_policy(self) -> dict[str, Any] | None:
        name = self.blueprint.workload_name
        return next((m for m in self._of("networking.k8s.io/v1", "NetworkPolicy")
                     if m["metadata"]["name"] == name), None)

    @property
    def scaled_object(self) -> dict[str, Any] | None:
        return next(iter(self._of(*SCALED_OBJECT)), None)

    @property
    def hpa(self) -> dict[str, Any] | None:
        return next(iter(self._of(*HPA)), None)

    @property
    def node_pool(self) -> dict[str, Any] | None:
        return next(iter(self._of(*NODE_POOL)), None)

    @property
    def prometheus_rules(self) -> list[dict[str, Any]]:
        return self._of(*PROMETHEUS_RULE)

    def prometheus_address(self) -> str | None:
        """The Prometheus KEDA queries (the ScaledObject's `serverAddress`), if a trigger reads Prometheus."""
        so = self.scaled_object
        for trigger in (so or {}).get("spec", {}).get("triggers", []):
            if trigger.get("type") == "prometheus":
                return trigger["metadata"]["serverAddress"]
        return None

    def queries(self) -> list[Query]:
        """Every PromQL expression the stack deploys for scaling and alerting, verbatim: each Prometheus trigger of
        the ScaledObject, then each alert of each PrometheusRule."""
        found: list[Query] = []
        so = self.scaled_object
        if so is not None:
            for i, trigger in enumerate(so["spec"].get("triggers", [])):
                if trigger.get("type") == "prometheus":
                    found.append(Query(source=f"ScaledObject {so['metadata']['name']} trigger {i}",
                                       expr=trigger["metadata"]["query"], kind="scaler"))
        for rule in self.prometheus_rules:
            for group in rule["spec"].get("groups", []):
                for r in group.get("rules", []):
                    if "alert" in r:
                        found.append(Query(source=f"PrometheusRule {rule['metadata']['name']} alert {r['alert']}",
                                           expr=r["expr"], kind="alert", alert=r["alert"]))
        return found

    def alert_groups(self) -> dict[str, list[str]]:
        """PrometheusRule group name -> its alert names."""
        return {g["name"]: [r["alert"] for r in g.get("rules", []) if "alert" in r]
                for rule in self.prometheus_rules for g in rule["spec"].get("groups", [])}
