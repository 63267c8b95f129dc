"""A `Blueprint` checked against itself and the catalog: what makes a stack config buildable as written.

The planner writes consistent blueprints; a hand edit may not. `Blueprint`'s model validator calls
`blueprint_problems`, so `blueprint preview`, the Pulumi program and every reader of a stack config refuse the same
edits with the same messages (exit 2), each naming the exact field:

- the archetype and its engine, platform and instance family (`ml.*` types only on `sagemaker-endpoint`);
- compute against the catalog's instance type (GPU, GPUs per node, vCPUs, memory, architecture);
- CPU, memory and local disk above the models' needs (`vllm_host_memory_gib`, `cpu_replica_memory_gib`,
  `blueprints.contracts.weights.replica_ephemeral_gib`);
- an edge cluster's stack: owned nodes, no model store, IAM Roles Anywhere exactly for `s3://` sources, one-file
  `https://` sources in a format Triton loads; a compound service's part: its name, stacks and stages;
- each model against the catalog (task, context limit, parameters and weights);
- the serving flags against the models' formats and the hosting (`consistency_serving`);
- the engine against the models and the GPU: Triton model names, instance kinds, ONNX Runtime threads, tensor
  parallel against attention heads, `max_model_len` and `max_num_seqs` within the model and the KV cache, the
  SageMaker image in the stack's region;
- the startup budget, the scale-in cooldown, the cost lines against the catalog's prices, the predictions against the
  SLO, tags and compliance.

The resource needs are defined here once: the planner sizes with the same functions.
"""

from __future__ import annotations

import difflib
import math
import re
from typing import TYPE_CHECKING

from blueprints.catalog.engines import engine_facts
from blueprints.core import bounds, defaults
from blueprints.catalog import Architecture, Catalog, load_catalog
from blueprints.catalog.startup import load_startup_catalog
from blueprints.contracts.serving_flags import serving_problems
from blueprints.core.errors import FieldProblem
from blueprints.requirements.hosting import Accelerator
from blueprints.requirements.exposure import ExposureScope, ExposureVia
from blueprints.requirements.reuse import sequences_held
from blueprints.contracts.weights import replica_ephemeral_gib, streams_weights
from blueprints.contracts.lora import adapters_volume_gib, lora_problems

if TYPE_CHECKING:
    from blueprints.contracts.blueprint import Blueprint

#: Host memory a vLLM replica needs besides its memory-backed /dev/shm (API server, engine core, tokenizer and the
#: weights' pinned staging buffers), GiB. [assumption] the planner has always reserved it.
VLLM_HOST_MEMORY_OVERHEAD_GIB = 4
#: Tolerance of stored money and size figures (rounded to cents and hundredths).
_CENT = 0.011


def stored_weights_gib(raw_gib: float) -> float:
    """Weights as a stack config records them: GiB rounded up to hundredths, never below `bounds.MIN_WEIGHTS_GIB` (a
    model of a few million parameters weighs 0.01 GiB, not 0)."""
    return max(bounds.MIN_WEIGHTS_GIB, math.ceil(raw_gib * 100 - 1e-9) / 100)


def cpu_replica_memory_gib(weights_gib: float) -> float:
    """Host memory of a CPU replica (ONNX Runtime, Triton on CPU) holding `weights_gib` of weights, GiB."""
    return round(weights_gib * defaults.CPU_MEMORY_WEIGHTS_FACTOR + defaults.CPU_MEMORY_OVERHEAD_GIB, 2)


def vllm_host_memory_gib(shm_size_gib: float, *, streamer_buffer_gib: float = 0.0) -> int:
    """Host memory of a vLLM replica with `shm_size_gib` of /dev/shm (charged to the pod's memory) and, when it
    streams its weights, `streamer_buffer_gib` of Run:ai streamer CPU buffers (`streamer_buffer_gib`), GiB."""
    return math.ceil(shm_size_gib + VLLM_HOST_MEMORY_OVERHEAD_GIB + streamer_buffer_gib)


def streamer_buffer_gib(tensor_parallel_size: int) -> float:
    """CPU buffers of the Run:ai Model Streamer in one vLLM replica, GiB: `memory_limit` per reading rank
    (`blueprints/catalog/startup.yaml` weights.streamer; every rank reads, none is distributed)."""
    return tensor_parallel_size * load_startup_catalog().weights.streamer.memory_limit_gib


def cpu_limit_threads(cpu_per_replica: float) -> int:
    """Whole cores of a CPU limit: the thread count ONNX Runtime must use."""
    return max(1, math.floor(cpu_per_replica))


def model_architecture(catalog_id: str | None, architecture: Architecture | None, catalog: Catalog) \
        -> Architecture | None:
    """A served model's shape: its recorded `architecture`, else the catalog's; None when neither is known."""
    if architecture is not None:
        return architecture
    record = catalog.models.get(catalog_id) if catalog_id else None
    return record.architecture if record else None


def blueprint_problems(bp: Blueprint) -> list[FieldProblem]:
    """Every inconsistency of `bp`, each naming its field (a path below the blueprint); empty when buildable."""
    from blueprints.contracts.sections import ENGINE_FOR_ARCHETYPE

    expected = ENGINE_FOR_ARCHETYPE[bp.archetype]
    if not isinstance(bp.engine, expected):
        return [FieldProblem(("engine", "kind"), f"archetype {bp.archetype.value} needs engine kind "
                             f"{expected.model_fields['kind'].default!r}, got {bp.engine.kind!r}")]
    catalog = load_catalog()
    return [*_rules(bp), *_deploy_inputs(bp), *_edge(bp), *_pipeline(bp), *_compute(bp, catalog),
            *_models(bp, catalog),
            *_engine(bp, catalog), *serving_problems(bp, catalog), *_startup(bp), *_costs(bp, catalog),
            *_predictions(bp), *_router(bp), *_batch(bp)]


