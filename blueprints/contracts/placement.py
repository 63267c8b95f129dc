"""Where a workload's replicas land and how many nodes they take: the one placement model that the planner bills and
searches with (`blueprints.plan`), that sizes the NodePool limits and the GPU quota (`Blueprint.node_pool_max_nodes`),
whose topology spread the program renders (`components.rollout`), and that the deployability checks run over the
rendered manifests to prove the pods schedule (`blueprints.review.deployability`).

The rules, as Karpenter (pinned 1.14) and the kube-scheduler place pods:

- **Replicas per node** from the pod's requests and one node's allocatable (`allocatable`): capacity less the
  hypervisor's share, kube-reserved, the eviction threshold and every per-node DaemonSet's requests
  (`daemonset_reserves`), capped by the pods a node takes (`replicas_per_node`).
- **Topology spread.** Karpenter provisions for pending pods treating preferences as requirements: a
  `ScheduleAnyway` constraint is honoured like `DoNotSchedule` whenever a new node can satisfy it ("Preferred topology
  spread (ScheduleAnyway) can result in more nodes being created than expected because Karpenter will prefer to create
  new nodes to satisfy spread constraints": karpenter.sh docs v1.14 concepts/scheduling, "Preferences"). A zone spread
  therefore puts the replicas evenly over every zone the NodePool launches into (Karpenter picks the zone with the
  fewest matching pods; `nodes`), and a hostname spread of `maxSkew` k lets at most k replicas share a new node
  (Karpenter counts the minimum of a hostname domain as 0, since it can always create one:
  kubernetes-sigs/karpenter pkg/controllers/provisioning/scheduling/topologygroup.go `domainMinCount`). Under
  consolidation `WhenEmpty` the nodes stay as launched, so this is the fleet the replicas run on.
- **minDomains** (`DoNotSchedule` only): while fewer zones than `minDomains` can be counted, the global minimum is 0,
  so each zone holds at most `maxSkew` replicas and the rest stay Pending (kubernetes.io/docs/concepts/scheduling-
  eviction/topology-spread-constraints, "minDomains"; Karpenter's `domainMinCount` does the same): such a placement is
  unsatisfiable (`Placement.unsatisfiable`).
- **Rollout surge**: the `maxSurge` replicas a rolling update adds count against the NodePool's limits and the quota
  (`Blueprint.node_pool_max_nodes`), not the monthly bill (a rollout lasts minutes).

Pure: no Pulumi, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING

from kubernetes.utils.quantity import parse_quantity

from blueprints.catalog import InstanceType, load_catalog
from blueprints.catalog.addons import PlatformCatalog, load_platform_catalog
from blueprints.core import defaults
from blueprints.contracts.consistency import model_architecture
from blueprints.contracts.lora import adapters_volume_gib
from blueprints.contracts.sections import Archetype
from blueprints.contracts.weights import fetch_memory_gib, streams_weights, usable_disk_gib, weights_volume_gib

if TYPE_CHECKING:
    from blueprints.contracts.blueprint import Blueprint

ZONE_KEY = "topology.kubernetes.io/zone"
HOSTNAME_KEY = "kubernetes.io/hostname"
GPU_RESOURCE = "nvidia.com/gpu"
DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"


@dataclass(frozen=True)
class Spread:
    """One `topologySpreadConstraint` of a workload's pods.

    Attributes:
        topology_key: `topology.kubernetes.io/zone` or `kubernetes.io/hostname`.
        max_skew: `maxSkew`, replicas.
        strict: `whenUnsatisfiable: DoNotSchedule` (else `ScheduleAnyway`, which Karpenter still provisions for).
        min_domains: `minDomains` (DoNotSchedule only), None when unset.
    """

    topology_key: str
    max_skew: int
    strict: bool = False
    min_domains: int | None = None

    def manifest(self, selector: Mapping[str, str]) -> dict:
        """The constraint as the program renders it (Pulumi's snake_case keys), matching `selector`'s labels."""
        out: dict = {"max_skew": self.max_skew, "topology_key": self.topology_key,
                     "when_unsatisfiable": DO_NOT_SCHEDULE if self.strict else SCHEDULE_ANYWAY,
                     "label_selector": {"match_labels": dict(selector)}}
        if self.min_domains is not None:
            out["min_domains"] = self.min_domains
        return out


@dataclass(frozen=True)
class Placement:
    """How one workload's replicas take nodes.

    Attributes:
        per_node: replicas one node holds (its allocatable against the pod's requests), >= 1.
        zones: zones the node pool launches into (the zone domains Karpenter counts), >= 1.
        spreads: the pods' topology spread constraints.
    """

    per_node: int
    zones: int = 1
    spreads: tuple[Spread, ...] = ()

    def _spread(self, key: str) -> Spread | None:
        return next((s for s in self.spreads if s.topology_key == key), None)

    @property
    def per_new_node(self) -> int:
        """Replicas Karpenter puts on one node it launches: `per_node`, at most a hostname spread's `maxSkew`."""
        host = self._spread(HOSTNAME_KEY)
        return max(1, min(self.per_node, host.max_skew if host else self.per_node))

    @property
    def zone_domains(self) -> int:
        """The zones replicas spread over: the pool's zones under a zone spread, else one (bin-packed)."""
        return self.zones if self._spread(ZONE_KEY) is not None else 1

    def unsatisfiable(self) -> str | None:
        """Why some replicas can never schedule (a strict zone spread whose `minDomains` exceeds the zones), else
        None."""
        zone = self._spread(ZONE_KEY)
        if zone is None or not zone.strict or zone.min_domains is None or self.zones >= zone.min_domains:
            return None
        return (f"its zone spread (DoNotSchedule, minDomains {zone.min_domains}) needs {zone.min_domains} zones but "
                f"the node pool launches into {self.zones}: each zone then holds at most maxSkew={zone.max_skew} "
                "replica(s) and the rest stay Pending")

    def most_replicas(self) -> int | None:
        """The most replicas that can ever schedule (None: no limit from placement)."""
        zone = self._spread(ZONE_KEY)
        return None if self.unsatisfiable() is None else self.zones * zone.max_skew  # type: ignore[union-attr]

    def zone_shares(self, replicas: int) -> list[int]:
        """Replicas per zone, the zone with the fewest first filled (max skew 1, as Karpenter places them)."""
        zones = max(1, min(self.zone_domains, replicas)) if replicas else 1
        share, extra = divmod(replicas, zones)
        return [share + (1 if z < extra else 0) for z in range(zones)]

    def nodes(self, replicas: int) -> int:
        """Nodes `replicas` take: their zone shares, each bin-packed `per_new_node` to a node.
        Example: 9 replicas, 2 per node, 3 zones -> 3 + 3 + 3 replicas -> 2 + 2 + 2 = 6 nodes (5 without zones)."""
        if replicas <= 0:
            return 0
        per = self.per_new_node
        return sum(math.ceil(share / per) for share in self.zone_shares(replicas))


def allocatable(instance_type: str | InstanceType, *, ephemeral_gib: float | None,
                daemonsets: Iterable[tuple[int, int]]) -> dict[str, Decimal]:
    """What pods can request on one node of `instance_type` (a catalog name, or a shape such as an edge cluster's
    owned node): capacity minus the hypervisor's share, kube-reserved, the eviction threshold and the per-node
    DaemonSets ((cpu_m, memory_mi) each), as Karpenter and the EKS AMI compute it (`defaults.VM_MEMORY_OVERHEAD_FRACTION`,
    `KUBE_RESERVED_*`; on an owned node the same formula errs on the safe side). Ephemeral storage is left out when
    unknown (None). Keys: `cpu` (cores), `memory` (bytes), `nvidia.com/gpu`, `ephemeral-storage` (bytes)."""
    inst = load_catalog().instance(instance_type) if isinstance(instance_type, str) else instance_type
    cores = inst.vcpus
    fractions = [*defaults.KUBE_RESERVED_CPU_FRACTIONS, *[defaults.KUBE_RESERVED_CPU_REST_FRACTION] * max(0, cores - 4)]
    reserved_cpu_m = sum(fractions[:cores]) * 1000
    ds = list(daemonsets)
    cpu_m = cores * 1000 - reserved_cpu_m - sum(c for c, _ in ds)
    memory_mi = (inst.memory_gib * 1024 * (1 - defaults.VM_MEMORY_OVERHEAD_FRACTION)
                 - defaults.KUBE_RESERVED_MEMORY_MIB_PER_POD * defaults.MAX_PODS_PER_NODE
                 - defaults.KUBE_RESERVED_MEMORY_BASE_MIB - defaults.EVICTION_MEMORY_MIB - sum(m for _, m in ds))
    have = {"cpu": Decimal(str(round(cpu_m))) / 1000, "memory": Decimal(str(round(memory_mi))) * 2**20,
            GPU_RESOURCE: Decimal(inst.gpu_count)}
    if ephemeral_gib is not None:
        have["ephemeral-storage"] = Decimal(str(round(ephemeral_gib, 3))) * 2**30
    return have


def node_ephemeral_gib(instance_type: str, *, instance_store_raid0: bool, root_volume_gib: int) -> float:
    """Ephemeral storage pods can request on one node of a node class, GiB: its kubelet filesystem (the instance-store
    array when the class builds one and the type has instance store, else the root volume) less the eviction
    threshold, kube-reserved, the serving image and, on the root volume, the OS (`usable_disk_gib`)."""
    if instance_store_raid0 and instance_type in defaults.INSTANCE_STORE_GB:
        return usable_disk_gib(defaults.INSTANCE_STORE_GB[instance_type] * 1e9 / 2**30,
                               reserve_gib=defaults.SERVING_NODE_RESERVE_GIB)
    return usable_disk_gib(root_volume_gib, reserve_gib=defaults.SERVING_NODE_ROOT_RESERVE_GIB)


def replicas_per_node(requests: Mapping[str, Decimal], have: Mapping[str, Decimal]) -> int:
    """How many pods requesting `requests` one node with allocatable `have` holds (0 when not one fits), at most
    `defaults.MAX_PODS_PER_NODE`. A resource the node does not report is not counted."""
    fits = [int(have[k] / v) for k, v in requests.items() if k in have and v > 0]
    return max(0, min([*fits, defaults.MAX_PODS_PER_NODE]))


def daemonset_reserves(pcat: PlatformCatalog, helm_addons: Iterable[str], *, gpu_node: bool,
                       eks_addons: bool) -> list[tuple[int, int]]:
    """(cpu_m, memory_mi) of every DaemonSet on a node: the EKS add-ons (`eks_addons`: a cluster on EKS, never an
    edge cluster) and the Helm add-ons installed there (`helm_addons`, ids), those for GPU nodes only on a GPU node
    (`blueprints/catalog/addons.yaml`, `daemonset`)."""
    found = [a.daemonset for a in pcat.eks.values() if a.daemonset] if eks_addons else []
    found += [pcat.helm[a].daemonset for a in sorted(set(helm_addons)) if a in pcat.helm and pcat.helm[a].daemonset]
    return [(d.cpu_m, d.memory_mi) for d in found if d and (gpu_node or not d.gpu_nodes_only)]


def every_daemonset(*, gpu_node: bool, eks: bool = True) -> list[tuple[int, int]]:
    """(cpu_m, memory_mi) of every catalogued DaemonSet that may run on a node (`daemonset_reserves` over every Helm
    add-on and, on EKS, every EKS add-on; the GPU-only ones on a GPU node): the most a node gives up, whichever
    add-ons its platform installs or its cluster declares. The planner sizes against it before a platform exists."""
    pcat = load_platform_catalog()
    return daemonset_reserves(pcat, pcat.helm, gpu_node=gpu_node, eks_addons=eks)


def proxied_pod_requests(*, cpu: float, memory_gib: float) -> tuple[Decimal, Decimal]:
    """(cores, bytes) a self-hosted serving pod requests with a server of `cpu` cores and `memory_gib` GiB: the
    server's memory in whole GiB as the program writes it (`gib_quantity`) plus the authenticating proxy
    (`defaults.PROXY_RESOURCES`)."""
    proxy = {k: parse_quantity(v) for k, v in defaults.PROXY_RESOURCES.items()}
    return (Decimal(str(cpu)) + proxy["cpu"], parse_quantity(gib_quantity(memory_gib - 1e-9)) + proxy["memory"])


def serving_pod_fits(instance_type: str | InstanceType, *, per_node: int, cpu: float, memory_gib: float,
                     eks: bool = True) -> bool:
    """`per_node` serving pods (`proxied_pod_requests`) fit one node of `instance_type` (an EC2 type on EKS, or an
    edge cluster's owned node shape with `eks=False`) beside every DaemonSet that may run there (`every_daemonset`),
    CPU and memory as `allocatable` counts them: the planner keeps only shapes the preview's `schedulable` check
    passes (a Triton pod asking 6.1 GiB of a c7g.xlarge's 5.8 GiB never plans)."""
    inst = load_catalog().instance(instance_type) if isinstance(instance_type, str) else instance_type
    have = allocatable(inst, ephemeral_gib=None, daemonsets=every_daemonset(gpu_node=inst.gpu_count > 0, eks=eks))
    want_cpu, want_memory = proxied_pod_requests(cpu=cpu, memory_gib=memory_gib)
    return per_node * want_cpu <= have["cpu"] and per_node * want_memory <= have["memory"]


def serving_spreads(*, strict_zone_spread: bool, per_node: int) -> tuple[Spread, ...]:
    """The topology spread of every serving workload: zones evenly (maxSkew 1; DoNotSchedule with
    `defaults.MIN_ZONES_FOR_HIGH_AVAILABILITY` minDomains at high availability in production, else ScheduleAnyway),
    and nodes with `maxSkew` = the replicas a node holds, so Karpenter packs a node as the plan bills it while the
    kube-scheduler still prefers spreading over the nodes it has (a `maxSkew` of 1 would make Karpenter launch a node
    per replica)."""
    zone = Spread(ZONE_KEY, 1, strict=strict_zone_spread,
                  min_domains=defaults.MIN_ZONES_FOR_HIGH_AVAILABILITY if strict_zone_spread else None)
    return (zone, Spread(HOSTNAME_KEY, max(1, per_node)))


def serving_placement(*, per_node: int, zones: int | None, strict_zone_spread: bool) -> Placement:
    """The placement of a serving workload planned `per_node` replicas to a node on a node pool over `zones` zones
    (None or 0: no zones known, one domain)."""
    return Placement(per_node=max(1, per_node), zones=max(1, zones or 1),
                     spreads=serving_spreads(strict_zone_spread=strict_zone_spread, per_node=per_node))


def gib_quantity(value: float) -> str:
    """A Kubernetes quantity in whole GiB, rounded up: 14.96 -> `15Gi`."""
    return f"{math.ceil(value)}Gi"


def engine_resources(bp: Blueprint) -> dict[str, str]:
    """The serving engine container's requests (= limits), as the program renders them: the plan's CPU, memory and
    ephemeral storage per replica (Triton and ONNX Runtime: at least the local copy of their models) and its GPUs."""
    c = bp.compute
    if bp.archetype is Archetype.VLLM_GPU:
        return {GPU_RESOURCE: str(c.gpus_per_replica), "cpu": str(c.cpu_per_replica),
                "memory": gib_quantity(c.memory_gib_per_replica),
                "ephemeral-storage": gib_quantity(c.ephemeral_storage_gib_per_replica)}
    res = {"cpu": f"{c.cpu_per_replica:g}", "memory": gib_quantity(c.memory_gib_per_replica),
           "ephemeral-storage": gib_quantity(max(c.ephemeral_storage_gib_per_replica,
                                                 weights_volume_gib(m.weights_gib for m in bp.models)))}
    if c.gpus_per_replica:
        res[GPU_RESOURCE] = str(c.gpus_per_replica)
    return res


def copy_resources(weights_gib: Iterable[float]) -> dict[str, str]:
    """Requests of an init container copying models' weights to local disk: 1 CPU, the copy's memory
    (`fetch_memory_gib`) and the weights' local volume (`weights_volume_gib`)."""
    weights = list(weights_gib)
    return {"cpu": "1", "memory": gib_quantity(fetch_memory_gib(weights)),
            "ephemeral-storage": gib_quantity(weights_volume_gib(weights))}


def serving_pod_requests(bp: Blueprint) -> dict[str, Decimal]:
    """One serving replica's effective requests as the scheduler computes them (the larger of its app containers plus
    native sidecars and each init container plus the sidecars started before it): the engine and the authenticating
    proxy; the weights copy unless the engine streams them (one init container on a model store, one per model on
    an edge cluster, after the IAM Roles Anywhere credential helper when a model comes from s3://). The same numbers the program renders (a test
    holds them to the manifests)."""

    def parsed(resources: Mapping[str, str]) -> dict[str, Decimal]:
        return {k: parse_quantity(v) for k, v in resources.items()}

    def add(*parts: Mapping[str, Decimal]) -> dict[str, Decimal]:
        keys = {k for p in parts for k in p}
        return {k: sum((p.get(k, Decimal(0)) for p in parts), Decimal(0)) for k in keys}

    edge = bp.platform.kind == "edge-cluster"
    sidecars = parsed(defaults.CREDENTIAL_HELPER_RESOURCES) if edge and any(
        m.source_uri.startswith("s3://") for m in bp.models) else {}
    app = add(parsed(engine_resources(bp)), parsed(defaults.PROXY_RESOURCES), sidecars)
    if streams_weights(bp):  # the engine streams them from the model store: no copy step (`streams_weights`)
        copies: list[list[float]] = []
    else:
        copies = [[m.weights_gib] for m in bp.models] if edge else [[m.weights_gib for m in bp.models]]
    inits = [add(parsed(copy_resources(w)), sidecars) for w in copies]
    adapters = adapters_copy_resources(bp)
    if adapters is not None:
        inits.append(parsed(adapters))
    return {k: max([app.get(k, Decimal(0)), *(i.get(k, Decimal(0)) for i in inits)]) for k in {*app, *(k for i in inits for k in i)}}


def adapters_copy_resources(bp: Blueprint) -> dict[str, str] | None:
    """Requests of the init container copying a vLLM replica's LoRA adapters to local disk (None without adapters):
    1 CPU, the copy's memory (`fetch_memory_gib` of the adapters' volume) and that volume
    (`blueprints.contracts.lora.adapters_volume_gib`)."""
    lora = getattr(bp.engine, "lora", None)
    if lora is None:
        return None
    volume = adapters_volume_gib(model_architecture(bp.model.catalog_id, bp.model.architecture, load_catalog()), lora)
    return {"cpu": "1", "memory": gib_quantity(fetch_memory_gib([volume])), "ephemeral-storage": f"{volume}Gi"}
