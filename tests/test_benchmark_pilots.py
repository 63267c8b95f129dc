"""`blueprint benchmark` of every finalist `blueprint pilot` writes: vLLM, SGLang and TensorRT-LLM on vllm-gpu and a
SageMaker endpoint, each driven by the same client (`vllm bench serve` from the pinned vLLM image) through the stack's
authenticating proxy with the key it checks, on the API the plan measured; and the autoscaler's replica counts during
the sweep, read from (stand-ins of) the Kubernetes and SageMaker APIs."""

from __future__ import annotations

import datetime as dt
import shutil
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace as NS
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from blueprints.cli import app
from blueprints.contracts.benchmark_result import load_result, write_result
from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.proxy import API_KEY_FIELD, PROXY_CONFIG_FIELD, upstream
from blueprints.contracts.stackconfig import read_stack_config
from blueprints.core import defaults
from blueprints.core.errors import DeployedStackError
from blueprints.operate import benchmark as bench
from blueprints.operate.scaling import ReplicaWatch, deployment_counts, endpoint_counts, scales
from tests.cli_tools import engine_parse
from tests.conftest import ROOT
from tests.test_benchmark import _Api, arg, dry_run  # noqa: F401 (fixture)
from tests.test_verify import bare_env  # noqa: F401 (fixture)

runner = CliRunner()
#: engine -> (the requirements' edits, `blueprint pilot` flags): TensorRT-LLM's tables cover H100 only, which dev's
#: policy does not allow, so its pilot lands in prod (as tests/test_pilot.py pilots it).
ENGINES = {"vllm": ({}, []), "sglang": ({}, []),
           "tensorrt-llm": ({"budget": {"max_monthly_usd": 500000}}, ["--env", "prod"])}


@dataclass(frozen=True)
class Pilot:
    """A pilot stack as `blueprint pilot` wrote it, its `blueprint benchmark --dry-run` and its serving pod."""

    blueprint: Blueprint
    benchmark: Any
    pod: dict | None


def _piloted(root: Path, requirements: str, flags: list[str]) -> Pilot:
    """`blueprint pilot <requirements> --finalists 1`, then `blueprint benchmark <its pilot> --dry-run` (one rate)."""
    from blueprints.operate.run import rendered

    piloted = runner.invoke(app, ["pilot", requirements, "--finalists", "1", *flags])
    assert piloted.exit_code == 0, piloted.output
    [path] = (root / "stacks").glob(f"Pulumi.{Path(requirements).stem}-pilot-1.yaml")
    bp = read_stack_config(path)
    result = runner.invoke(app, ["benchmark", bp.stack, "--dry-run", "--rates", "1", "--duration", "30"])
    pod = None
    if bp.archetype.value == "vllm-gpu":
        sm, _ = rendered(bp.stack, bp, stacks_dir=root / "stacks", program=root / "__main__.py")
        pod = sm.pod_spec()
    return Pilot(bp, result, pod)


@pytest.fixture(scope="module")
def pilots(tmp_path_factory) -> dict[str, Pilot]:
    """A copy of the project: the chat assistant piloted on each engine in turn (`operations.engines: [<engine>]`,
    its one finalist benchmarked before the next engine's replaces it) and the managed prototype summarizer piloted
    on SageMaker: {engine or "sagemaker": Pilot}."""
    root = tmp_path_factory.mktemp("pilots")
    for name in ("__main__.py", "Pulumi.yaml"):
        shutil.copy(ROOT / name, root / name)
    shutil.copytree(ROOT / "policies" / "config", root / "policies" / "config")
    shutil.copytree(ROOT / "stacks", root / "stacks")
    found = {}
    requirements = root / "stacks" / "requirements" / "chat-assistant.yaml"
    base = yaml.safe_load(requirements.read_text())
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        for engine, (edits, flags) in ENGINES.items():
            data = {**base, **edits, "operations": {**base["operations"], "engines": [engine]}}
            requirements.write_text(yaml.safe_dump(data, sort_keys=False))
            found[engine] = _piloted(root, "stacks/requirements/chat-assistant.yaml", flags)
        found["sagemaker"] = _piloted(root, "stacks/requirements/prototype-summarizer.yaml", [])
    return found