def _batch(bp: Blueprint) -> list[FieldProblem]:
    """A batch's run (`Blueprint.batch`) is the one source of what deploys: its replicas are the planned replicas,
    its cron trigger runs them from the window's start for `run_hours` (= the deadline, within the window), the
    `autoscaling` section states the schedule's bounds (`BatchPlan.min_replicas`/`max_replicas`), and the expected
    monthly cost is the run's (the nodes for `run_hours` a day plus the fixed items)."""
    from blueprints.contracts.sections import KedaCron

    b = bp.batch
    if b is None:
        return []
    replan = "re-plan with `blueprint plan` (the batch is planned from traffic.batch in the requirements)"
    managed = bp.archetype.value == "sagemaker-endpoint"
    if bp.archetype.value != "vllm-gpu" and not managed:
        return [FieldProblem(("batch",), f"a batch is planned on vllm-gpu or sagemaker-endpoint (asynchronous "
                             f"inference), not {bp.archetype.value}: {replan}")]
    if managed != (b.async_inference is not None):
        return [FieldProblem(("batch", "async_inference"), "a batch on sagemaker-endpoint is served by asynchronous "
                             "inference (batch.async_inference), one on vllm-gpu by its KEDA schedule: "
                             f"{'set' if managed else 'remove'} async_inference; {replan}")]
    problems = []
    if b.replicas != bp.compute.replicas:
        problems.append(FieldProblem(("batch", "replicas"), f"batch.replicas={b.replicas} but compute.replicas="
                                     f"{bp.compute.replicas}: the run is the planned fleet; {replan}"))
    if b.deadline_hours > b.window_hours or b.run_hours != b.deadline_hours:
        problems.append(FieldProblem(("batch", "run_hours"), f"run_hours={b.run_hours:g} must be deadline_hours="
                                     f"{b.deadline_hours:g}, within window_hours={b.window_hours}: the fleet runs "
                                     f"from the window's start until the deadline; {replan}"))
    want = None if managed else KedaCron.daily(start_hour=b.window_start_hour, run_hours=b.run_hours,
                                               timezone=b.timezone, replicas=b.replicas)
    if b.keda_cron != want:
        stated = (f"start {b.keda_cron.start!r}, end {b.keda_cron.end!r}, timezone {b.keda_cron.timezone!r}, "
                  f"desired_replicas {b.keda_cron.desired_replicas}" if b.keda_cron else "none (always on)")
        wanted = (f"start {want.start!r}, end {want.end!r}, timezone {want.timezone!r}, desired_replicas "
                  f"{want.desired_replicas}" if want else "none (an asynchronous endpoint scales on its queue)"
                  if managed else "none (the run is the whole day: always on)")
        problems.append(FieldProblem(("batch", "keda_cron"), f"keda_cron is {stated}, but {b.replicas} replica(s) "
                                     f"from {b.window_start_hour:02d}:00 {b.timezone} for {b.run_hours:g} h is "
                                     f"{wanted}; {replan}"))
    a, want_scaling = bp.autoscaling, b.scaling(bp.autoscaling)
    if a != want_scaling:
        problems.append(FieldProblem(("autoscaling",), f"autoscaling is {a.min_replicas}-{a.max_replicas} replicas "
                                     f"on {a.metric} (target {a.target:g}) but the batch's schedule runs "
                                     f"{want_scaling.min_replicas}-{want_scaling.max_replicas} on "
                                     f"{want_scaling.metric} (target {want_scaling.target:g}) ({b.schedule()}): set "
                                     f"min_replicas={want_scaling.min_replicas}, max_replicas="
                                     f"{want_scaling.max_replicas}, metric={want_scaling.metric} and target="
                                     f"{want_scaling.target:g}, or {replan}"))
    if managed:
        problems += _async_inference(bp, replan)
    p = bp.predictions
    if p.cost_lines:
        nodes, fixed = p.cost_lines[0].monthly_usd, sum(line.monthly_usd for line in p.cost_lines[1:])
        if b.async_inference is not None:  # the instances' hours, each instance's monthly price / 24 per hour a day
            hours = b.async_inference.instance_hours_per_day
            run = round(nodes / b.replicas * hours / 24 + fixed, 2)
            paid = f"the instances (${nodes / b.replicas:,.2f}/month each) for {hours:g} instance-hours a day"
        else:
            run = round(nodes * b.run_hours / 24 + fixed, 2)
            paid = f"the nodes (${nodes:,.2f}/month) for {b.run_hours:g} of 24 h"
        if abs(b.monthly_cost_usd - run) > _CENT or p.expected_monthly_cost_usd is None or \
                abs(p.expected_monthly_cost_usd - run) > _CENT:
            problems.append(FieldProblem(("batch", "monthly_cost_usd"), f"batch.monthly_cost_usd="
                                         f"{b.monthly_cost_usd:g} and predictions.expected_monthly_cost_usd="
                                         f"{p.expected_monthly_cost_usd} must both be the run's cost: {paid} plus "
                                         f"${fixed:,.2f} of fixed items, ${run:,.2f}; {replan}"))
    return problems


