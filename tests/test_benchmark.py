"""`blueprint benchmark`: the sweep's settings from the plan, the Job it runs (printed by `--dry-run` without a
cluster), its bounds, and the results it collects."""

from __future__ import annotations

import json
import math
import re

import pytest
import yaml
from typer.testing import CliRunner

from blueprints.cli import app
from blueprints.contracts.stackconfig import read_stack_config
from blueprints.core.errors import BenchmarkError
from blueprints.operate import benchmark as bench
from blueprints.operate import workload
from blueprints.operate.jobs import parse_runs
from blueprints.contracts.benchmark_result import load_result, result_json
from blueprints.review.deployability.pod_security import pod_security_violations
from blueprints.review.manifests import validate_manifest
from tests.conftest import ROOT
from tests.test_verify import bare_env, no_credentials_env  # noqa: F401 (fixture)

STACK = "chat-assistant-prod"
RECORDED = ROOT / "tests" / "data" / "benchmark-results" / STACK / "2026-12-03.json"


def _per_replica_peak() -> float:
    """The stack's planned per-replica peak, requests/s: its peak over its planned replicas."""
    bp = read_stack_config(ROOT / "stacks" / f"Pulumi.{STACK}.yaml")
    return bp.model.traffic.peak_requests_per_s / bp.compute.replicas


PER_REPLICA_PEAK = _per_replica_peak()
#: Three rates within the `--rates` bound (10x the planned per-replica peak), halves so that a rate x 1800 s is a
#: whole number of requests, and what they send at 1800 s each (each run sends its rate x its duration).
TOO_MANY_RATES = [math.floor(20 * PER_REPLICA_PEAK) / 2 - 0.5 * i for i in range(3)]
TOO_MANY_REQUESTS = sum(int(rate * 1800) for rate in TOO_MANY_RATES)


@pytest.fixture(scope="module")
def dry_run(benchmark_dry_run) -> list[dict]:
    assert "6 run(s) of 120 s" in benchmark_dry_run.stderr
    return list(yaml.safe_load_all(benchmark_dry_run.stdout))


