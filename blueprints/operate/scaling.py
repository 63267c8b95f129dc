"""What the autoscaler does while `blueprint benchmark` runs: the fleet's replica counts, sampled during the sweep and
kept where they change (`AutoscalingRecord` of the result file). The client sends to one replica, so the fleet's
scaling does not spread the sweep; it shows whether, and how soon, the pilot's autoscaler answers the load.

- vllm-gpu: the serving Deployment's `spec.replicas` (what KEDA's HPA asks for: it writes the scale subresource) and
  `status.readyReplicas`, read at each poll of the Job (`blueprints.operate.jobs.POLL_S`) with the run under way
  (`AppsV1Api.read_namespaced_deployment`, Kubernetes apps/v1 DeploymentSpec.replicas, DeploymentStatus.readyReplicas).
- sagemaker-endpoint: the endpoint's first production variant's `DesiredInstanceCount` and `CurrentInstanceCount`
  (SageMaker API DescribeEndpoint, ProductionVariantSummary), read before and after each run.

Only a stack that scales (`autoscaling.max_replicas` > `min_replicas`) is watched; a read that fails is logged and
the record is left out, never the sweep.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Callable

from blueprints.contracts.benchmark_result import MAX_REPLICA_SAMPLES, AutoscalingRecord, ReplicaSample
from blueprints.contracts.blueprint import Blueprint
from blueprints.core.errors import DeployedStackError

#: (desired, ready) replicas; None where the API gives none (a Deployment scaled to zero has no readyReplicas).
Counts = tuple[int | None, int | None]


def scales(bp: Blueprint) -> bool:
    """Whether the stack's fleet can change size (its autoscaler has room)."""
    return bp.autoscaling.max_replicas > bp.autoscaling.min_replicas


class ReplicaWatch:
    """Samples a fleet's size (`read`) during a sweep; keeps the first sample, every change and the last.

    Args:
        read: returns the (desired, ready) replicas now; raises DeployedStackError on an API error.
        source: what `read` reads, for the record.
        bp: the stack (its autoscaling bounds).
        log: where a failed read is reported (once).
        now: the clock (UTC).
    """

    def __init__(self, read: Callable[[], Counts], *, source: str, bp: Blueprint, log: Callable[[str], None],
                 now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.timezone.utc)) -> None:
        self.read, self.source, self.bp, self.log, self.now = read, source, bp, log, now
        self.samples: list[ReplicaSample] = []
        self.pending: ReplicaSample | None = None
        self.failed = False

    def sample(self, run: int | None) -> None:
        """Read the fleet's size now, with the run under way."""
        if self.failed:
            return
        try:
            desired, ready = self.read()
        except DeployedStackError as exc:  # the record is left out, the sweep goes on
            self.failed = True
            self.log(f"autoscaling not recorded: {exc}")
            return
        sample = ReplicaSample(at=self.now(), run=run, desired=desired, ready=ready)
        last = self.samples[-1] if self.samples else None
        if last is not None and (last.run, last.desired, last.ready) == (run, desired, ready):
            self.pending = sample  # unchanged: kept only if it turns out to be the last
            return
        if len(self.samples) < MAX_REPLICA_SAMPLES - 1:
            self.samples.append(sample)
        self.pending = None

    def record(self) -> AutoscalingRecord | None:
        """The samples as the result file keeps them; None when a read failed or none was taken."""
        if self.failed or not self.samples:
            return None
        samples = [*self.samples, *([self.pending] if self.pending else [])]
        return AutoscalingRecord(source=self.source, min_replicas=self.bp.autoscaling.min_replicas,
                                 max_replicas=self.bp.autoscaling.max_replicas, samples=samples)


def deployment_counts(api: Any, namespace: str, name: str) -> Callable[[], Counts]:
    """A reader of the serving Deployment's `spec.replicas` and `status.readyReplicas`."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    apps = client.AppsV1Api(api)

    def read() -> Counts:
        try:
            deployment = apps.read_namespaced_deployment(name, namespace, _request_timeout=30)
        except ApiException as exc:
            raise DeployedStackError(f"reading Deployment {namespace}/{name} failed ({exc.status} {exc.reason}): "
                                     "the benchmark needs get on deployments there") from None
        return deployment.spec.replicas, deployment.status.ready_replicas or 0

    return read


def endpoint_counts(sagemaker: Any, endpoint_name: str) -> Callable[[], Counts]:
    """A reader of a SageMaker endpoint's first variant's `DesiredInstanceCount` and `CurrentInstanceCount`."""

    from botocore.exceptions import BotoCoreError, ClientError

    def read() -> Counts:
        try:
            variants = sagemaker.describe_endpoint(EndpointName=endpoint_name).get("ProductionVariants") or [{}]
        except (ClientError, BotoCoreError) as exc:
            raise DeployedStackError(f"sagemaker:DescribeEndpoint {endpoint_name} failed ({exc})") from None
        return variants[0].get("DesiredInstanceCount"), variants[0].get("CurrentInstanceCount")

    return read