def _async_inference(bp: Blueprint, replan: str) -> list[FieldProblem]:
    """A SageMaker asynchronous batch: each instance takes its batch (the engine's `max_rolling_batch_size`, at
    most 1,000) at once, its results land under the stack's own prefix, and the endpoint is created with one
    instance (the autoscaler starts the planned ones from zero on the queue)."""
    from blueprints.contracts.sections import MAX_CONCURRENT_INVOCATIONS_PER_INSTANCE as most

    a, engine = bp.batch.async_inference, bp.engine  # type: ignore[union-attr]
    assert a is not None
    problems = []
    batch = getattr(engine, "max_rolling_batch_size", None)
    if batch is not None and a.max_concurrent_invocations_per_instance != min(batch, most):
        problems.append(FieldProblem(("batch", "async_inference", "max_concurrent_invocations_per_instance"),
                                     f"max_concurrent_invocations_per_instance={a.max_concurrent_invocations_per_instance}"
                                     f" must be the instance's batch, engine.max_rolling_batch_size={batch} (at most "
                                     f"{most:,}): fewer leave it idle, more queue inside the container; {replan}"))
    if a.output_prefix != async_output_prefix(bp.stack):
        problems.append(FieldProblem(("batch", "async_inference", "output_prefix"), f"output_prefix="
                                     f"{a.output_prefix!r} must be {async_output_prefix(bp.stack)!r} (the execution "
                                     f"role writes there only); {replan}"))
    if getattr(engine, "initial_instance_count", 1) != 1:
        problems.append(FieldProblem(("engine", "initial_instance_count"), "an asynchronous endpoint is created "
                                     "with one instance (the least CreateEndpointConfig takes); its queue starts the "
                                     f"rest: set initial_instance_count: 1; {replan}"))
    return problems


def async_output_prefix(stack: str) -> str:
    """Where a SageMaker asynchronous batch's results land in its model store: `async/<stack>/`."""
    return f"async/{stack}/"


def _router(bp: Blueprint) -> list[FieldProblem]:
    """A router fronts vLLM pods only, listens on the port their proxy configuration forwards to, and comes with
    scaling that never reaches zero (the KEDA HTTP interceptor would wait on the engine's endpoints, not its)."""
    router = bp.router
    if router is None:
        return []
    if bp.archetype.value != "vllm-gpu":
        return [FieldProblem(("router",), f"a router fronts vllm-gpu pods only, not {bp.archetype.value}: remove it")]
    problems = []
    if router.port != bp.engine.port:  # type: ignore[union-attr]
        problems.append(FieldProblem(("router", "port"), f"router.port={router.port} must be the engine's port "
                                     f"{bp.engine.port} (its pod's proxy forwards there): set it to "  # type: ignore[union-attr]
                                     f"{bp.engine.port}"))  # type: ignore[union-attr]
    if bp.wakes_on_request:
        problems.append(FieldProblem(("router",), "a service that scales to zero has no router (clients reach it "
                                     "through the KEDA HTTP interceptor): remove router or set min_replicas >= 1"))
    if router.routing_logic == "session" and not router.session_key:
        problems.append(FieldProblem(("router", "session_key"), "session routing needs session_key (the router "
                                     "refuses to start without --session-key): set it to x-session-id"))
    return problems


def _rules(bp: Blueprint) -> list[FieldProblem]:
    """Production, exposure, platform and tag rules."""
    sagemaker = bp.archetype.value == "sagemaker-endpoint"
    problems = []
    if bp.network.exposure.scope is ExposureScope.PUBLIC and bp.wakes_on_request:
        problems.append(FieldProblem(("autoscaling", "min_replicas"), "network.exposure.scope public needs "
                                     "min_replicas >= 1: a service that scales to zero has no load balancer (clients "
                                     "reach it through the in-cluster KEDA interceptor)"))
    elif sagemaker and bp.autoscaling.min_replicas == 0 and (bp.batch is None or bp.batch.async_inference is None):
        # "An endpoint can scale to and from zero instances only if it hosts inference components" (SageMaker
        # developer guide, endpoint-auto-scaling-zero-instances); this stack's endpoint hosts a model variant. An
        # asynchronous endpoint does, its requests queued ("We set MinCapacity to 0 because Asynchronous Inference
        # enables you to autoscale to 0": awsdocs amazon-sagemaker-developer-guide async-inference-autoscale.md).
        problems.append(FieldProblem(("autoscaling", "min_replicas"), "a SageMaker real-time endpoint variant keeps at "
                                     "least one instance (only inference components scale to zero): set "
                                     "min_replicas >= 1"))
    elif bp.production and bp.wakes_on_request:
        problems.append(FieldProblem(("autoscaling", "min_replicas"), "a production stack never scales to zero: "
                                     "min_replicas must be >= 1"))
    if bp.production and bp.compute.capacity_type.value == "spot":
        problems.append(FieldProblem(("compute", "capacity_type"), "a production stack does not run on spot capacity"))
    cert_region = bp.network.exposure.certificate_region
    if cert_region is not None and cert_region != bp.region:
        problems.append(FieldProblem(("network", "exposure", "tls_certificate_arn"), f"the certificate is in "
                                     f"{cert_region} but the stack is in {bp.region}: a load balancer uses an ACM "
                                     "certificate of its own region"))
    if sagemaker != (bp.platform.kind == "sagemaker"):
        problems.append(FieldProblem(("platform", "kind"), f"archetype {bp.archetype.value} runs on "
                                     f"{'sagemaker' if sagemaker else 'eks or existing-cluster'}, not "
                                     f"{getattr(bp.platform.kind, 'value', bp.platform.kind)}"))
    if sagemaker and bp.network.private_only and bp.platform.stack is None:
        problems.append(FieldProblem(("platform", "stack"), "a private SageMaker endpoint runs in its platform's VPC: "
                                     "set platform.stack (platform-<env>-<region>) or re-plan"))
    exposure = bp.network.exposure
    if exposure.via is ExposureVia.INGRESS and exposure.ingress_class_name is None:
        problems.append(FieldProblem(("network", "exposure", "ingress_class_name"), "via ingress: name the "
                                     "IngressClass of the controller (network.exposed_by); without one no controller "
                                     "may pick the Ingress up. Re-plan with `blueprint plan`"))
    if exposure.allowed_cidrs and exposure.via is ExposureVia.INGRESS and bp.network.exposed_by is not None:
        from blueprints.catalog.addons import load_platform_catalog

        controller = load_platform_catalog().helm.get(bp.network.exposed_by)
        if controller is not None and controller.source_range_annotation is None:
            problems.append(FieldProblem(("network", "exposure", "allowed_cidrs"), f"{controller.id} cannot restrict "
                                         "an Ingress to source CIDRs (no source-range annotation): empty the list "
                                         "or re-plan with `blueprint plan`"))
    problems += [FieldProblem(("tags", key), f"tag key {key!r}: keys starting with `aws:` are reserved for AWS")
                 for key in bp.tags if key.lower().startswith("aws:")]
    return problems