def arg(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


def test_dry_run_prints_a_job_whose_client_runs_at_the_planned_lengths_and_rates_with_the_pinned_image(dry_run):
    bp = read_stack_config(ROOT / "stacks" / f"Pulumi.{STACK}.yaml")
    job = dry_run[-1]
    assert job["kind"] == "Job" and job["metadata"]["namespace"] == bp.platform.namespace
    pod = job["spec"]["template"]["spec"]
    runs = [c for c in pod["initContainers"] if c["name"].startswith("rate-")]
    peak = bp.model.traffic.peak_requests_per_s / bp.compute.replicas  # 20 requests/s over the planned replicas
    assert [float(arg(c["args"], "--request-rate")) for c in runs] == [
        float(f"{f * peak:.3g}") for f in (0.25, 0.5, 0.75, 1.0, 1.25, 1.5)]
    assert max(float(arg(c["args"], "--request-rate")) for c in runs) > peak  # up to and past the peak
    for c in runs:
        assert c["image"] == bp.engine.image  # the image the stack pins, a version tag
        assert re.fullmatch(r"vllm/vllm-openai:v\d+\.\d+\.\d+", c["image"])
        assert c["command"] == ["vllm", "bench", "serve"]
        args = c["args"]
        assert arg(args, "--dataset-name") == "random"
        assert arg(args, "--random-input-len") == str(bp.model.traffic.mean_input_tokens) == "1200"
        assert arg(args, "--random-output-len") == str(bp.model.traffic.mean_output_tokens) == "300"
        assert arg(args, "--random-range-ratio") == "0.9"  # the planned p95 (2x the mean), capped
        assert arg(args, "--goodput") == "ttft:1500" and args[args.index("--goodput") + 2] == "tpot:50"
        assert arg(args, "--max-concurrency") == str(2 * bp.engine.max_num_seqs)
        assert int(arg(args, "--num-prompts")) == math.ceil(float(arg(args, "--request-rate")) * 120)
        assert arg(args, "--base-url") == f"http://$({bench.TARGET_ENV}):8080"
        assert {e["name"]: e.get("valueFrom") for e in c["env"]}["OPENAI_API_KEY"] == {
            "secretKeyRef": {"name": "chat-assistant-api-key", "key": "api-key"}}
    assert sum(int(arg(c["args"], "--num-prompts")) for c in runs) <= bench.MAX_TOTAL_REQUESTS


def test_the_job_is_bounded_hardened_and_placed_on_the_system_nodes(dry_run):
    job = dry_run[-1]
    spec = job["spec"]
    pod = spec["template"]["spec"]
    assert spec["backoffLimit"] == 0 and spec["ttlSecondsAfterFinished"] == bench.JOB_TTL_S
    assert 0 < spec["activeDeadlineSeconds"] <= 150 + bench.TOKENIZER_FETCH_S + 6 * (2 * 120 + bench.PER_RUN_OVERHEAD_S)
    assert pod["nodeSelector"] == {"servingblueprints.io/pool": "system"}
    assert "tolerations" not in pod  # system nodes carry no taint
    assert pod["serviceAccountName"] == "chat-assistant-vllm"  # Pod Identity: read of the model prefix
    assert pod_security_violations(pod, "restricted") == []
    for container in [*pod["initContainers"], *pod["containers"]]:
        context = container["securityContext"]
        assert context["runAsNonRoot"] and context["readOnlyRootFilesystem"] and context["runAsUser"] != 0
    for obj in dry_run:
        assert validate_manifest(obj, kubernetes_version="1.35") == [], obj["kind"]


def test_the_tokenizer_comes_from_the_model_store_without_the_weights(dry_run):
    fetch = dry_run[-1]["spec"]["template"]["spec"]["initContainers"][0]
    assert fetch["name"] == "fetch-tokenizer" and fetch["command"] == ["aws"]
    args = fetch["args"]
    assert args[:4] == ["s3", "cp", args[2], bench.TOKENIZER_DIR] and args[2].endswith("/models/llama-3-1-8b/")
    assert args[args.index("--exclude") + 1] == "*"
    assert args[-2:] == ["--exclude", "*.gguf"] and ["--exclude", "*.safetensors"] == args[-10:-8]


def test_network_policies_admit_the_benchmark_pod_to_the_serving_proxy_only(dry_run):
    egress, ingress = dry_run[0], dry_run[1]
    assert egress["kind"] == ingress["kind"] == "NetworkPolicy"
    serving = {"app.kubernetes.io/component": "server", "app.kubernetes.io/instance": STACK,
               "app.kubernetes.io/name": "vllm"}
    assert egress["spec"]["egress"][-1] == {"to": [{"podSelector": {"matchLabels": serving}}],
                                            "ports": [{"protocol": "TCP", "port": 8080}]}
    assert egress["spec"]["ingress"] == []
    assert ingress["spec"]["podSelector"] == {"matchLabels": serving}
    assert ingress["spec"]["ingress"][0]["ports"] == [{"protocol": "TCP", "port": 8080}]
    assert ingress["spec"]["ingress"][0]["from"][0]["podSelector"]["matchLabels"] == \
        egress["spec"]["podSelector"]["matchLabels"]


def test_the_dry_run_yaml_has_no_anchors(bare_env):
    result = CliRunner().invoke(app, ["benchmark", STACK, "--dry-run", "--rates", "1,4", "--duration", "30"])
    assert result.exit_code == 0, result.output
    assert "&id" not in result.stdout and "*id" not in result.stdout
    job = list(yaml.safe_load_all(result.stdout))[-1]
    assert [arg(c["args"], "--num-prompts") for c in job["spec"]["template"]["spec"]["initContainers"][1:]] == \
        ["30", "120"]


@pytest.mark.parametrize(("flags", "message"), [
    (["--rates", "0"], "--rates 0: rates are requests/s at one replica, > 0"),
    (["--rates", "100"], f"at most {10 * PER_REPLICA_PEAK:.3g} (10x the planned per-replica peak "
                         f"{PER_REPLICA_PEAK:.3g})"),
    (["--rates", "a,b"], "--rates 'a,b': give requests/s per replica"),
    (["--rates", ",".join(["1"] * 13)], "--rates: give 1-12 request rates, got 13"),
    (["--duration", "5"], "--duration 5: each rate runs 10-1800 s"),
    (["--rates", ",".join(f"{r:g}" for r in TOO_MANY_RATES), "--duration", "1800"],
     f"would send {TOO_MANY_REQUESTS:,} requests, more than 50,000"),
])
def test_out_of_bounds_flags_exit_2_naming_the_flag(bare_env, flags, message):
    result = CliRunner().invoke(app, ["benchmark", STACK, "--dry-run", *flags])
    assert result.exit_code == 2, result.output
    assert message in result.stderr and "Traceback" not in result.output


def test_a_stack_that_serves_no_text_generation_exits_2(bare_env):
    result = CliRunner().invoke(app, ["benchmark", "search-relevance-prod", "--dry-run"])
    assert result.exit_code == 2
    assert "drives text generation" in result.stderr


def test_a_sagemaker_dry_run_prints_the_client_behind_the_signing_proxy(bare_env):
    result = CliRunner().invoke(app, ["benchmark", "prototype-summarizer-pilot", "--dry-run"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 6 and "signing proxy" in result.stderr
    args = lines[0].split()
    assert args[:3] == ["docker", "run", "--rm"] and "--read-only" in args and "--user" in args
    assert arg(args, "--backend") == "openai-chat" and arg(args, "--endpoint") == "/v1/chat/completions"
    assert arg(args, "--base-url") == "http://127.0.0.1:<proxy-port>"
    assert arg(args, "--random-input-len") == "3000" and arg(args, "--goodput") == "ttft:4000"


def test_range_ratio_matches_the_planned_p95_and_fits_the_context():
    assert workload.range_ratio(1000, 1450, other_mean=100, max_model_len=None) == (0.5, [])
    ratio, notes = workload.range_ratio(1000, None, other_mean=100, max_model_len=None)  # p95 2x the mean
    assert ratio == workload.MAX_RANGE_RATIO and "longer tail" in notes[0]
    ratio, notes = workload.range_ratio(3000, 4000, other_mean=1000, max_model_len=5000)
    assert ratio == 0.25 and "max_model_len 5000" in notes[0]
    assert workload.range_ratio(1000, 1000, other_mean=10, max_model_len=None) == (0.0, [])
    # the prefix comes on top of the longest draw: 500 + (1000 + 100) x 1.36 <= 2000
    ratio, notes = workload.range_ratio(1000, 1450, other_mean=100, max_model_len=2000, prefix_len=500)
    assert ratio == 0.36 and "max_model_len 2000" in notes[0]


def _with_traffic(stack: str, **traffic) -> object:
    """A stack config with its model's traffic (and the engine's max_model_len, `max_model_len=`) edited."""
    bp = read_stack_config(ROOT / "stacks" / f"Pulumi.{stack}.yaml")
    engine = {"max_model_len": traffic.pop("max_model_len")} if "max_model_len" in traffic else {}
    model = bp.model.model_copy(update={"traffic": bp.model.traffic.model_copy(update=traffic)})
    return bp.model_copy(update={"models": [model], "engine": bp.engine.model_copy(update=engine)})


def test_a_shared_prefix_is_sent_as_the_random_datasets_prefix_and_the_mean_prompt_stays_as_planned(bare_env):
    result = CliRunner().invoke(app, ["benchmark", "rag-assistant-generator-dev", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "prompts of a shared 640-token prefix + 1960 tokens and outputs of 350 (means, range ratio 0.9)" in \
        " ".join(result.stderr.split())
    job = list(yaml.safe_load_all(result.stdout))[-1]
    for c in job["spec"]["template"]["spec"]["initContainers"][1:]:
        # traffic.shared_prefix_tokens 640 (40 whole KV blocks) of the 2,600-token mean prompt: --random-input-len
        # excludes the prefix at v0.24.0, so prefix + random part is the planned mean prompt
        assert arg(c["args"], "--random-prefix-len") == "640" and arg(c["args"], "--random-input-len") == "1960"
    w = workload.planned_workload(read_stack_config(ROOT / "stacks/Pulumi.rag-assistant-generator-dev.yaml"))
    assert (w.prefix_len, w.input_len, w.prompt_len, w.approximations) == (640, 1960, 2600, ())


def test_a_stack_without_prompt_reuse_sends_no_prefix(dry_run):
    for c in dry_run[-1]["spec"]["template"]["spec"]["initContainers"][1:]:
        assert arg(c["args"], "--random-prefix-len") == "0"


def test_sessions_are_sent_as_their_cached_history_in_the_prefix():
    # 48k of a 64k mean prompt cached, as the planner sizes one replica: an 8,000-token shared prefix and 8-turn
    # conversations of 500-token answers, each turn resending its history (blueprints.requirements.reuse)
    bp = _with_traffic("rag-assistant-generator-prod", mean_input_tokens=64_000, mean_output_tokens=500,
                       shared_prefix_tokens=8_000, session_turns=8, max_model_len=131_072)
    new = (2 * (64_000 - 8_000) - 7 * 500) / 9  # u, a turn's new message: 12,055.6 tokens
    history = 64_000 - 8_000 - new  # 43,944.4 tokens resent per request on average
    cached = int((8_000 + history) // 16) * 16  # whole KV blocks: 51,936
    assert bp.router is not None  # routed: every turn finds its history, on the replica measured too
    w = bench.benchmark_settings(bp).workload
    assert (w.prefix_len, w.input_len, w.prompt_len) == (cached, 64_000 - cached, 64_000) == (51_936, 12_064, 64_000)
    assert w.approximations == ()
    args = bench.client_args(bench.benchmark_settings(bp), 0, base_url="http://x", backend="openai",
                             endpoint="/v1/completions", model=bp.model.name)
    assert arg(args, "--random-prefix-len") == "51936" and arg(args, "--random-input-len") == "12064"


def test_sessions_without_the_router_over_several_replicas_are_refused_unless_approximate(tmp_path, bare_env):
    bp = _with_traffic("rag-assistant-generator-dev", session_turns=4)
    assert bp.router is None and bp.autoscaling.max_replicas == 2  # scale to zero: no router in front
    with pytest.raises(BenchmarkError) as refused:
        bench.benchmark_settings(bp)
    assert "model.traffic.session_turns=4: conversations over up to 2 replicas without the router find their " \
           "history cached on the replica a turn reaches 1/2 of the time" in str(refused.value)
    assert "pass --approximate-workload" in str(refused.value)
    settings = bench.benchmark_settings(bp, approximate=True)
    assert settings.workload.prefix_len == 2016  # 640 shared + 1,386 history, whole blocks: what the plan sized
    record = bench.settings_record(settings, backend="openai", endpoint="/v1/completions")
    assert record.approximations == list(settings.workload.approximations) and len(record.approximations) == 1
    assert record.random_prefix_len == 2016
    # the CLI: exit 2, one line, no traceback
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    for path in (ROOT / "stacks").glob("*.yaml"):
        (stacks / path.name).write_text(path.read_text())
    config = stacks / "Pulumi.rag-assistant-generator-dev.yaml"
    config.write_text(config.read_text().replace("        shared_prefix_tokens: 640\n",
                                                 "        shared_prefix_tokens: 640\n        session_turns: 4\n"))
    result = CliRunner().invoke(app, ["benchmark", "rag-assistant-generator-dev", "--dry-run", "--stacks-dir",
                                      str(stacks)])
    assert result.exit_code == 2, result.output
    assert "BenchmarkError: rag-assistant-generator-dev: model.traffic.session_turns=4" in result.stderr
    assert "Traceback" not in result.output


def test_the_results_container_output_parses_into_the_runs():
    recorded = load_result(RECORDED)
    # `cat` of the files `json.dump` wrote: objects back to back, no newline between them
    printed = "".join(json.dumps(run) for run in result_json(recorded)["runs"])
    runs = parse_runs(printed, len(recorded.runs))
    assert [r.request_rate for r in runs] == recorded.settings.request_rates
    assert runs[3].percentile_ms("ttft", 95) == recorded.runs[3].percentile_ms("ttft", 95)
    with pytest.raises(BenchmarkError, match=r"printed 6 run\(s\), expected 7"):
        parse_runs(printed, 7)
    with pytest.raises(BenchmarkError, match="no JSON at character 0"):
        parse_runs("Error: file not found", 1)


class _Api:
    """Stand-ins of the kubernetes client's BatchV1Api, CoreV1Api and NetworkingV1Api (the calls run_job makes),
    recording them; the Job succeeds after `polls` reads of its status (or fails)."""

    def __init__(self, *, polls: int, succeed: bool) -> None:
        from types import SimpleNamespace as NS

        self.calls: list[tuple] = []
        self.polls, self.succeed, self.ns = polls, succeed, NS

    def read_namespaced_job_status(self, name, namespace, **_):
        self.calls.append(("status", name))
        self.polls -= 1
        done = self.polls <= 0
        return self.ns(status=self.ns(succeeded=1 if done and self.succeed else None,
                                      failed=1 if done and not self.succeed else None))

    def list_namespaced_pod(self, namespace, label_selector, **_):
        terminated = self.ns(exit_code=1, reason="Error")
        status = self.ns(phase="Failed", container_statuses=[],
                         init_container_statuses=[self.ns(name="rate-00", state=self.ns(
                             terminated=terminated, waiting=None, running=None))])
        return self.ns(items=[self.ns(metadata=self.ns(name="bench-pod"), status=status)])

    def read_namespaced_pod_log(self, name, namespace, container, **_):
        self.calls.append(("log", name, container))
        return '{"a": 1}'

    def delete_namespaced_job(self, name, namespace, **kw):
        self.calls.append(("delete", "Job", name, kw.get("propagation_policy")))

    def delete_namespaced_network_policy(self, name, namespace, **_):
        self.calls.append(("delete", "NetworkPolicy", name))


@pytest.fixture
def fake_kubernetes(monkeypatch, dry_run):
    from kubernetes import client, utils

    created: list[str] = []

    def install(api: _Api) -> list[str]:
        for cls in ("BatchV1Api", "CoreV1Api", "NetworkingV1Api"):
            monkeypatch.setattr(client, cls, lambda _api, a=api: a)
        monkeypatch.setattr(utils, "create_from_dict", lambda _api, obj, namespace: created.append(
            f"{obj['kind']}/{obj['metadata']['name']}"))
        return created

    return install


def test_run_job_creates_waits_reads_the_results_and_deletes_everything(dry_run, fake_kubernetes):
    from blueprints.operate.jobs import POLL_S, run_job

    api = _Api(polls=3, succeed=True)
    created = fake_kubernetes(api)
    slept: list[float] = []
    log = run_job(object(), dry_run, namespace="chat-assistant", log=lambda m: None, sleep=slept.append,
                  clock=lambda: 0.0)
    name = dry_run[-1]["metadata"]["name"]
    assert log == '{"a": 1}'
    assert created == [f"NetworkPolicy/{name}", f"NetworkPolicy/{name}-in", f"Job/{name}"]
    assert slept == [POLL_S, POLL_S]
    assert api.calls[-3:] == [("delete", "Job", name, "Background"), ("delete", "NetworkPolicy", f"{name}-in"),
                              ("delete", "NetworkPolicy", name)]
    assert ("log", "bench-pod", "results") in api.calls


def test_a_failed_job_names_each_runs_state_and_is_still_deleted(dry_run, fake_kubernetes):
    from blueprints.operate.jobs import run_job

    api = _Api(polls=1, succeed=False)
    fake_kubernetes(api)
    with pytest.raises(BenchmarkError, match=r"failed: rate-00 exited 1 \(Error\)"):
        run_job(object(), dry_run, namespace="chat-assistant", log=lambda m: None, sleep=lambda s: None,
                clock=lambda: 0.0)
    assert [c[1] for c in api.calls if c[0] == "delete"] == ["Job", "NetworkPolicy", "NetworkPolicy"]


def test_the_wait_gives_up_past_the_jobs_deadline(dry_run, fake_kubernetes):
    from blueprints.operate.jobs import WAIT_SLACK_S, run_job

    api = _Api(polls=10**9, succeed=True)  # never finishes
    fake_kubernetes(api)
    now = iter(range(0, 10**7, 600))
    with pytest.raises(BenchmarkError, match="failed"):
        run_job(object(), dry_run, namespace="chat-assistant", log=lambda m: None, sleep=lambda s: None,
                clock=lambda: float(next(now)))
    polls = sum(1 for c in api.calls if c[0] == "status")
    assert polls <= (dry_run[-1]["spec"]["activeDeadlineSeconds"] + WAIT_SLACK_S) // 600 + 2