@pytest.mark.parametrize("engine", list(ENGINES))
def test_each_engines_pilot_is_benchmarked_by_the_vllm_client_through_its_proxy_with_the_key_it_checks(pilots,
                                                                                                        engine):
    bp, result, pod = pilots[engine].blueprint, pilots[engine].benchmark, pilots[engine].pod
    assert bp.engine.kind == engine and bp.archetype.value == "vllm-gpu" and bp.pilot is not None
    assert result.exit_code == 0, result.output
    job = list(yaml.safe_load_all(result.stdout))[-1]
    [run] = [c for c in job["spec"]["template"]["spec"]["initContainers"] if c["name"].startswith("rate-")]
    # the client: vLLM's own, from the stack's vLLM image or the catalog's (the SGLang and TensorRT-LLM images carry
    # no vLLM)
    assert run["command"] == ["vllm", "bench", "serve"]
    assert run["image"] == (bp.engine.image if engine == "vllm" else defaults.VLLM_IMAGE) == defaults.VLLM_IMAGE
    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == run["image"]  # `cat` of the results
    # the API the plan measured (chat), which every engine serves (engines.yaml), through the proxy's port
    assert bp.model.traffic.api == "chat"
    assert (arg(run["args"], "--backend"), arg(run["args"], "--endpoint")) == ("openai-chat", "/v1/chat/completions")
    engine_container, proxy = pod["containers"]
    [api_port] = [p["containerPort"] for p in proxy["ports"] if p["name"] == "api"]
    assert arg(run["args"], "--base-url") == f"http://$({bench.TARGET_ENV}):{api_port}"
    # ... which forwards to the engine's own port, the one the engine listens on
    [http_port] = [p["containerPort"] for p in engine_container["ports"] if p["name"] == "http"]
    assert upstream(bp).http_port == http_port == bp.engine.port
    args = " ".join(map(str, engine_container["args"]))
    assert f"--port={http_port}" in args or f"--port {http_port}" in args
    # the key: the one the proxy checks (the Secret whose envoy.json it mounts), as vllm bench serve sends it
    # (OPENAI_API_KEY -> `Authorization: Bearer`, lib/endpoint_request_func.py:152-154)
    [mounted] = [v["secret"]["secretName"] for v in pod["volumes"]
                 if "secret" in v and any(i["path"] == PROXY_CONFIG_FIELD for i in v["secret"]["items"])]
    env = {e["name"]: e.get("valueFrom") for e in run["env"]}
    assert env["OPENAI_API_KEY"] == {"secretKeyRef": {"name": mounted, "key": API_KEY_FIELD}}


def test_a_sagemaker_pilot_is_benchmarked_by_the_same_client_through_the_signing_proxy(pilots):
    bp, result = pilots["sagemaker"].blueprint, pilots["sagemaker"].benchmark
    assert bp.archetype.value == "sagemaker-endpoint" and bp.pilot is not None
    assert result.exit_code == 0, result.output
    [command] = result.stdout.strip().splitlines()
    args = command.split()
    assert args[args.index("--entrypoint") + 1:args.index("--entrypoint") + 4] == ["vllm", defaults.VLLM_IMAGE,
                                                                                   "bench"]
    assert (arg(args, "--backend"), arg(args, "--endpoint")) == ("openai-chat", "/v1/chat/completions")
    assert arg(args, "--base-url") == "http://127.0.0.1:<proxy-port>"


# --- the autoscaler during the sweep ---------------------------------------------------------------------------------

class _Scaling(_Api):
    """The Job's API stand-in (tests/test_benchmark.py) whose pod runs `rate-01` and whose serving Deployment grows
    from 1 to 2 replicas asked for, the second Ready a poll later."""

    def __init__(self) -> None:
        super().__init__(polls=4, succeed=True)
        self.fleet = iter([(1, 1), (2, 1), (2, 2), (2, 2), (2, 2)])

    def list_namespaced_pod(self, namespace, label_selector, **_):
        running = self.ns(terminated=None, waiting=None, running=self.ns(started_at=None))
        status = self.ns(phase="Running", container_statuses=[],
                         init_container_statuses=[self.ns(name="rate-01", state=running)])
        return self.ns(items=[self.ns(metadata=self.ns(name="bench-pod"), status=status)])

    def read_namespaced_deployment(self, name, namespace, **_):
        self.calls.append(("deployment", name))
        desired, ready = next(self.fleet)
        return self.ns(spec=self.ns(replicas=desired), status=self.ns(ready_replicas=ready))


def _clock():
    at = iter(dt.datetime(2026, 12, 7, 10, 0, tzinfo=dt.timezone.utc) + dt.timedelta(seconds=10 * i)
              for i in range(100))
    return lambda: next(at)


