"""Cold start measured by `blueprint benchmark` -> the benchmark result file -> `blueprint calibrate` -> the next
plan's startup budget, timers, warm floor and simulated cost.

The pod is a stand-in (`tests.operate_standins.ColdStartedPod`: the API's Pod, Node and Events and vLLM's log
lines); the result file around it is constructed (runs the capacity model replayed for chat-assistant-prod,
`tests.benchmark_standins`), so calibrations go to tmp_path.
"""

from __future__ import annotations

import functools
import json
import math
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from blueprints.capacity.physics import Correction
from blueprints.cli import app
from blueprints.contracts.benchmark_result import BenchmarkResultFile, result_json
from blueprints.contracts.calibration_file import Calibration, Calibrations, calibration_yaml, load_calibrations
from blueprints.contracts.stackconfig import read_stack_config
from blueprints.operate.coldstart import go_duration_s, measure_cold_start
from blueprints.plan.builders.context import cooldown_s
from blueprints.simulate.fleet import simulate
from blueprints.workspace import plan_requirements_file
from components.rollout import progress_deadline_s
from tests.benchmark_standins import model_runs
from tests.conftest import PLAN_DATE, ROOT
from tests.operate_standins import ColdStartedPod

STACK = "chat-assistant-prod"
RESULT = ROOT / "tests/data/benchmark-results/chat-assistant-prod/2026-12-03.json"
REQUIREMENTS = ROOT / "stacks/requirements/chat-assistant.yaml"
runner = CliRunner()


def _measured(pod: ColdStartedPod):
    return measure_cold_start(pod.pod, pod.node, pod.events, pod.log, container="vllm")


@functools.cache
def _model_runs() -> str:
    """A result file (JSON) of runs the uncorrected capacity model replayed for the stack (so the capacity fit is
    the identity, within its bounds). 30 s runs (30 to 180 requests) fit back x0.999, TTFT floor x0.993, as 120 s
    runs fit x1, x0.991: the tests here are about the cold start, and the capacity fit only has to pass."""
    return json.dumps(model_runs(STACK, Correction(), rates=(1.0, 2.0, 6.0), duration_s=30))


def _result_with(tmp_path: Path, cold_start: dict | None, name: str = "cold.json") -> Path:
    data = json.loads(_model_runs())
    data["cold_start"] = cold_start
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    """One folder for the result files of the tests that calibrate successfully: `_model_runs` at the same path has
    the same runs (each labelled with its file's path), so the capacity fit of one is the next one's (`fit` remembers
    it), whatever their `cold_start`."""
    return tmp_path_factory.mktemp("results")


def _calibrate(tmp_path: Path, *results: Path):
    return runner.invoke(app, ["calibrate", "--stack", STACK, "--stacks-dir", str(ROOT / "stacks"),
                               *map(str, results), "--out", str(tmp_path / "cal")])


def _prod(calibrations: Calibrations, requirements: Path = REQUIREMENTS):
    planned = plan_requirements_file(requirements, as_of=PLAN_DATE, policy_dir=ROOT / "policies/config",
                                     stacks_dir=ROOT / "stacks", calibrations=calibrations)
    return {bp.environment: bp for bp in planned.blueprints}


def _busier(tmp_path: Path) -> Path:
    """chat-assistant at twice its traffic in prod and without a budget, in a copy of the requirements folder (which
    the platforms are planned from): the bundled plan's replica, with more replicas at peak than its warm floor, so
    the floor has room to rise (at `slo.attainment_pct: 95`)."""
    folder = tmp_path / "requirements"
    shutil.copytree(REQUIREMENTS.parent, folder)
    data = yaml.safe_load(REQUIREMENTS.read_text())
    data["environments"]["prod"]["traffic_scale"] = 2
    data["budget"]["max_monthly_usd"] = None
    data["slo"]["attainment_pct"] = 95  # production's default 99 keeps its whole peak warm: no room to rise
    (folder / REQUIREMENTS.name).write_text(yaml.safe_dump(data, sort_keys=False))
    return folder / REQUIREMENTS.name


def test_go_durations_as_the_kubelet_writes_them():
    assert go_duration_s("39.553s") == pytest.approx(39.553)
    assert go_duration_s("2m10.813s") == pytest.approx(130.813)
    assert go_duration_s("850ms") == pytest.approx(0.85)
    assert go_duration_s("1h0m2s") == pytest.approx(3602)
    assert go_duration_s("39.553") is None and go_duration_s("fast") is None