#: Namespaces no service owns: Kubernetes' own (kubernetes.io/docs/concepts/overview/working-with-objects/namespaces,
#: "Initial namespaces") and every add-on's (`blueprints/catalog/addons.yaml`).
KUBERNETES_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def system_namespaces() -> set[str]:
    """The namespaces of Kubernetes itself and of every catalogued add-on: a service's namespace is none of them."""
    from blueprints.catalog.addons import load_platform_catalog

    return {*KUBERNETES_NAMESPACES, *(a.namespace for a in load_platform_catalog().helm.values())}


def reachable_target(bp: Blueprint) -> float | None:
    """The most a per-replica autoscaling target can be and still be reached by one replica (None: no bound known):
    vLLM's running requests cannot exceed `--max-num-seqs`; Triton's pending requests beyond what a replica computes
    at once mean the queue already holds a full batch per replica; CPU utilisation of a pod whose request is its
    limit stops at 100 %; SageMaker invocations per instance per minute at 60 x one instance's capacity."""
    from blueprints.contracts.sections import SageMakerEngine, VllmEngine

    metric, p = bp.autoscaling.metric, bp.predictions
    if isinstance(bp.engine, VllmEngine) and metric == engine_facts(bp.engine.kind).signal("running"):
        return bp.engine.max_num_seqs
    if metric == "nv_inference_pending_request_count":
        return p.concurrency_per_replica
    if metric == "cpu":
        return 100
    if metric == "SageMakerVariantInvocationsPerInstance" and isinstance(bp.engine, SageMakerEngine):
        return invocations_one_instance_reaches(p.requests_per_s_capacity, bp.engine.initial_instance_count)
    return None


def invocations_one_instance_reaches(requests_per_s_capacity: float, instances: int) -> float:
    """SageMaker's InvocationsPerInstance a minute one instance reaches: 60 x its share of the endpoint's capacity
    (requests/s within the SLO over `instances`), to 3 decimals."""
    return round(60 * requests_per_s_capacity / instances, 3)


def _deploy_inputs(bp: Blueprint) -> list[FieldProblem]:
    """What reaches the cluster as it is: the namespace, the monitoring of a production stack, and an autoscaling
    target one replica can reach (where a production stack's alerts go is judged against platform.yaml by the
    planner and the preview: `blueprints.plan.floors`)."""
    problems = []
    if bp.platform.namespace in system_namespaces():
        problems.append(FieldProblem(("platform", "namespace"), f"{bp.platform.namespace!r} is a system namespace "
                                     "(Kubernetes' own or an add-on's); a service runs in its own: re-plan"))
    if bp.production and not bp.monitored:
        problems.append(FieldProblem(("monitored",), "a production stack renders its ServiceMonitor, alerts and "
                                     "dashboard: its cluster runs kube-prometheus-stack (operations.cluster_addons); "
                                     "re-plan"))
    most = reachable_target(bp)
    if most is not None and bp.autoscaling.target > most:
        problems.append(FieldProblem(("autoscaling", "target"), f"{bp.autoscaling.target:g} {bp.autoscaling.metric} "
                                     f"per replica is more than one replica reaches ({most:g}): the autoscaler would "
                                     "never scale out; re-plan (the plan's target is what a replica holds at its "
                                     "share of the peak)"))
    return problems


def _edge(bp: Blueprint) -> list[FieldProblem]:
    """An edge cluster's stack runs on owned nodes, keeps no model store and reads `s3://` sources through IAM Roles
    Anywhere; elsewhere none of that applies."""
    edge = bp.platform.kind == "edge-cluster"
    replan = "re-plan with `blueprint plan`"
    problems = []
    if edge != (bp.compute.owned_nodes is not None):
        problems.append(FieldProblem(("compute", "owned_nodes"), "owned_nodes is for platform.kind edge-cluster (and "
                                     f"required there); {replan}"))
    if edge != (bp.storage is None):
        problems.append(FieldProblem(("storage",), f"the model store is omitted exactly on an edge cluster; {replan}"))
    s3 = any(m.source_uri.startswith("s3://") for m in bp.models)
    if (edge and s3) != (bp.roles_anywhere is not None):
        problems.append(FieldProblem(("roles_anywhere",), "roles_anywhere is set exactly for an edge cluster with "
                                     f"s3:// sources; {replan}"))
    from blueprints.requirements.model import MODEL_FILE

    problems += [FieldProblem(("models", i, "format"), f"{m.format.value}: an https:// source is one file, which "
                              f"Triton loads for formats {sorted(f.value for f in MODEL_FILE)}; {replan}")
                 for i, m in enumerate(bp.models) if m.source_uri.startswith("https://") and m.format not in MODEL_FILE]
    wrong = "hf://" if edge else "https://"
    problems += [FieldProblem(("models", i, "source_uri"), f"{wrong} sources are not served on "
                              f"{getattr(bp.platform.kind, 'value', bp.platform.kind)}; {replan}")
                 for i, m in enumerate(bp.models) if m.source_uri.startswith(wrong)]
    return problems