def test_the_replica_counts_during_a_kubernetes_sweep_are_recorded_where_they_change(monkeypatch, dry_run):
    from kubernetes import client, utils

    from blueprints.operate.jobs import run_job

    bp = read_stack_config(ROOT / "stacks" / "Pulumi.chat-assistant-prod.yaml")
    assert scales(bp)
    api = _Scaling()
    for cls in ("BatchV1Api", "CoreV1Api", "NetworkingV1Api", "AppsV1Api"):
        monkeypatch.setattr(client, cls, lambda _api, a=api: a)
    monkeypatch.setattr(utils, "create_from_dict", lambda _api, obj, namespace: None)
    watch = ReplicaWatch(deployment_counts(object(), "chat-assistant", bp.workload_name), source="Deployment", bp=bp,
                         log=lambda m: None, now=_clock())
    run_job(object(), dry_run, namespace="chat-assistant", log=lambda m: None, sleep=lambda s: None,
            clock=lambda: 0.0, observe=watch.sample)
    record = watch.record()
    assert [(s.run, s.desired, s.ready) for s in record.samples] == [(1, 1, 1), (1, 2, 1), (1, 2, 2), (None, 2, 2)]
    assert (record.min_replicas, record.max_replicas, record.most_desired) == (
        bp.autoscaling.min_replicas, bp.autoscaling.max_replicas, 2)
    assert sum(1 for c in api.calls if c[0] == "deployment") == 5  # every poll read, only the changes kept


def test_a_sagemaker_sweep_records_the_variants_instance_counts_before_and_after_each_run(tmp_path):
    from blueprints.operate.sagemaker_bench import run_commands

    bp = read_stack_config(ROOT / "stacks" / "Pulumi.chat-assistant-prod.yaml")
    counts = iter([(1, 1), (2, 1), (2, 2), (2, 2)])
    endpoint = NS(describe_endpoint=lambda EndpointName: {"ProductionVariants": [
        dict(zip(("DesiredInstanceCount", "CurrentInstanceCount"), next(counts)), VariantName="AllTraffic")]})
    watch = ReplicaWatch(endpoint_counts(endpoint, "pilot"), source="SageMaker", bp=bp, log=print, now=_clock())
    template = load_result(ROOT / "tests/data/benchmark-results/chat-assistant-prod/2026-12-03.json")
    for i in range(2):
        (tmp_path / bench.result_file(i)).write_text(template.runs[i].model_dump_json(exclude_unset=True))
    run_commands([["docker", "run", "a"], ["docker", "run", "b"]], image="img", budget_s=10, results=tmp_path,
                 log=lambda m: None, runner=lambda *a, **k: None, observe=watch.sample)
    assert [(s.run, s.desired, s.ready) for s in watch.record().samples] == [(0, 1, 1), (0, 2, 1), (1, 2, 2),
                                                                             (1, 2, 2)]


def test_a_failed_read_leaves_the_record_out_and_the_sweep_goes_on():
    bp = read_stack_config(ROOT / "stacks" / "Pulumi.chat-assistant-prod.yaml")

    def refused():
        raise DeployedStackError("reading Deployment x/y failed (403 Forbidden)")

    logged = []
    watch = ReplicaWatch(refused, source="Deployment", bp=bp, log=logged.append)
    watch.sample(0)
    watch.sample(1)
    assert watch.record() is None and logged == ["autoscaling not recorded: reading Deployment x/y failed (403 "
                                                 "Forbidden)"]


def test_the_autoscaling_record_round_trips_through_the_result_file_and_is_absent_for_a_fixed_fleet(tmp_path):
    from blueprints.operate.run import BenchmarkRun, result_file

    recorded = load_result(ROOT / "tests/data/benchmark-results/chat-assistant-prod/2026-12-03.json")
    bp = read_stack_config(ROOT / "stacks" / "Pulumi.chat-assistant-prod.yaml")
    settings = bench.benchmark_settings(bp)
    watch = ReplicaWatch(lambda: (3, 3), source="Deployment", bp=bp, log=print, now=_clock())
    watch.sample(0)
    watch.sample(5)
    written = result_file(BenchmarkRun(bp, settings, [], []), list(recorded.runs), client_image=bp.engine.image,
                          backend="openai-chat", endpoint="/v1/chat/completions", address="x",
                          date=dt.date(2026, 12, 7), autoscaling=watch.record())
    path = tmp_path / "r.json"
    write_result(written, path)
    again = load_result(path)
    assert [(s.run, s.desired) for s in again.autoscaling.samples] == [(0, 3), (5, 3)]
    without = written.model_copy(update={"autoscaling": None})
    write_result(without, path)
    assert "autoscaling" not in path.read_text() and load_result(path).autoscaling is None


# --- the client's command line, parsed by vLLM's own parser -----------------------------------------------------------

def vllm_bench_parse(argvs: list[list[str]]) -> list[dict]:
    """`argvs` (each after `vllm bench serve`) through vLLM 0.24.0's own parser (`add_cli_args` on its
    FlexibleArgumentParser: tests/tools/vllm_bench_argv.py, `tests.cli_tools.engine_parse`)."""
    return engine_parse("vllm", "vllm_bench_argv.py", argvs)["results"]