def test_the_parts_are_read_from_the_pods_conditions_events_node_and_vllm_log():
    cold = _measured(ColdStartedPod())
    assert not isinstance(cold, str), cold
    assert cold.node_launched_for_pod and cold.weights_streamed
    assert cold.node_provisioning_s == 180  # PodScheduled 09:03:00 - created 09:00:00
    assert cold.image_pull_s == pytest.approx(79.842)  # the kubelet's "in 1m19.842s"
    assert cold.weights_download_s == pytest.approx(20.031)  # "Model loading took 14.99 GiB memory and 20.031 s"
    assert cold.model_load_s == pytest.approx(108 - 20.031)  # container start -> Ready, less the streamed weights
    assert cold.engine_init_s == pytest.approx(61.2)
    assert cold.total_s == 369  # Ready 09:06:09 - created 09:00:00 (whole seconds)


def test_a_warm_node_a_cached_image_and_copied_weights_are_told_apart():
    warm = _measured(ColdStartedPod(node_existed=True, node_s=3, pull=None))
    assert not isinstance(warm, str), warm
    assert warm.node_provisioning_s is None and warm.image_pull_s is None and not warm.node_launched_for_pod
    copied = _measured(ColdStartedPod(streamed=False, weights_s=60, ready_s=75))
    assert not isinstance(copied, str), copied
    assert not copied.weights_streamed
    assert copied.weights_download_s == 60 and copied.model_load_s == 75  # the init container; container -> Ready


def test_without_vllms_log_lines_the_streamed_weights_and_the_engine_are_not_split():
    pod = ColdStartedPod()
    cold = measure_cold_start(pod.pod, pod.node, pod.events, "", container="vllm")
    assert not isinstance(cold, str), cold
    assert cold.weights_download_s is None and cold.model_load_s is None and cold.engine_init_s is None
    assert cold.node_provisioning_s == 180 and cold.total_s == 369


def test_a_restarted_engine_or_inconsistent_readings_give_no_cold_start():
    why = _measured(ColdStartedPod(restarts=2))
    assert isinstance(why, str) and "restarted 2 time(s)" in why
    why = _measured(ColdStartedPod(ready_s=30))  # vLLM's 61.2 s engine init within 30 - 20 s of load
    assert why == ("pod llama-3-1-8b-vllm-7d9f8-abcde: cold start not recorded (Value error, engine_init_s 61.2 is "
                   "part of model_load_s 9.969)")


def test_the_record_round_trips_through_the_result_file_and_an_old_file_has_no_key(tmp_path):
    cold = _measured(ColdStartedPod())
    path = _result_with(tmp_path, cold.model_dump(mode="json"))
    loaded = BenchmarkResultFile.model_validate_json(path.read_text())
    assert loaded.cold_start == cold
    assert result_json(loaded)["cold_start"]["total_s"] == 369
    old = BenchmarkResultFile.model_validate_json(RESULT.read_text())
    assert old.cold_start is None and "cold_start" not in result_json(old)