def _pipeline(bp: Blueprint) -> list[FieldProblem]:
    """A compound service's part: its name, stack and stages agree with the part it is; its predictions name its
    models."""
    served = [m.name for m in bp.models]
    problems = []
    if bp.predictions.models is not None and [m.name for m in bp.predictions.models] != served:
        problems.append(FieldProblem(("predictions", "models"), f"names {[m.name for m in bp.predictions.models]} but "
                                     f"the stack serves {served}; re-plan with `blueprint plan`"))
    pipeline = bp.pipeline
    if pipeline is None:
        return problems
    part = pipeline.part.value
    if bp.service != f"{pipeline.service}-{part}":
        problems.append(FieldProblem(("pipeline", "service"), f"the {part} part of service {pipeline.service!r} is "
                                     f"service {pipeline.service}-{part}, not {bp.service!r}"))
    if bp.stack not in pipeline.stacks:
        problems.append(FieldProblem(("pipeline", "stacks"), f"{pipeline.stacks} does not name this stack, "
                                     f"{bp.stack}"))
    own = [s.model for s in pipeline.stages if s.part is pipeline.part]
    if own != served:
        problems.append(FieldProblem(("pipeline", "stages"), f"the stages of part {part} name {own} but the stack "
                                     f"serves {served}; re-plan with `blueprint plan`"))
    return problems


def _compute(bp: Blueprint, catalog: Catalog) -> list[FieldProblem]:
    """The compute against the catalog's instance type, and the replica's resources against the models' needs."""
    c, at = bp.compute, ("compute",)
    sagemaker = bp.archetype.value == "sagemaker-endpoint"
    table = catalog.sagemaker if sagemaker else catalog.ec2
    if c.owned_nodes is not None:
        return _replica_needs(bp)
    inst = table.get(c.instance_type)
    if inst is None:
        other = catalog.ec2 if sagemaker else catalog.sagemaker
        why = (f"{c.instance_type} is a {'EC2' if sagemaker else 'SageMaker hosting'} type; archetype "
               f"{bp.archetype.value} runs on {'SageMaker hosting (ml.*)' if sagemaker else 'EC2 nodes'} types"
               if c.instance_type in other else _unknown(c.instance_type, table))
        return [FieldProblem((*at, "instance_type"), why)]
    problems = [FieldProblem((*at, field), f"{field}={got!r} but {inst.instance_type} has {want!r}; set it to {want!r} "
                             "or re-plan")
                for field, got, want in (("gpu", c.gpu, inst.gpu), ("gpus_per_node", c.gpus_per_node, inst.gpu_count),
                                         ("vcpus_per_node", c.vcpus_per_node, inst.vcpus),
                                         ("memory_gib_per_node", c.memory_gib_per_node, inst.memory_gib),
                                         ("cpu_arch", c.cpu_arch.value, inst.cpu_arch))
                if got != want]
    if (c.accelerator is Accelerator.NVIDIA_GPU) != bool(inst.gpu_count):
        problems.append(FieldProblem((*at, "accelerator"), f"{inst.instance_type} has "
                                     f"{inst.gpu_count or 'no'} GPUs: the accelerator is "
                                     f"{'nvidia-gpu' if inst.gpu_count else 'cpu'}"))
    if sagemaker or problems:
        return problems
    return _replica_needs(bp)


def _replica_needs(bp: Blueprint) -> list[FieldProblem]:
    """A self-hosted replica's memory and disk against its models' needs."""
    c, at = bp.compute, ("compute",)
    problems = []
    weights = sum(m.weights_gib for m in bp.models)
    kind = bp.engine.kind
    if kind == "vllm":
        streamed = streams_weights(bp)
        buffers = streamer_buffer_gib(bp.engine.tensor_parallel_size) if streamed else 0.0  # type: ignore[union-attr]
        need = vllm_host_memory_gib(bp.engine.shm_size_gib, streamer_buffer_gib=buffers)  # type: ignore[union-attr]
        what = "its /dev/shm and vLLM's processes" + (" and the weights streamer's buffers" if streamed else "")
    elif c.accelerator is Accelerator.CPU:
        need, what = cpu_replica_memory_gib(weights), f"{weights:g} GiB of weights loaded on CPU"
    else:
        need, what = weights, f"{weights:g} GiB of weights read through host memory while loading"
    if c.memory_gib_per_replica < need - 1e-6:
        problems.append(FieldProblem((*at, "memory_gib_per_replica"), f"memory_gib_per_replica="
                                     f"{c.memory_gib_per_replica:g} is below the {need:g} GiB a replica needs for "
                                     f"{what}; raise it to >= {need:g}"))
    lora = getattr(bp.engine, "lora", None)
    arch = model_architecture(bp.model.catalog_id, bp.model.architecture, load_catalog()) if lora else None
    disk = replica_ephemeral_gib([weights], streamed=streams_weights(bp), adapters_gib=adapters_volume_gib(arch, lora))
    if c.ephemeral_storage_gib_per_replica < disk:
        problems.append(FieldProblem((*at, "ephemeral_storage_gib_per_replica"), f"ephemeral_storage_gib_per_replica="
                                     f"{c.ephemeral_storage_gib_per_replica:g} is below the {disk} GiB a replica "
                                     f"needs for scratch and, unless streamed, {weights:g} GiB of weights copied to the node"
                                     + (" and its LoRA adapters' local copy" if lora is not None else "")
                                     + f"; raise it to >= {disk}"))
    return problems


def _unknown(name: str, table: dict, what: str = "instance type") -> str:
    """`unknown <what> 'x'; did you mean ...?` with the closest names of `table`."""
    close = difflib.get_close_matches(name, table, n=3)
    return f"unknown {what} {name!r}" + (f"; did you mean {', '.join(close)}?" if close else "; known: "
                                         + ", ".join(sorted(table)))


