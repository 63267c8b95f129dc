"""The two commands end to end, wiring the real clients (Pulumi CLI, Kubernetes API, Prometheus, AWS) to the checks
and the Job; the CLI only parses flags and renders what these return.
"""

from __future__ import annotations

import datetime as dt
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.sections import Archetype
from blueprints.contracts.stackconfig import read_stack_config, stack_config_path
from blueprints.core import defaults
from blueprints.core.errors import BenchmarkError, DeployedStackError
from blueprints.operate import benchmark as bench
from blueprints.operate.coldstart import read_cold_start, read_ready_cold_start
from blueprints.operate.deployed import (
    aws_session, kube_api_client, node_lister, object_reader, pulumi_cli, require_output, stack_outputs,
)
from blueprints.operate.manifests import StackManifests
from blueprints.operate.prometheus import PrometheusApi, http_transport, service_proxy_transport
from blueprints.contracts.benchmark_result import (
    CLIENT_SOURCE, AutoscalingRecord, BenchmarkResultFile, ClientRecord, ColdStartRecord, PlannedRecord, TargetRecord, VllmBenchRun,
    result_path, write_result,
)
from blueprints.operate.verify import VerifyReport, one_token_request, verify_kubernetes, verify_sagemaker
from blueprints.review.compound import part_stacks
from blueprints.review.preview import run_preview


@dataclass(frozen=True)
class Access:
    """How to reach a deployed stack: an outputs file instead of the Pulumi CLI, a kubeconfig and context instead of
    the platform's, a Prometheus URL instead of the API server's service proxy, an endpoint URL instead of the
    `endpoint` output."""

    outputs_file: Path | None = None
    kubeconfig: Path | None = None
    context: str | None = None
    prometheus_url: str | None = None
    endpoint: str | None = None


def service_stack(stack: str, stacks_dir: Path) -> Blueprint:
    """A service stack's blueprint; BlueprintError for a compound service's environment (name its parts) or a
    platform stack."""
    parts = part_stacks(stack, stacks_dir)
    if parts is not None:
        raise DeployedStackError(f"{stack} is a compound service's environment: run it for each part stack, "
                                 f"{parts[0]} and {parts[1]}")
    return read_stack_config(stack_config_path(stacks_dir, stack))


def rendered(stack: str, bp: Blueprint, *, stacks_dir: Path, program: Path) -> tuple[StackManifests, dict[str, Any]]:
    """The stack's manifests and (stand-in) outputs from the offline preview."""
    report = run_preview(stack, stacks_dir=stacks_dir, program=program)
    return StackManifests(bp, tuple(report.manifests)), report.outputs


def verify_deployed(stack: str, *, stacks_dir: Path, program: Path, root: Path | None,
                    access: Access) -> VerifyReport:
    """`blueprint verify`: read the stack's outputs and check it (see `blueprints.operate.verify`).

    Raises:
        DeployedStackError: the Pulumi CLI, AWS credentials or the cluster are out of reach (exit 2).
    """
    bp = service_stack(stack, stacks_dir)
    pulumi = pulumi_cli(root)
    outputs = stack_outputs(stack, outputs_file=access.outputs_file, pulumi=pulumi)
    if bp.archetype is Archetype.SAGEMAKER_ENDPOINT:
        from blueprints.operate.sagemaker import invoke

        session = aws_session(bp)
        credentials = session.get_credentials()
        url = require_output(outputs, "endpoint", stack)
        require_output(outputs, "endpoint_name", stack)
        body = one_token_request(bp)
        return verify_sagemaker(bp, outputs, sagemaker=session.client("sagemaker"),
                                cloudwatch=session.client("cloudwatch"),
                                invoke=lambda signed: invoke(url, body, credentials=credentials if signed else None,
                                                             region=bp.region))
    for key in ("endpoint", "api_key"):
        require_output(outputs, key, stack)
    sm, _ = rendered(stack, bp, stacks_dir=stacks_dir, program=program)
    api = kube_api_client(bp, kubeconfig=access.kubeconfig, context=access.context, pulumi=pulumi)
    prom = None
    if bp.monitored:
        if access.prometheus_url:
            prom = PrometheusApi(http_transport(access.prometheus_url), where=access.prometheus_url)
        else:
            address = sm.prometheus_address() or defaults.PROMETHEUS_URL
            try:
                transport = service_proxy_transport(api, address)
            except ValueError as exc:
                raise DeployedStackError(f"{exc}: the stack's Prometheus is not an in-cluster Service the API server "
                                         "can proxy to; pass --prometheus-url") from None
            prom = PrometheusApi(transport, where=f"{address} (via the API server)")
    return verify_kubernetes(sm, outputs, prom=prom, read=object_reader(api), list_nodes=node_lister(api),
                             endpoint=access.endpoint, cold_start=read_ready_cold_start(api, sm))


# --- benchmark -----------------------------------------------------------------------------------------------------