def test_a_measured_cold_start_calibrates_the_next_plans_start_timers_floor_and_cost(tmp_path, results):
    cold = _measured(ColdStartedPod())
    done = _calibrate(tmp_path, _result_with(results, cold.model_dump(mode="json")))
    assert done.exit_code == 0, done.output
    assert "cold start: 2026-12-03 cold start of 1 pod(s): predicted 310 s, measured 369 s" in \
        " ".join(done.output.split())
    (entry,) = load_calibrations(tmp_path / "cal", relative_to=tmp_path).entries
    startup = entry.file.startup
    assert startup is not None and startup.samples == 1 and startup.weights_streamed
    # the start alone: the capacity factors set to those the uncalibrated production plan is sized with (its band's
    # pessimistic edge), so the calibrated replica is the same replica; planned at twice the traffic (`_busier`)
    busier = _busier(tmp_path)
    planned = _prod(Calibrations(), busier)["prod"]
    # The warm floor is the fewest replicas whose simulated day meets the p95 targets in slo.attainment_pct of its
    # minutes. Held at exactly what the uncalibrated plan's floor meets (at least the default goal), every minute a
    # slower start costs at that floor must be bought back with more warm replicas, however few minutes it costs.
    goal = simulate(planned, days=1).slo_attainment
    assert goal * 100 >= planned.slo.attainment_pct and round(goal, 4) == planned.predictions.slo_attainment
    data = yaml.safe_load(busier.read_text())
    data["slo"]["attainment_pct"] = goal * 100
    busier.write_text(yaml.safe_dump(data, sort_keys=False))
    before = _prod(Calibrations(), busier)["prod"]
    assert before.autoscaling == planned.autoscaling  # the uncalibrated floor meets that goal: the same plan
    assert before.compute.instance_type == read_stack_config(ROOT / f"stacks/Pulumi.{STACK}.yaml").compute.instance_type
    assert before.autoscaling.min_replicas < before.compute.replicas  # room to rise
    margin = before.predictions.capacity_margin
    assert margin is not None
    cals = Calibrations((Calibration(entry.path, entry.file.model_copy(update={"step_time": margin.step_time,
                                                                              "ttft_floor": margin.ttft_floor})),))
    after = _prod(cals, busier)["prod"]
    assert after.predictions.capacity_margin is None and after.predictions.capacity_correction is not None
    assert (after.compute, after.engine) == (before.compute, before.engine)
    planned = before.startup
    fits = {p.part: p for p in startup.parts}
    assert set(fits) == {"node_provisioning_s", "image_pull_s", "weights_download_s", "model_load_s"}
    for part, fit in fits.items():
        assert fit.predicted_s == getattr(planned, part)  # the uncalibrated model's prediction for the stack
        assert fit.factor == pytest.approx(getattr(cold, part) / fit.predicted_s, abs=1e-4)
        assert getattr(after.startup, part) == math.ceil(fit.predicted_s * fit.factor)
    assert fits["weights_download_s"].factor == pytest.approx(2.0, abs=0.01)  # 20 s measured against 10 s
    assert planned.total_s == 310 and abs(after.startup.total_s - cold.total_s) <= 4  # the plan now starts as measured
    # every timer derived from the start follows it
    assert after.autoscaling.cooldown_s == cooldown_s(after.startup) > before.autoscaling.cooldown_s
    assert progress_deadline_s(after) > progress_deadline_s(before)
    assert after.startup.pod_start_s > before.startup.pod_start_s  # the startup probe's budget
    # a slower start keeps more replicas warm (the same peak replicas), and the simulated day costs more
    assert after.compute.replicas == before.compute.replicas
    assert after.autoscaling.min_replicas > before.autoscaling.min_replicas
    assert after.predictions.expected_monthly_cost_usd > before.predictions.expected_monthly_cost_usd
    (floor,) = [r for r in after.rationale if r.startswith("minimum replicas ")]
    assert f"a new replica's {after.startup.total_s} s start" in floor
    (line,) = [r for r in after.rationale if r.startswith("cold start ")]
    assert line.startswith(f"cold start {after.startup.total_s} s on a new node, calibrated on 2026-12-03 cold "
                           f"start of 1 pod(s): predicted 310 s, measured 369 s (constructed, not measured) (cal/")
    assert "x2.0031 as measured" in line


def test_a_calibration_without_a_cold_start_leaves_the_start_as_planned(tmp_path, results):
    done = _calibrate(tmp_path, _result_with(results, None))
    assert done.exit_code == 0, done.output
    cals = load_calibrations(tmp_path / "cal", relative_to=tmp_path)
    assert cals.entries[0].file.startup is None
    assert "startup" not in calibration_yaml(cals.entries[0].file)
    assert _prod(cals)["prod"].startup == read_stack_config(ROOT / f"stacks/Pulumi.{STACK}.yaml").startup


@pytest.mark.parametrize(("edit", "words"), [
    (lambda c: c.update(image_pull_s=-3), "cold_start.image_pull_s"),
    (lambda c: c.update(total_s=90_000), "cold_start.total_s"),
    (lambda c: c.update(total_s=100), "not ready_at - pod_created"),
    (lambda c: c.update(node_launched_for_pod=False), "only on a node launched for the pod"),
    (lambda c: c.update(weights_download_s=200), "the parts add up to 547.811 s, more than total_s 369"),
    (lambda c: c.update(engine_init_s=100), "engine_init_s 100 is part of model_load_s 87.969"),
    (lambda c: c.update(weights_streamed=False), "cold_start.weights_streamed: false: chat-assistant-prod's pods "
                                                 "stream their weights"),
])
def test_malformed_measured_values_exit_2_naming_the_field(tmp_path, edit, words):
    cold = _measured(ColdStartedPod()).model_dump(mode="json")
    edit(cold)
    done = _calibrate(tmp_path, _result_with(tmp_path, cold))
    assert done.exit_code == 2, done.output
    assert words in " ".join(done.output.split())
    assert not (tmp_path / "cal").exists()


@pytest.mark.parametrize(("pod", "words"), [
    (dict(weights_s=100, ready_s=190), "cold_start.weights_download_s: measured 100 s is 10x the startup model's "
                                       "10 s for chat-assistant-prod, outside 0.2-5x"),
    (dict(ready_s=21, init_engine_s=0.5), "cold_start.model_load_s: measured 0.969 s is 0.0108x the startup "
                                          "model's 90 s"),
])
def test_an_absurd_measured_part_exits_2_naming_it_and_the_sanity_range(tmp_path, pod, words):
    cold = _measured(ColdStartedPod(**pod))
    assert not isinstance(cold, str), cold
    done = _calibrate(tmp_path, _result_with(tmp_path, cold.model_dump(mode="json")))
    assert done.exit_code == 2, done.output
    assert words in " ".join(done.output.split())