def _models(bp: Blueprint, catalog: Catalog) -> list[FieldProblem]:
    """Each model against the catalog: known id, its task and context, parameters and weights of its shape."""
    from blueprints.contracts.memory import weights_gib

    problems = []
    for i, m in enumerate(bp.models):
        at = ("models", i)
        https = m.source_uri.startswith("https://")
        if https != (m.sha256 is not None):
            problems.append(FieldProblem((*at, "sha256"), "an https:// source comes with its sha256, and only an "
                                         "https:// source has one (s3:// and hf:// sources are read with an identity): "
                                         + ("add the file's SHA-256" if https else "remove it")))
        if m.source_kms_key_arn is not None and not m.source_uri.startswith("s3://"):
            problems.append(FieldProblem((*at, "source_kms_key_arn"), "a source key decrypts an s3:// source only: "
                                         "remove it"))
        record = catalog.models.get(m.catalog_id) if m.catalog_id else None
        if m.catalog_id is not None and record is None:
            problems.append(FieldProblem((*at, "catalog_id"), _unknown(m.catalog_id, catalog.models, "model id")))
            continue
        arch = model_architecture(m.catalog_id, m.architecture, catalog)
        if arch is None:
            problems.append(FieldProblem((*at, "architecture"), "a model outside the catalog records its "
                                         "architecture (the shape it was planned with); re-plan"))
            continue
        if record is not None and m.architecture is None:
            if m.task is not record.task:
                problems.append(FieldProblem((*at, "task"), f"{m.catalog_id} is a {record.task.value} model"))
            if m.max_context_tokens > record.max_context_tokens:
                problems.append(FieldProblem((*at, "max_context_tokens"), f"max_context_tokens="
                                             f"{m.max_context_tokens} exceeds {m.catalog_id}'s limit of "
                                             f"{record.max_context_tokens}"))
        if abs(m.params_b - arch.params_b) > 1e-9 * max(1.0, arch.params_b):
            problems.append(FieldProblem((*at, "params_b"), f"params_b={m.params_b:g} but the model's shape has "
                                         f"{arch.params_b:g} billion parameters"))
        want = stored_weights_gib(weights_gib(arch, m.precision))
        if abs(m.weights_gib - want) > _CENT:
            problems.append(FieldProblem((*at, "weights_gib"), f"weights_gib={m.weights_gib:g} but "
                                         f"{arch.params_b:g} billion parameters at {m.precision.value} weigh {want:g} "
                                         "GiB; set it to that or re-plan"))
    return problems


def _engine(bp: Blueprint, catalog: Catalog) -> list[FieldProblem]:
    """The engine against the models, the compute and the GPU's KV cache."""
    from blueprints.contracts.sections import OnnxRuntimeEngine, SageMakerEngine, TritonEngine, VllmEngine

    engine, c, at = bp.engine, bp.compute, ("engine",)
    problems = []
    if isinstance(engine, TritonEngine):
        served = [m.name for m in bp.models]
        configured = [m.name for m in engine.models]
        problems += [FieldProblem((*at, "models", j, "name"), f"{name!r} is not a served model ({', '.join(served)}): "
                                  "each Triton model needs a served model (its weights prefix)")
                     for j, name in enumerate(configured) if name not in served]
        problems += [FieldProblem(("models", i, "name"), f"{name!r} has no engine.models entry (its config.pbtxt)")
                     for i, name in enumerate(served) if name not in configured]
        if len(set(configured)) != len(configured):
            problems.append(FieldProblem((*at, "models"), "a model is configured twice"))
        if c.accelerator is Accelerator.CPU:
            problems += [FieldProblem((*at, "models", j, "instance_kind"), "KIND_GPU on CPU compute: set KIND_CPU or "
                                      "plan GPU compute") for j, m in enumerate(engine.models)
                         if m.instance_kind == "KIND_GPU"]
    if isinstance(engine, OnnxRuntimeEngine):
        want = cpu_limit_threads(c.cpu_per_replica)
        if engine.intra_op_threads != want:
            problems.append(FieldProblem((*at, "intra_op_threads"), f"intra_op_threads={engine.intra_op_threads} must "
                                         f"equal the CPU limit (compute.cpu_per_replica={c.cpu_per_replica:g} -> "
                                         f"{want}); set it to {want}"))
    if isinstance(engine, SageMakerEngine):
        found = re.match(r"^[0-9]{12}\.dkr\.ecr\.([a-z0-9-]+)\.", engine.image)
        if found and found.group(1) != bp.region:
            problems.append(FieldProblem((*at, "image"), f"the image is in {found.group(1)}'s ECR but the endpoint is "
                                         f"in {bp.region}: SageMaker pulls from its own region's ECR"))
    if isinstance(engine, VllmEngine):
        if engine.tensor_parallel_size != c.gpus_per_replica:
            problems.append(FieldProblem((*at, "tensor_parallel_size"), f"tensor_parallel_size="
                                         f"{engine.tensor_parallel_size} must equal compute.gpus_per_replica="
                                         f"{c.gpus_per_replica}"))
        if engine.max_model_len > bp.model.max_context_tokens:
            problems.append(FieldProblem((*at, "max_model_len"), f"max_model_len={engine.max_model_len} exceeds the "
                                         f"model's max_context_tokens={bp.model.max_context_tokens}"))
        if engine.shm_size_gib < defaults.SHM_GIB_PER_TP_RANK * engine.tensor_parallel_size:
            problems.append(FieldProblem((*at, "shm_size_gib"), f"shm_size_gib={engine.shm_size_gib:g} is below "
                                         f"{defaults.SHM_GIB_PER_TP_RANK:g} GiB per tensor-parallel rank (NCCL)"))
        if engine.lora is not None:
            problems += [FieldProblem((*at, "lora", *p.loc), p.message) for p in lora_problems(
                engine.lora, base_name=bp.model.name,
                arch=model_architecture(bp.model.catalog_id, bp.model.architecture, catalog))]
        if not problems:
            problems += _kv_fit(bp, catalog, tp=engine.tensor_parallel_size, kv_fp8=engine.kv_cache_dtype == "fp8",
                                utilization=_memory_share(bp, catalog), max_model_len=engine.max_model_len,
                                seqs=("max_num_seqs", engine.max_num_seqs))
    if isinstance(engine, SageMakerEngine) and engine.max_model_len is not None:
        problems += _kv_fit(bp, catalog, tp=engine.tensor_parallel_degree or c.gpus_per_node, kv_fp8=False,
                            utilization=defaults.GPU_MEMORY_UTILIZATION, max_model_len=engine.max_model_len,
                            seqs=("max_rolling_batch_size", engine.max_rolling_batch_size))
    return problems


