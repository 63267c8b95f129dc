"""`blueprint choose`: the pilots' measured results -> the cheapest finalist meeting the SLO, written into the
requirements (`choice:`, with each result's sha256) and kept by the next plan while its evidence holds; bad input
exits 2 naming the file and the field.

The results are constructed (`measured: false`), each built with the pilot's own planned settings
(`blueprint benchmark`'s `benchmark_settings` and `result_file`) and figures chosen so that the planner's first pick
(pilot 1, the cheapest predicted) loses on measured cost per 1M tokens: it meets the SLO only at the sweep's lowest
rate, while pilot 2 meets it up to the top rate.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import shutil

import pytest
import yaml
from typer.testing import CliRunner

from blueprints.cli import app
from blueprints.contracts.benchmark_result import VllmBenchRun, result_json
from blueprints.contracts.stackconfig import read_stack_config
from blueprints.operate import benchmark as bench
from blueprints.operate.run import BenchmarkRun, result_file
from blueprints.plan.platforms import standalone_platform_file
from blueprints.plan.stability import hardware_of
from blueprints.requirements.service import load_requirements
from tests.conftest import PLAN_DATE, ROOT
from tests.kept_apart import project_skeleton

runner = CliRunner()
SERVICE = "choose-chat"
HELD_BACK = ROOT / "tests" / "data" / "choose" / f"{SERVICE}.yaml"
#: Per pilot, how many of the sweep's rates (ascending) meet the SLO: pilot 1 (the planner's first pick) only the
#: lowest, pilots 2 and 3 all of them.
MEETS = {1: 1, 2: 6, 3: 6}
TODAY = dt.datetime.now(dt.timezone.utc).date()


def _runs(bp, meets: int, *, failed: int = 0) -> list[VllmBenchRun]:
    """The sweep `blueprint benchmark` would run on the pilot, each run's p95s within the SLO for the first `meets`
    rates and over it after; `failed` requests failed in the last run."""
    settings = bench.benchmark_settings(bp)
    w, slo = settings.workload, bp.slo
    runs = []
    for i, (rate, prompts) in enumerate(zip(settings.rates, settings.num_prompts)):
        within = i < meets
        ttft, itl = (0.4 * slo.ttft_p95_ms, 0.5 * slo.itl_p95_ms) if within else (2 * slo.ttft_p95_ms,
                                                                                1.5 * slo.itl_p95_ms)
        lost = failed if i == len(settings.rates) - 1 else 0
        done = prompts - lost
        runs.append(VllmBenchRun.model_validate({
            "date": f"{TODAY:%Y%m%d}-{10 + i:02d}0000", "endpoint_type": w.backend, "backend": w.backend,
            "label": "CONSTRUCTED", "model_id": w.model, "tokenizer_id": "/tokenizer", "num_prompts": prompts,
            "request_rate": rate, "burstiness": 1.0, "max_concurrency": settings.max_concurrency,
            "duration": prompts / rate, "completed": done, "failed": lost,
            "total_input_tokens": done * (w.prefix_len + w.input_len), "total_output_tokens": done * w.output_len,
            "request_throughput": done / (prompts / rate), "request_goodput": None,
            "output_throughput": done * w.output_len / (prompts / rate),
            "total_token_throughput": done * (w.prefix_len + w.input_len + w.output_len) / (prompts / rate),
            "max_output_tokens_per_s": 1000.0, "max_concurrent_requests": 10, "rtfx": 0.0,
            "median_ttft_ms": 0.5 * ttft, "median_itl_ms": 0.6 * itl,
            "p50_ttft_ms": 0.5 * ttft, "p95_ttft_ms": ttft, "p99_ttft_ms": 1.2 * ttft,
            "p50_itl_ms": 0.6 * itl, "p95_itl_ms": itl, "p99_itl_ms": 1.3 * itl}))
    return runs


def _result(root, stack: str, *, meets: int, failed: int = 0, date: dt.date = TODAY, name: str | None = None,
            edit=None):
    """Write a constructed result file of the pilot `stack` under the project's benchmarks/results/; its path."""
    bp = read_stack_config(root / "stacks" / f"Pulumi.{stack}.yaml")
    settings = bench.benchmark_settings(bp)
    w = settings.workload
    written = result_file(BenchmarkRun(bp, settings, [], []), _runs(bp, meets, failed=failed),
                          client_image=bp.engine.image, backend=w.backend, endpoint=w.endpoint,
                          address="none: constructed", date=date)
    data = result_json(written.model_copy(update={"measured": False}))
    data["note"] = "CONSTRUCTED, NOT MEASURED: tests/test_choose.py"
    if edit is not None:
        edit(data)
    path = root / "benchmarks" / "results" / stack / (name or f"{date.isoformat()}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


@pytest.fixture(scope="module")
def chosen(tmp_path_factory):
    """A project holding the held-back service alone: planned, piloted with three finalists, each pilot's
    constructed results written, then chosen: (root, requirements path, its text before, result paths, the choose
    result)."""
    root = tmp_path_factory.mktemp("choose")
    folder = project_skeleton(root)
    path = folder / f"{SERVICE}.yaml"
    shutil.copy(HELD_BACK, path)
    platform = standalone_platform_file(load_requirements(path))
    (folder / "platform.yaml").write_text(yaml.safe_dump(platform.model_dump(mode="json", exclude_defaults=True)))
    planned = runner.invoke(app, ["plan", str(path), "--as-of", PLAN_DATE.isoformat()])
    assert planned.exit_code == 0, planned.output
    piloted = runner.invoke(app, ["pilot", str(path), "--finalists", "3"])
    assert piloted.exit_code == 0, piloted.output
    results = {k: _result(root, f"{SERVICE}-pilot-{k}", meets=MEETS[k]) for k in (1, 2, 3)}
    before = path.read_text()
    result = runner.invoke(app, ["choose", SERVICE, *map(str, results.values()), "--requirements", str(path),
                                 "--out", str(root / "choice")])
    return root, path, before, results, result


def _pilot(root, k):
    return read_stack_config(root / "stacks" / f"Pulumi.{SERVICE}-pilot-{k}.yaml")


def test_choose_picks_the_measured_winner_over_the_planners_first_pick_and_writes_choice_with_sha256s(chosen):
    root, path, before, results, result = chosen
    assert result.exit_code == 0, result.output
    choice = load_requirements(path).choice
    assert choice is not None and choice.decided == TODAY and choice.environment == "prod"
    by_stack = {f.stack: f for f in choice.finalists}
    first, second = by_stack[f"{SERVICE}-pilot-1"], by_stack[f"{SERVICE}-pilot-2"]
    # the planner's first pick meets the SLO at its lowest rate only: a bigger fleet, a higher cost per 1M tokens
    assert first.verdict == "meets-slo" and second.verdict == "chosen"
    assert first.usd_per_million_tokens > second.usd_per_million_tokens
    assert first.replicas_at_peak > second.replicas_at_peak
    assert min((f for f in choice.finalists if f.monthly_usd is not None), key=lambda f: f.monthly_usd) is second
    winner = hardware_of(_pilot(root, 2).model_dump(mode="json"))
    assert (choice.candidate.instance_type, choice.candidate.engine, choice.candidate.tensor_parallel_size,
            choice.candidate.kv_cache_dtype) == (winner.instance_type, winner.engine, winner.tensor_parallel_size,
                                                 winner.kv_cache_dtype)
    # goodput: pilot 2's top rate (all within the SLO), pilot 1's lowest
    rates = {k: bench.benchmark_settings(_pilot(root, k)).rates for k in (1, 2)}
    assert second.goodput_rps_per_replica == pytest.approx(rates[2][-1], rel=1e-3)
    assert first.goodput_rps_per_replica == pytest.approx(rates[1][0], rel=1e-3)
    for k, f in ((1, first), (2, second)):
        [evidence] = f.results
        assert evidence.file == f"benchmarks/results/{SERVICE}-pilot-{k}/{TODAY.isoformat()}.json"
        assert evidence.sha256 == hashlib.sha256(results[k].read_bytes()).hexdigest()
        assert f.ttft_ms.p95 <= choice.basis.ttft_p95_ms and f.itl_ms.p95 <= choice.basis.itl_p95_ms
    # every byte but the appended `choice:` block is the file as it was
    after = path.read_text()
    assert after.startswith(before) and after[len(before):].startswith("choice:\n")
    assert "chose" in result.output and f"{SERVICE}-pilot-2" in result.output
    # constructed results are never fitted into the project's calibrations: said, nothing written
    assert "not calibrated" in result.output and not (root / "stacks" / "calibration").exists()


def test_choose_again_replaces_the_choice_block_and_keeps_every_other_byte(chosen, tmp_path):
    root, path, before, results, _ = chosen
    copy = tmp_path / "r.yaml"
    text = path.read_text()
    choice = load_requirements(path).choice
    from blueprints.requirements.choice import with_choice

    # a choice in the middle of the file, with comments around it: replaced in place
    middle = before.replace("slo:\n", text[len(before):] + "# the SLO\nslo:\n")
    copy.write_text(middle)
    later = choice.model_copy(update={"decided": choice.decided + dt.timedelta(days=1)})
    replaced = with_choice(middle, later)
    assert replaced.replace(with_choice("", later), "") == before.replace("slo:\n", "# the SLO\nslo:\n")
    assert yaml.safe_load(replaced)["choice"]["decided"] == later.decided.isoformat()


def test_the_next_plan_keeps_the_chosen_candidate_and_says_so(chosen):
    root, path, _, _, result = chosen
    assert result.exit_code == 0, result.output
    planned = runner.invoke(app, ["plan", str(path), "--as-of", PLAN_DATE.isoformat(), "--env", "prod"])
    assert planned.exit_code == 0, planned.output
    assert "choice re-opened" not in planned.output
    prod = read_stack_config(root / "stacks" / f"Pulumi.{SERVICE}-prod.yaml")
    winner = _pilot(root, 2)
    assert prod.compute.instance_type == winner.compute.instance_type
    assert prod.engine.kind == winner.engine.kind
    assert prod.engine.tensor_parallel_size == winner.engine.tensor_parallel_size
    assert prod.engine.kv_cache_dtype == winner.engine.kv_cache_dtype
    choice = load_requirements(path).choice
    assert any(r.startswith(f"chosen by measurement on {choice.decided}: ") for r in prod.rationale)


def test_a_measured_goodput_below_the_models_grows_the_kept_fleet_to_what_it_needs(chosen, tmp_path):
    """The plan gives no environment fewer replicas than the chosen candidate's measured goodput needs at its peak
    (shrinking goes through a calibration)."""
    from blueprints.requirements.choice import with_choice

    root, path, _, _, result = chosen
    assert result.exit_code == 0, result.output
    text = path.read_text()
    choice = load_requirements(path).choice
    slow = choice.model_copy(update={"finalists": [
        f.model_copy(update={"goodput_rps_per_replica": 1.0}) if f.verdict == "chosen" else f
        for f in choice.finalists]})
    try:
        path.write_text(with_choice(text, slow))
        planned = runner.invoke(app, ["plan", str(path), "--as-of", PLAN_DATE.isoformat(), "--env", "prod",
                                      "--out-dir", str(tmp_path)])
    finally:
        path.write_text(text)
    assert planned.exit_code == 0, planned.output
    prod = read_stack_config(tmp_path / f"Pulumi.{SERVICE}-prod.yaml")
    peak = load_requirements(path).traffic.peak_requests_per_s
    assert prod.compute.replicas == math.ceil(peak / 1.0) > load_requirements(path).choice.finalists[1].replicas_at_peak
    assert prod.compute.instance_type == _pilot(root, 2).compute.instance_type
    assert any("measured 1 requests/s per replica within the SLO needs 12 replica(s)" in r
               and "(sized on the measurement)" in r for r in prod.rationale)


# Each re-plans afresh (a plan of its own): `make test` changes one measured basis (slo) and one allowance (engines),
# `make test-slow` also the other of each (traffic, hardware).
@pytest.mark.parametrize("edit, field", [
    pytest.param(lambda d: d["traffic"].update(mean_input_tokens=1400), "traffic.mean_input_tokens",
                 marks=pytest.mark.slow),
    (lambda d: d["slo"].update(ttft_p95_ms=900), "slo.ttft_p95_ms"),
    (lambda d: d["operations"].update(engines=["sglang"]), "operations.engines"),
    pytest.param(lambda d: d["hardware"].update(allowed_instance_families=["g5", "g6", "p5"]),
                 "hardware.allowed_instance_families", marks=pytest.mark.slow),
])
def test_a_requirements_change_that_invalidates_the_evidence_reopens_the_choice_naming_the_field(chosen, tmp_path,
                                                                                                edit, field):
    root, path, _, _, result = chosen
    assert result.exit_code == 0, result.output
    text = path.read_text()
    data = yaml.safe_load(text)
    edit(data)
    try:
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        planned = runner.invoke(app, ["plan", str(path), "--as-of", PLAN_DATE.isoformat(), "--env", "prod",
                                      "--out-dir", str(tmp_path)])
    finally:
        path.write_text(text)
    assert planned.exit_code == 0, planned.output
    words = " ".join(planned.output.split())
    assert f"choice re-opened: {field}" in words
    prod = read_stack_config(tmp_path / f"Pulumi.{SERVICE}-prod.yaml")
    assert not any(r.startswith("chosen by measurement") for r in prod.rationale)


def test_a_looser_slo_keeps_the_choice(chosen, tmp_path):
    """What met the tighter target meets the looser one: the evidence still holds."""
    root, path, _, _, result = chosen
    assert result.exit_code == 0, result.output
    text = path.read_text()
    try:
        path.write_text(text.replace("ttft_p95_ms: 1500\n", "ttft_p95_ms: 2000\n", 1))
        planned = runner.invoke(app, ["plan", str(path), "--as-of", PLAN_DATE.isoformat(), "--env", "prod",
                                      "--out-dir", str(tmp_path)])
    finally:
        path.write_text(text)
    assert planned.exit_code == 0, planned.output
    assert "choice re-opened" not in planned.output
    prod = read_stack_config(tmp_path / f"Pulumi.{SERVICE}-prod.yaml")
    assert prod.compute.instance_type == _pilot(root, 2).compute.instance_type
    assert any(r.startswith("chosen by measurement") for r in prod.rationale)


def test_a_result_file_changed_or_gone_since_the_choice_reopens_it_naming_the_field(chosen, tmp_path):
    root, path, _, results, result = chosen
    assert result.exit_code == 0, result.output
    original = results[2].read_bytes()

    def plan():
        planned = runner.invoke(app, ["plan", str(path), "--as-of", PLAN_DATE.isoformat(), "--env", "prod",
                                      "--out-dir", str(tmp_path)])
        assert planned.exit_code == 0, planned.output
        return " ".join(planned.output.split())

    try:
        results[2].write_bytes(original + b" ")
        assert "choice re-opened: choice.finalists[1].results[0].sha256: " in plan()
        results[2].unlink()
        assert "choice re-opened: choice.finalists[1].results[0].file: " in plan()
    finally:
        results[2].write_bytes(original)


def test_a_candidate_an_environments_policy_no_longer_allows_reopens_the_choice(chosen, tmp_path):
    """prod's policy config drops the chosen instance family: the pinned plan is refused there, so the plan chooses
    as if there were no choice and says why."""
    root, path, _, _, result = chosen
    assert result.exit_code == 0, result.output
    copy = tmp_path / "project"
    shutil.copytree(root, copy)
    family = _pilot(root, 2).compute.instance_type.split(".")[0]
    policy = copy / "policies" / "config" / "prod.json"
    data = json.loads(policy.read_text())
    data["instance-types-allowed"]["allowedInstanceFamilies"].remove(family)
    policy.write_text(json.dumps(data))
    planned = runner.invoke(app, ["plan", str(copy / path.relative_to(root)), "--as-of", PLAN_DATE.isoformat(),
                                  "--env", "prod", "--out-dir", str(tmp_path / "out")])
    assert planned.exit_code == 0, planned.output
    words = " ".join(planned.output.split())
    assert "choice re-opened: environments.prod: the chosen candidate" in words
    prod = read_stack_config(tmp_path / "out" / f"Pulumi.{SERVICE}-prod.yaml")
    assert not prod.compute.instance_type.startswith(f"{family}.")


@pytest.mark.parametrize("edit, field", [
    (lambda c: c["candidate"].update(tensor_parallel_size=0), "choice.candidate.tensor_parallel_size"),
    (lambda c: c["candidate"].update(instance_type="g9.xlarge"), "choice.candidate.instance_type"),
    (lambda c: c["finalists"][1]["results"][0].update(sha256="abc"), "choice.finalists.1.results.0.sha256"),
    (lambda c: c["finalists"][0].update(verdict="chosen"), "choice"),
    # Dates no clock reached: found by hand-editing (kept silently while the evidence's files held).
    (lambda c: c.update(decided="2099-01-01"), "choice.decided"),
    (lambda c: c["finalists"][1]["results"][0].update(date=(TODAY + dt.timedelta(days=1)).isoformat()),
     "choice.finalists.1.results.0.date"),
])
def test_a_hand_edited_choice_that_breaks_its_model_is_refused_naming_the_field(chosen, tmp_path, edit, field):
    from blueprints.core.errors import RequirementsError

    _, path, _, _, result = chosen
    assert result.exit_code == 0, result.output
    data = yaml.safe_load(path.read_text())
    edit(data["choice"])
    bad = tmp_path / "r.yaml"
    bad.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(RequirementsError) as refused:
        load_requirements(bad)
    assert str(bad) in str(refused.value) and field in str(refused.value).replace("[", ".").replace("]", "")


def test_choose_out_writes_the_report_and_the_chart(chosen):
    root, _, _, results, result = chosen
    assert result.exit_code == 0, result.output
    md = (root / "choice" / "choice.md").read_text()
    assert f"**{SERVICE}-pilot-2**" in md and "| finalist |" in md and "choice.svg" in md
    for k in (1, 2, 3):
        assert hashlib.sha256(results[k].read_bytes()).hexdigest() in md
    png = (root / "choice" / "choice.png").read_bytes()
    svg = (root / "choice" / "choice.svg").read_text()
    assert png.startswith(b"\x89PNG") and "<svg" in svg and "USD per 1M tokens" in svg


def _choose(path, *files):
    return runner.invoke(app, ["choose", SERVICE, *map(str, files), "--requirements", str(path)])


def _refused(result, *words):
    text = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    for w in words:
        assert w in text, (w, text)


@pytest.mark.parametrize("edit, field", [
    (lambda d: d["settings"].update(random_input_len=d["settings"]["random_input_len"] + 100),
     "settings.random_input_len"),
    (lambda d: d["settings"].update(random_prefix_len=64), "settings.random_prefix_len"),
    (lambda d: d["target"].update(model="another-model"), "target.model"),
    (lambda d: d["target"].update(engine_image="vllm/vllm-openai:v0.0.1"), "target.engine_image"),
])
def test_a_result_of_another_workload_than_its_pilots_exits_2_naming_the_file_and_field(chosen, edit, field):
    root, path, _, results, _ = chosen
    text = path.read_text()
    bad = _result(root, f"{SERVICE}-pilot-3", meets=6, name="bad.json", edit=edit)
    _refused(_choose(path, results[1], results[2], bad), str(bad), field)
    assert path.read_text() == text


def _prompts(sha: str) -> dict:
    return {"file": "prompts.jsonl", "sha256": sha, "bytes": 900, "lines": 3, "prompt_chars_mean": 250.0,
            "prompt_chars_p50": 240.0, "prompt_chars_p95": 300.0, "max_tokens_mean": 100.0, "max_tokens_p50": 100.0,
            "max_tokens_p95": 120.0}


def _replayed(sha: str):
    return lambda d: d["settings"].update(dataset_name="custom", prompts=_prompts(sha))


def test_finalists_measured_on_different_requests_exit_2_naming_the_prompts(chosen):
    """One finalist on the user's prompts, another on the planned random workload (or another prompts file): not
    the same requests, so not compared."""
    root, path, _, results, _ = chosen
    text = path.read_text()
    replayed = _result(root, f"{SERVICE}-pilot-3", meets=6, name="prompts-a.json", edit=_replayed("a" * 64))
    _refused(_choose(path, results[1], replayed), str(replayed), "settings.prompts", "a" * 64,
             "the planned random workload")
    other = _result(root, f"{SERVICE}-pilot-2", meets=6, name="prompts-b.json", edit=_replayed("b" * 64))
    _refused(_choose(path, replayed, other), str(other), "settings.prompts", "b" * 64, "a" * 64)
    assert path.read_text() == text


def test_results_of_one_finalist_exit_2(chosen):
    root, path, _, results, _ = chosen
    other = _result(root, f"{SERVICE}-pilot-1", meets=2, name="again.json")
    _refused(_choose(path, results[1], other), str(results[1]), str(other), "stack", "at least two finalists")


def test_a_finalist_with_over_1_percent_failed_requests_is_reported_failed_and_nothing_is_chosen(chosen, tmp_path):
    root, path, _, results, _ = chosen
    text = path.read_text()
    bad = _result(root, f"{SERVICE}-pilot-3", meets=6, failed=40, name="failing.json")
    result = runner.invoke(app, ["choose", SERVICE, str(results[1]), str(results[2]), str(bad), "--requirements",
                                 str(path), "--out", str(tmp_path)])
    _refused(result, str(bad), "runs[5].failed", "reported as failed")
    # still reported: the finalist as failed, the others measured, nothing chosen
    md = (tmp_path / "choice.md").read_text()
    assert f"| {SERVICE}-pilot-3 | " in md and " | failed | " in md and "| chosen |" not in md
    assert md.startswith(f"# Choice for {SERVICE}\n\nNothing chosen: ")
    assert path.read_text() == text


def test_a_result_older_than_its_pilot_exits_2(chosen):
    root, path, _, results, _ = chosen
    old = _result(root, f"{SERVICE}-pilot-3", meets=6, date=TODAY - dt.timedelta(days=3), name="old.json")
    _refused(_choose(path, results[1], old), str(old), "date", "servingblueprints:planned.as_of")


def test_an_expired_pilot_exits_2(chosen, tmp_path):
    root, path, _, results, _ = chosen
    copy = tmp_path / "project"
    shutil.copytree(root, copy)
    config = copy / "stacks" / f"Pulumi.{SERVICE}-pilot-1.yaml"
    expires = _pilot(root, 1).pilot.expires
    config.write_text(config.read_text().replace(expires, "2026-01-01T00:00Z"))
    files = [copy / r.relative_to(root) for r in (results[1], results[2])]
    _refused(_choose(copy / path.relative_to(root), *files), str(config), "pilot.expires")


@pytest.mark.parametrize("content, words", [
    ("not json", ["not JSON"]), ('{"schema_version": 1, "stack": "x"}', ["date"]),
    ('{"stack": "x", "stack": "y"}', ["duplicate key 'stack'"]),  # JSON's last-one-wins is not read as meant
])
def test_a_result_that_is_not_a_result_file_exits_2(chosen, tmp_path, content, words):
    _, path, _, results, _ = chosen
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    _refused(_choose(path, results[1], bad), str(bad), *words)


# Hand-edited choices, checked where the requirements load (no plan, no pilot: a requirements load suffices).

def _hand_written_choice() -> dict:
    """A `choice:` block of the shape `blueprint choose` writes, for chat-assistant (environments dev and prod)."""
    candidate = {"archetype": "vllm-gpu", "engine": "vllm", "instance_type": "g6e.xlarge", "tensor_parallel_size": 1,
                 "kv_cache_dtype": "auto", "precision": "bf16"}
    other = {**candidate, "instance_type": "g6e.12xlarge", "tensor_parallel_size": 4}
    day = (TODAY - dt.timedelta(days=2)).isoformat()

    def finalist(k, cand, verdict):
        return {"stack": f"chat-assistant-pilot-{k}", "candidate": cand, "verdict": verdict, "failed_pct": 0.0,
                "results": [{"file": f"benchmarks/results/chat-assistant-pilot-{k}/{day}.json",
                             "sha256": hashlib.sha256(str(k).encode()).hexdigest(), "date": day}]}

    return {"decided": TODAY.isoformat(), "environment": "prod", "candidate": candidate,
            "basis": {"model": "llama-3.1-8b", "mean_input_tokens": 1200, "mean_output_tokens": 300,
                      "ttft_p95_ms": 1500, "itl_p95_ms": 50},
            "finalists": [finalist(1, candidate, "chosen"), finalist(2, other, "meets-slo")]}


def _with_choice(tmp_path, edit) -> tuple:
    data = yaml.safe_load((ROOT / "stacks" / "requirements" / "chat-assistant.yaml").read_text())
    data["choice"] = _hand_written_choice()
    edit(data["choice"])
    path = tmp_path / "chat-assistant.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path, runner.invoke(app, ["plan", str(path), "--as-of", PLAN_DATE.isoformat()])


def test_a_hand_written_choice_of_the_right_shape_loads(tmp_path):
    path, _ = _with_choice(tmp_path, lambda c: None)
    assert load_requirements(path).choice.candidate.instance_type == "g6e.xlarge"


@pytest.mark.parametrize("edit, field, words", [
    # Cross-field: an environment the file does not have sized nothing the plan knows.
    (lambda c: c.update(environment="production"), "choice.environment",
     ["'production' is not an environment of this file (dev, prod)", "run `blueprint choose` again"]),
    # Cross-field against the catalog: g6e.xlarge has 1 GPU, g6e.12xlarge 4.
    (lambda c: c["candidate"].update(tensor_parallel_size=2), "choice.candidate.tensor_parallel_size",
     ["tensor_parallel_size=2 is more than the 1 GPU(s) of g6e.xlarge", "tensor_parallel_size <= 1"]),
    (lambda c: c["finalists"][1]["candidate"].update(tensor_parallel_size=8),
     "choice.finalists[1].candidate.tensor_parallel_size", ["8 is more than the 4 GPU(s) of g6e.12xlarge"]),
    # A missing field says what to add and what it holds (its description), not pydantic's "Field required".
    (lambda c: c["finalists"][0]["results"][0].pop("sha256"), "choice.finalists[0].results[0].sha256",
     ["missing: add `choice.finalists[0].results[0].sha256` (the result file's SHA-256 when chosen, 64 lowercase "
      "hex digits, as `blueprint choose` writes it)"]),
    (lambda c: c.pop("basis"), "choice.basis", ["missing: add `choice.basis` (what the evidence was measured on"]),
    # A pattern says what is expected in words, not a regular expression.
    (lambda c: c["finalists"][0]["results"][0].update(file="../elsewhere/r.json"),
     "choice.finalists[0].results[0].file", ["should be a project-relative path such as "
                                             "benchmarks/results/<stack>/<date>.json", "no .., not absolute"]),
])
def test_a_hand_edited_choice_exits_2_naming_the_field_and_the_fix(tmp_path, edit, field, words):
    path, result = _with_choice(tmp_path, edit)
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert str(path) in result.output and f"{field}:" in text
    assert all(w in text for w in words), text
    assert "Field required" not in text and "should match" not in text and "Traceback" not in text