def test_every_pilots_client_argv_parses_with_vllms_own_parser(pilots, bare_env, tmp_path):
    """Each engine's pilot sweep, and the same with --prompts, through vLLM 0.24.0's `vllm bench serve` parser: every
    flag known, every value of the type and choice it takes, and the custom dataset reading each line's output."""
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt": "hello", "max_tokens": 12}\n')
    argvs = []
    for engine in ENGINES:
        job = list(yaml.safe_load_all(pilots[engine].benchmark.stdout))[-1]
        argvs += [c["args"] for c in job["spec"]["template"]["spec"]["initContainers"] if c["name"].startswith("rate-")]
    line = pilots["sagemaker"].benchmark.stdout.strip().splitlines()[0].split()
    argvs.append(line[line.index("serve") + 1:])
    with_prompts = runner.invoke(app, ["benchmark", "chat-assistant-prod", "--dry-run", "--rates", "1",
                                       "--duration", "30", "--prompts", str(prompts)])
    assert with_prompts.exit_code == 0, with_prompts.output
    job = list(yaml.safe_load_all(with_prompts.stdout))[-1]
    argvs.append(job["spec"]["template"]["spec"]["initContainers"][1]["args"])
    results = vllm_bench_parse([*argvs, [*argvs[-1], "--random-input-lenn", "5"], [*argvs[0], "--insecure"]])
    *parsed, misspelt, insecure = results
    assert insecure["exit"] == 0 and insecure["args"]["insecure"] is True  # a proxy serving TLS
    for argv, result in zip(argvs, parsed):
        assert result["exit"] == 0, (argv, result["error"][-300:])
        got = result["args"]
        assert (got["backend"], got["endpoint"]) == ("openai-chat", "/v1/chat/completions")
        assert got["ignore_eos"] is True and got["num_prompts"] == int(arg(argv, "--num-prompts"))
        assert got["request_rate"] == float(arg(argv, "--request-rate")) and got["burstiness"] == 1.0
        assert got["save_result"] is True and got["result_dir"] == bench.RESULTS_DIR_IN_POD
    random, custom = parsed[0]["args"], parsed[-1]["args"]
    assert random["dataset_name"] == "random" and random["random_input_len"] == int(arg(argvs[0],
                                                                                        "--random-input-len"))
    assert (custom["dataset_name"], custom["dataset_path"], custom["custom_output_len"],
            custom["skip_chat_template"]) == ("custom", "/prompts/prompts.jsonl", -1, True)
    assert misspelt["exit"] == 2 and "unrecognized arguments: --random-input-lenn" in misspelt["error"]


def test_a_proxy_that_serves_tls_is_reached_over_https_without_checking_its_certificate_at_the_pod_ip(bare_env):
    """A proxy terminating TLS itself (NodePort or MetalLB exposure) answers HTTPS only: the client speaks it, with
    `--insecure` (the certificate names the service, not the pod IP)."""
    from blueprints.operate.manifests import StackManifests
    from blueprints.operate.run import rendered

    bp = read_stack_config(ROOT / "stacks" / "Pulumi.chat-assistant-prod.yaml")
    sm, _ = rendered(bp.stack, bp, stacks_dir=ROOT / "stacks", program=ROOT / "__main__.py")
    settings = bench.benchmark_settings(bp, rates=[1], duration_s=30)

    def client(manifests: StackManifests) -> list[str]:
        job = bench.benchmark_job(manifests, settings, name="b", weights_uri="s3://b/m/", target_ip="10.0.0.9")
        return job["spec"]["template"]["spec"]["initContainers"][1]["args"]

    plain = client(sm)
    assert not sm.proxy_serves_tls and arg(plain, "--base-url").startswith("http://") and "--insecure" not in plain
    import copy

    manifests = copy.deepcopy(list(sm.manifests))
    deployment = next(m for m in manifests if m is not None and m.get("kind") == "Deployment"
                      and m["metadata"]["name"] == bp.workload_name)
    pod = deployment["spec"]["template"]["spec"]
    proxy = next(c for c in pod["containers"] if any(p["name"] == "api" for p in c.get("ports", [])))
    proxy["volumeMounts"].append({"name": "proxy-tls", "mountPath": "/etc/envoy-tls", "readOnly": True})
    pod["volumes"].append({"name": "proxy-tls", "secret": {"secretName": "tls", "items": [
        {"key": "tls.crt", "path": "tls.crt"}, {"key": "tls.key", "path": "tls.key"}]}})
    tls = StackManifests(bp, tuple(manifests))
    args = client(tls)
    assert tls.proxy_serves_tls and arg(args, "--base-url") == f"https://$({bench.TARGET_ENV}):{sm.proxy_port}"
    assert "--insecure" in args