@dataclass
class BenchmarkRun:
    """What `blueprint benchmark` prepared (and, unless a dry run, ran): the settings, the objects or commands, the
    result file written, and the serving pod measured (name, and the stack's manifests to read its cold start)."""

    blueprint: Blueprint
    settings: bench.BenchmarkSettings
    manifests: list[dict[str, Any]]
    commands: list[list[str]]
    result: BenchmarkResultFile | None = None
    path: Path | None = None
    pod: str | None = None
    serving: StackManifests | None = None


def parse_rates(text: str | None) -> list[float] | None:
    """`--rates 0.5,1,2` -> [0.5, 1.0, 2.0]; None when not given."""
    if text is None:
        return None
    try:
        return [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise BenchmarkError(f"--rates {text!r}: give requests/s per replica separated by commas, e.g. 0.5,1,2") \
            from None


def prepare_benchmark(stack: str, *, stacks_dir: Path, program: Path, root: Path | None, access: Access,
                      rates: list[float] | None, duration_s: int | None, dry_run: bool,
                      now: dt.datetime, approximate: bool = False,
                      prompts: Path | None = None) -> tuple[BenchmarkRun, Any]:
    """The sweep's settings and what runs it: for `vllm-gpu`, the NetworkPolicies and Job (with the target pod's IP,
    or a placeholder in a dry run); for SageMaker, one `docker run` of the client per rate. Returns (the run, the
    Kubernetes API client or None). A dry run reads the preview's stand-in outputs unless `--outputs` is given;
    `approximate` measures a workload the random dataset cannot reproduce (`bench.benchmark_settings`); `prompts`
    replays the user's prompts file instead (`blueprints.operate.prompts`: a ConfigMap the Job mounts, or a bind
    mount of the file into the SageMaker client's container)."""
    bp = service_stack(stack, stacks_dir)
    settings = bench.benchmark_settings(bp, rates=rates, duration_s=duration_s, approximate=approximate,
                                        prompts=prompts)
    pulumi = pulumi_cli(root)
    if bp.archetype is Archetype.SAGEMAKER_ENDPOINT:
        from blueprints.operate.sagemaker_bench import DRY_RUN_PORT, DRY_RUN_PROMPTS, DRY_RUN_RESULTS, \
            DRY_RUN_TOKENIZER, docker_commands

        return BenchmarkRun(bp, settings, [], docker_commands(
            bp, settings, port=DRY_RUN_PORT, tokenizer_dir=DRY_RUN_TOKENIZER, results_dir=DRY_RUN_RESULTS,
            prompts_dir=DRY_RUN_PROMPTS if settings.prompts else None)), None
    sm, stand_in = rendered(stack, bp, stacks_dir=stacks_dir, program=program)
    api, pod = None, None
    if dry_run and access.outputs_file is None:
        outputs, target = stand_in, bench.DRY_RUN_TARGET
    else:
        outputs = stack_outputs(stack, outputs_file=access.outputs_file, pulumi=pulumi)
        if dry_run:
            target = bench.DRY_RUN_TARGET
        else:
            from blueprints.operate.jobs import ready_pod

            api = kube_api_client(bp, kubeconfig=access.kubeconfig, context=access.context, pulumi=pulumi)
            pod, target = ready_pod(api, sm)
    name = bench.job_name(bp, now)
    weights_uri = require_output(outputs, "weights_uri", stack)
    config_map = bench.prompts_config_map(sm, settings, name=name)
    objects = [*bench.benchmark_network_policies(sm, name=name), *([config_map] if config_map else []),
               bench.benchmark_job(sm, settings, name=name, weights_uri=weights_uri, target_ip=target)]
    return BenchmarkRun(bp, settings, objects, [], pod=pod, serving=sm), api


def result_file(run: BenchmarkRun, runs: list[VllmBenchRun], *, client_image: str, backend: str, endpoint: str,
                address: str, date: dt.date, cold_start: ColdStartRecord | None = None,
                autoscaling: AutoscalingRecord | None = None) -> BenchmarkResultFile:
    """The result file of a finished sweep (with the measured pod's cold start when it was read, and the fleet's
    replica counts during the sweep when the stack scales)."""
    bp = run.blueprint
    engine = bp.engine
    per_replica = bp.predictions.requests_per_s_capacity / max(1, bp.compute.replicas)
    return BenchmarkResultFile(
        stack=bp.stack, date=date, measured=True,
        client=ClientRecord(vllm_version=bench.image_version(client_image), image=client_image, source=CLIENT_SOURCE),
        target=TargetRecord(
            archetype=bp.archetype.value, model=bp.model.name, catalog_id=bp.model.catalog_id, gpu=bp.compute.gpu,
            instance_type=bp.compute.instance_type,
            tensor_parallel_size=getattr(engine, "tensor_parallel_size", None)
            or getattr(engine, "tensor_parallel_degree", None),
            engine_image=engine.image, max_num_seqs=getattr(engine, "max_num_seqs", None)
            or getattr(engine, "max_rolling_batch_size", None),
            max_num_batched_tokens=getattr(engine, "max_num_batched_tokens", None),
            max_model_len=getattr(engine, "max_model_len", None), kv_cache_dtype=getattr(engine, "kv_cache_dtype",
                                                                                         None),
            replicas_measured=1, address=address),
        settings=bench.settings_record(run.settings, backend=backend, endpoint=endpoint),
        planned=PlannedRecord(per_replica_peak_rps=run.settings.per_replica_peak_rps,
                              ttft_p95_ms=bp.predictions.ttft_p95_ms, itl_p95_ms=bp.predictions.itl_p95_ms,
                              latency_p95_ms=bp.predictions.latency_p95_ms,
                              per_replica_capacity_rps=round(per_replica, 4)),
        runs=runs, cold_start=cold_start, autoscaling=autoscaling)


def run_kubernetes_benchmark(run: BenchmarkRun, api: Any, *, root: Path, log: Callable[[str], None],
                             today: dt.date) -> BenchmarkRun:
    """Run the Job, collect the runs, read the measured pod's cold start (`blueprints.operate.coldstart`) and, where
    the stack scales, the fleet's size during the sweep (`blueprints.operate.scaling`), write
    `benchmarks/results/<stack>/<date>.json`."""
    from blueprints.operate.jobs import parse_runs, run_job
    from blueprints.operate.scaling import ReplicaWatch, deployment_counts, scales

    bp = run.blueprint
    job = run.manifests[-1]
    namespace = job["metadata"]["namespace"]
    watch = ReplicaWatch(deployment_counts(api, namespace, bp.workload_name), bp=bp, log=log,
                         source=f"Deployment {namespace}/{bp.workload_name} spec.replicas and status.readyReplicas") \
        if scales(bp) else None
    text = run_job(api, run.manifests, namespace=namespace, log=log, observe=watch.sample if watch else None)
    runs = parse_runs(text, len(run.settings.rates))
    client_image = job["spec"]["template"]["spec"]["initContainers"][1]["image"]
    cold = read_cold_start(api, run.serving, run.pod) if run.pod and run.serving else "no target pod named"
    if isinstance(cold, str):
        log(f"cold start not recorded: {cold}")
    w = run.settings.workload
    run.result = result_file(run, runs, client_image=client_image, backend=w.backend, endpoint=w.endpoint,
                             address="one serving pod's authenticating proxy (pod IP, port api)", date=today,
                             cold_start=None if isinstance(cold, str) else cold,
                             autoscaling=watch.record() if watch else None)
    run.path = result_path(root, run.blueprint.stack, today)
    write_result(run.result, run.path)
    return run


def run_sagemaker_benchmark(run: BenchmarkRun, *, stack: str, root: Path, access: Access, log: Callable[[str], None],
                            today: dt.date) -> BenchmarkRun:
    """Fetch the tokenizer from the model store, start the signing proxy, run the client once per rate in Docker,
    write `benchmarks/results/<stack>/<date>.json`."""
    from blueprints.operate.sagemaker import ProxyTarget, SigningProxy, runtime_url
    from blueprints.operate.sagemaker_bench import (
        BACKEND, ENDPOINT, docker_commands, fetch_tokenizer, run_commands, write_prompts,
    )
    from blueprints.operate.scaling import ReplicaWatch, endpoint_counts, scales

    bp = run.blueprint
    outputs = stack_outputs(stack, outputs_file=access.outputs_file, pulumi=pulumi_cli(root))
    name = require_output(outputs, "endpoint_name", stack)
    weights_uri = require_output(outputs, "weights_uri", stack)
    session = aws_session(bp)
    with tempfile.TemporaryDirectory(prefix="blueprint-benchmark-") as tmp:
        tokenizer, results = Path(tmp) / "tokenizer", Path(tmp) / "results"
        tokenizer.mkdir()
        results.mkdir()
        fetch_tokenizer(session.client("s3"), weights_uri, tokenizer)
        prompts = write_prompts(run.settings, Path(tmp) / "prompts") if run.settings.prompts else None
        watch = ReplicaWatch(endpoint_counts(session.client("sagemaker"), name), bp=bp, log=log,
                             source=f"SageMaker endpoint {name} DesiredInstanceCount and CurrentInstanceCount") \
            if scales(bp) else None
        target = ProxyTarget(runtime_url(bp.region), name, bp.region, session.get_credentials())
        with SigningProxy(target) as proxy:
            commands = docker_commands(bp, run.settings, port=proxy.port, tokenizer_dir=str(tokenizer),
                                       results_dir=str(results), prompts_dir=prompts)
            runs = run_commands(commands, image=defaults.VLLM_IMAGE, results=results, log=log,
                                budget_s=2 * run.settings.duration_s + bench.PER_RUN_OVERHEAD_S,
                                observe=watch.sample if watch else None)
    run.result = result_file(run, runs, client_image=defaults.VLLM_IMAGE, backend=BACKEND, endpoint=ENDPOINT,
                             address=f"the SageMaker endpoint {name} through the signing proxy on this machine",
                             date=today, autoscaling=watch.record() if watch else None)
    run.path = result_path(root, stack, today)
    write_result(run.result, run.path)
    return run