def _memory_share(bp: Blueprint, catalog: Catalog) -> float:
    """The self-hosted engine's memory flag as the share of each GPU it gives weights and KV cache
    (`memory.engine_memory_share`: TensorRT-LLM's flag is a fraction of what the weights leave)."""
    from blueprints.contracts.memory import engine_memory_share, weights_gib

    engine, m = bp.engine, bp.model
    arch = model_architecture(m.catalog_id, m.architecture, catalog)
    gpu = catalog.gpus.get(bp.compute.gpu or "")
    if arch is None or gpu is None:
        return engine.gpu_memory_utilization  # type: ignore[union-attr]
    return engine_memory_share(engine.kind, engine.gpu_memory_utilization, gpu,  # type: ignore[union-attr]
                               weights_gib_per_gpu=weights_gib(arch, m.precision) / engine.tensor_parallel_size)


def _kv_fit(bp: Blueprint, catalog: Catalog, *, tp: int, kv_fp8: bool, utilization: float, max_model_len: int,
            seqs: tuple[str, int | None]) -> list[FieldProblem]:
    """`max_model_len` within the KV cache (vLLM refuses to start otherwise: "The model's max seq len ... is larger
    than the maximum number of tokens that can be stored in KV cache", vllm/v1/core/kv_cache_utils.py) and the mean
    request; the sequences within what the KV cache holds of mean-length requests (`capacity.planning.engine_limits`)."""
    from blueprints.contracts.memory import kv_cache_tokens, tensor_parallel_problems

    m = bp.model
    arch = model_architecture(m.catalog_id, m.architecture, catalog)
    gpu = catalog.gpus.get(bp.compute.gpu or "")
    if arch is None or gpu is None:
        return []  # named by the model and compute checks
    at = ("engine",)
    problems = [FieldProblem((*at, "tensor_parallel_size" if bp.engine.kind == "vllm" else "tensor_parallel_degree"),
                             problem) for problem in tensor_parallel_problems(arch, tp)]
    lora = getattr(bp.engine, "lora", None)
    kv = kv_cache_tokens(arch, gpu, precision=m.precision, tensor_parallel_size=tp, kv_cache_fp8=kv_fp8,
                         gpu_memory_utilization=utilization, lora=lora.slots if lora is not None else None)
    if kv <= 0:  # the weights (and overhead) take all the memory: no max_model_len can fit
        slots = (f" with {lora.max_loras} LoRA slot(s) of rank {lora.max_lora_rank}" if lora is not None else "")
        problems.append(FieldProblem(("models", 0, "catalog_id" if m.catalog_id else "architecture"),
                                     f"this model's weights{slots} leave no room for a KV cache on {tp}x {gpu.model} "
                                     f"(gpu_memory_utilization {utilization:g}): vLLM fails to start; "
                                     + ("lower engine.lora.max_loras / max_lora_rank, or " if lora is not None else "")
                                     + "re-plan it (`blueprint plan`) for GPUs with more memory per replica (a larger "
                                     "GPU or a higher tensor parallel degree)"))
    elif max_model_len > kv:
        slots = (f" beside {lora.max_loras} LoRA slot(s) of rank {lora.max_lora_rank}" if lora is not None else "")
        problems.append(FieldProblem((*at, "max_model_len"), f"max_model_len={max_model_len} is more than the "
                                     f"{kv:,} tokens of KV cache {tp}x {gpu.model} hold for this model{slots}: vLLM "
                                     f"refuses to start; lower it to <= {kv}"
                                     + ("; or lower engine.lora.max_loras / max_lora_rank" if lora is not None else "")))
    mean = (m.traffic.mean_input_tokens + m.traffic.mean_output_tokens) if m.traffic else None
    if mean is not None and max_model_len < mean:
        problems.append(FieldProblem((*at, "max_model_len"), f"max_model_len={max_model_len} is shorter than a mean "
                                     f"request ({mean} tokens: mean_input_tokens + mean_output_tokens), which would "
                                     f"be rejected; raise it to >= {mean}"))
    field, value = seqs
    # The shared prefix's cached blocks are held once for every sequence (blueprints.requirements.reuse).
    shared = (m.traffic.shared_prefix_tokens or 0) if m.traffic else 0
    held = max(1, sequences_held(kv, request_tokens=mean, shared_prefix_tokens=shared)) if mean else 1
    if mean is not None and value is not None and kv >= mean and value > held:
        each = f"{mean} tokens each" + (f", {shared} of them shared" if shared else "")
        problems.append(FieldProblem((*at, field), f"{field}={value} is more sequences than the KV cache holds at "
                                     f"{each} ({held}); the rest would be preempted over and over: lower it "
                                     f"to <= {held}"))
    return problems


def _startup(bp: Blueprint) -> list[FieldProblem]:
    """Every part of a Kubernetes cold start is at least a second, and scale-in waits longer than a cold start."""
    problems = []
    if (bp.compute.owned_nodes is None) != (bp.startup.node_provisioning_s >= 1):
        problems.append(FieldProblem(("startup", "node_provisioning_s"), "is 0 exactly on an edge cluster (its owned "
                                     "nodes are always there); elsewhere a node is provisioned in >= 1 s (it sets the "
                                     "startup probe and the progress deadline)"))
    if bp.archetype.value != "sagemaker-endpoint" and bp.startup.image_pull_s < 1:
        problems.append(FieldProblem(("startup", "image_pull_s"), "a node pulls the serving image: image_pull_s must "
                                     "be >= 1 (it sets the startup probe and the progress deadline)"))
    if bp.autoscaling.cooldown_s < bp.startup.total_s:
        problems.append(FieldProblem(("autoscaling", "cooldown_s"), f"cooldown_s={bp.autoscaling.cooldown_s} is "
                                     f"shorter than a cold start ({bp.startup.total_s} s): replicas would be removed "
                                     f"while new ones still load; raise it to >= {bp.startup.total_s}"))
    return problems