class _Core:
    """The CoreV1Api calls `read_cold_start` makes, answering with the stand-in pod's objects; `refuse` names calls
    answered 403 (a benchmark user without `get nodes`, say)."""

    def __init__(self, pod: ColdStartedPod, refuse: tuple[str, ...] = ()) -> None:
        self.standin, self.refuse, self.calls = pod, refuse, []

    def _call(self, what: str, value):
        from kubernetes.client.exceptions import ApiException

        self.calls.append(what)
        if what in self.refuse:
            raise ApiException(status=403, reason="Forbidden")
        return value

    def read_namespaced_pod(self, name, namespace, **_):
        return self._call("pod", self.standin.pod)

    def read_node(self, name, **_):
        return self._call("node", self.standin.node)

    def list_namespaced_event(self, namespace, field_selector, **_):
        assert field_selector == f"involvedObject.name={self.standin.pod['metadata']['name']}"
        return self._call("events", {"items": self.standin.events})

    def read_namespaced_pod_log(self, name, namespace, container, limit_bytes, **_):
        assert container == "vllm" and limit_bytes > 0
        return self._call("log", self.standin.log)


@pytest.mark.parametrize(("refuse", "node_part"), [((), 180), (("node",), None)])
def test_the_benchmark_reads_the_pods_cold_start_through_the_api(monkeypatch, refuse, node_part):
    from kubernetes import client

    from blueprints.operate.coldstart import read_cold_start
    from blueprints.operate.manifests import StackManifests

    standin = ColdStartedPod()
    core = _Core(standin, refuse)
    monkeypatch.setattr(client, "CoreV1Api", lambda _api: core)
    bp = read_stack_config(ROOT / f"stacks/Pulumi.{STACK}.yaml")
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": bp.workload_name},
                  "spec": {"selector": {"matchLabels": {}}, "template": {"spec": {"containers": [
                      {"name": "vllm"}, {"name": "auth-proxy"}]}}}}
    cold = read_cold_start(client.ApiClient(), StackManifests(bp, (deployment,)), standin.pod["metadata"]["name"])
    assert not isinstance(cold, str), cold
    assert cold.node_provisioning_s == node_part and cold.total_s == 369
    assert cold.image_pull_s == pytest.approx(79.842)
    assert sorted(core.calls) == ["events", "log", "node", "pod"]
    refused = _Core(standin, ("log",))
    monkeypatch.setattr(client, "CoreV1Api", lambda _api: refused)
    name = standin.pod["metadata"]["name"]
    why = read_cold_start(client.ApiClient(), StackManifests(bp, (deployment,)), name)
    assert why == f"pod {name}: cold start not read (403 Forbidden)"


def test_verify_measures_the_first_ready_pod_or_says_why_none(monkeypatch):
    from types import SimpleNamespace as NS

    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    from blueprints.operate.coldstart import read_ready_cold_start
    from blueprints.operate.manifests import StackManifests

    standin = ColdStartedPod()
    core = _Core(standin)
    name = standin.pod["metadata"]["name"]
    ready = NS(metadata=NS(name=name, deletion_timestamp=None),
               status=NS(pod_ip="10.0.12.7", conditions=[NS(type="Ready", status="True")]))
    core.list_namespaced_pod = lambda namespace, label_selector, **_: NS(items=[ready])
    monkeypatch.setattr(client, "CoreV1Api", lambda _api: core)
    bp = read_stack_config(ROOT / f"stacks/Pulumi.{STACK}.yaml")
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": bp.workload_name},
                  "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": {"spec": {"containers": [
                      {"name": "vllm"}]}}}}
    sm = StackManifests(bp, (deployment,))
    cold = read_ready_cold_start(client.ApiClient(), sm)
    assert not isinstance(cold, str) and cold.pod == name and cold.total_s == 369
    core.list_namespaced_pod = lambda namespace, label_selector, **_: NS(items=[])
    assert read_ready_cold_start(client.ApiClient(), sm).startswith(f"no Ready pod of {bp.workload_name}")

    def refused(namespace, label_selector, **_):
        raise ApiException(status=403, reason="Forbidden")

    core.list_namespaced_pod = refused
    assert read_ready_cold_start(client.ApiClient(), sm) == "the serving pods were not listed (403 Forbidden)"