def _costs(bp: Blueprint, catalog: Catalog) -> list[FieldProblem]:
    """The cost lines against the catalog's price of the instance type and against each other."""
    p, c, at = bp.predictions, bp.compute, ("predictions",)
    problems = []
    hours = catalog.hours_per_month
    for k, line in enumerate(p.cost_lines):
        want = line.quantity * line.usd_per_hour * hours
        if abs(line.monthly_usd - want) > line.quantity * hours * 0.00005 + _CENT:
            problems.append(FieldProblem((*at, "cost_lines", k, "monthly_usd"), f"monthly_usd={line.monthly_usd:g} "
                                         f"but {line.quantity:g} x ${line.usd_per_hour:g}/hour x {hours:g} hours is "
                                         f"${want:,.2f}"))
    total = sum(line.monthly_usd for line in p.cost_lines)
    if abs(p.monthly_cost_usd - total) > _CENT:
        problems.append(FieldProblem((*at, "monthly_cost_usd"), f"monthly_cost_usd={p.monthly_cost_usd:g} but the cost "
                                     f"lines sum to ${total:,.2f}"))
    if p.monthly_cost_usd <= 0 and c.owned_nodes is None:
        problems.append(FieldProblem((*at, "monthly_cost_usd"), "a stack on EC2 or SageMaker capacity costs more than "
                                     "$0 a month (its nodes or instances); re-plan with `blueprint plan`"))
    sagemaker = bp.archetype.value == "sagemaker-endpoint"
    inst = (catalog.sagemaker if sagemaker else catalog.ec2).get(c.instance_type)
    if inst is None or not p.cost_lines:
        return problems
    spot = c.capacity_type.value == "spot"
    price = round(inst.usd_per_hour * (catalog.spot_price_factor if spot else 1.0), 4)
    first = p.cost_lines[0]
    if abs(first.usd_per_hour - price) > 0.00011 or c.instance_type not in first.item:
        problems.append(FieldProblem((*at, "cost_lines", 0, "usd_per_hour"), f"the first cost line is the "
                                     f"{c.instance_type} {'instances' if sagemaker else 'nodes'} at the catalog's "
                                     f"${price:g}/hour{' (spot estimate)' if spot else ''}, not {first.item!r} at "
                                     f"${first.usd_per_hour:g}"))
    # The peak fleet: the nodes the planned replicas take as the scheduler places them, or more when the autoscaler
    # runs more for a cooldown under the planned traffic (`blueprints.plan.scaling`), never more than its maximum.
    least, most = bp.planned_nodes, bp.placement.nodes(max(bp.autoscaling.max_replicas, c.replicas))
    if not (least - 1e-9 <= first.quantity <= most + 1e-9 and float(first.quantity).is_integer()):
        problems.append(FieldProblem((*at, "cost_lines", 0, "quantity"), f"quantity={first.quantity:g} but "
                                     f"{c.replicas} replica(s) at {c.replicas_per_node} per node, placed over "
                                     f"{bp.placement.zone_domains} zone(s), take {least} "
                                     f"{'instances' if sagemaker else 'nodes'}, and the autoscaler's maximum "
                                     f"{bp.autoscaling.max_replicas} takes {most}: the peak fleet is between them"))
    fixed = sum(line.monthly_usd for line in p.cost_lines[1:])
    if p.max_monthly_cost_usd is not None:
        want = most * first.usd_per_hour * hours + fixed
        if abs(p.max_monthly_cost_usd - want) > most * hours * 0.00005 + _CENT:
            problems.append(FieldProblem((*at, "max_monthly_cost_usd"), f"max_monthly_cost_usd="
                                         f"{p.max_monthly_cost_usd:g} but the autoscaler's maximum of "
                                         f"{bp.autoscaling.max_replicas} takes {most} at ${first.usd_per_hour:g}/hour "
                                         f"plus ${fixed:,.2f} of fixed items: ${want:,.2f}"))
    if p.expected_monthly_cost_usd is not None and p.expected_monthly_cost_usd > p.monthly_cost_usd + _CENT:
        problems.append(FieldProblem((*at, "expected_monthly_cost_usd"), f"expected_monthly_cost_usd="
                                     f"{p.expected_monthly_cost_usd:g} is above the peak, monthly_cost_usd="
                                     f"{p.monthly_cost_usd:g}: the peak is the largest fleet the autoscaler runs; "
                                     "re-plan with `blueprint plan`"))
    if p.cost_is_estimate != spot:
        problems.append(FieldProblem((*at, "cost_is_estimate"), "cost_is_estimate is true exactly when "
                                     "compute.capacity_type is spot (estimated prices)"))
    return problems


def _predictions(bp: Blueprint) -> list[FieldProblem]:
    problems = []
    for name in ("ttft_p95_ms", "itl_p95_ms", "latency_p95_ms"):
        target, predicted = getattr(bp.slo, name), getattr(bp.predictions, name)
        # Predictions are stored rounded to 0.1 ms; more than that over the target is a plan missing its SLO.
        if target is not None and predicted is not None and predicted > target + 0.05:
            problems.append(FieldProblem(("predictions", name), f"{name}={predicted:g} misses slo.{name}={target:g}: "
                                         "this plan does not meet its own SLO; re-plan with `blueprint plan` instead "
                                         "of editing the stack config"))
    return problems
