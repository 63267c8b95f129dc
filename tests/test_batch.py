"""Batch workloads (issue 39, deliver 2): `traffic.batch` plans the fleet that finishes a day's work by its deadline
at the lowest cost, replays the run and prices only its hours. The held-back pair `tests/data/nightly-batch` is one
nightly summariser planned as a batch and, at the same volume, as interactive traffic."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from blueprints.cli import app
from blueprints.plan.batch import keda_cron
from blueprints.requirements.model import Batch
from blueprints.simulate.batch import BatchReplay
from tests.conftest import PLAN_DATE
from tests.kept_apart import DATA, POLICY_DIR, project_skeleton

FOLDER = DATA / "nightly-batch" / "requirements"


def _plan(name: str):
    from blueprints.workspace import plan_requirements_file

    [bp] = plan_requirements_file(FOLDER / f"{name}.yaml", as_of=PLAN_DATE, policy_dir=POLICY_DIR,
                                  requirements_dir=FOLDER).blueprints
    return bp


@pytest.fixture(scope="module")
def nightly():
    return _plan("nightly-summaries")


@pytest.fixture(scope="module")
def interactive():
    return _plan("nightly-summaries-interactive")


def _requirements(**batch) -> dict:
    data = yaml.safe_load((FOLDER / "nightly-summaries.yaml").read_text())
    data["traffic"]["batch"] = {**data["traffic"]["batch"], **batch}
    return data


# --- the held-back nightly batch ------------------------------------------------------------------------------------


def test_the_nightly_batch_completes_within_its_deadline(nightly):
    b = nightly.batch
    assert b.requests_per_day == 1_500_000 and b.deadline_hours == 24
    assert 0 < b.completion_hours <= b.deadline_hours
    # The replay's completion is the start, one request at the full batch, and the work over the fleet's throughput.
    assert b.completion_hours * 3600 == pytest.approx(
        b.start_s + b.request_latency_s + b.requests_per_day / (b.replicas * b.requests_per_s_per_replica), rel=1e-3)
    # The fewest replicas that finish: one fewer would not.
    assert b.replicas == nightly.compute.replicas
    fewer = BatchReplay(b.requests_per_day, b.replicas - 1, b.requests_per_s_per_replica, b.start_s,
                        b.request_latency_s) if b.replicas > 1 else None
    assert fewer is None or fewer.completion_s > b.deadline_hours * 3600
    assert nightly.slo.ttft_p95_ms is None and nightly.slo.itl_p95_ms is None  # no latency target


def test_the_nightly_batch_costs_less_per_million_tokens_than_the_same_volume_as_interactive_traffic(nightly,
                                                                                                   interactive):
    batch, flat = nightly.predictions.unit_costs, interactive.predictions.unit_costs
    # The same work: 1.5M requests a day of 2,000 + 200 tokens, priced over the same month.
    assert batch.requests_per_month == pytest.approx(flat.requests_per_month, rel=1e-4)
    assert batch.million_input_tokens_per_month == pytest.approx(flat.million_input_tokens_per_month, rel=1e-4)
    assert batch.expected.usd_per_million_tokens < flat.expected.usd_per_million_tokens
    assert batch.expected.usd_per_1k_requests < flat.expected.usd_per_1k_requests
    # The batch runs each replica at its largest batch, beyond what the ITL target lets the interactive one run.
    assert nightly.engine.max_num_seqs > interactive.engine.max_num_seqs


def test_a_whole_day_deadline_runs_all_day_and_costs_the_fleet_all_month(nightly):
    p = nightly.predictions
    assert nightly.batch.keda_cron is None and nightly.batch.run_hours == 24
    assert p.expected_monthly_cost_usd == pytest.approx(p.monthly_cost_usd, abs=0.02)
    assert nightly.batch.monthly_cost_usd == p.expected_monthly_cost_usd


# --- a window of a few hours ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def overnight_planned():
    """`tests/data/nightly-batch/requirements/overnight-summaries.yaml` planned: {environment: blueprint}."""
    from blueprints.workspace import plan_requirements_file

    planned = plan_requirements_file(FOLDER / "overnight-summaries.yaml", as_of=PLAN_DATE, policy_dir=POLICY_DIR,
                                     requirements_dir=FOLDER)
    return {bp.environment: bp for bp in planned.blueprints}


@pytest.fixture(scope="module")
def overnight(overnight_planned):
    """The overnight batch's dev environment: from 22:00 Berlin time within 6 h, on spot."""
    return overnight_planned["dev"]


def test_a_batch_runs_from_its_window_start_to_its_deadline_on_a_keda_cron_schedule(overnight):
    b = overnight.batch
    assert b.window_hours == 8 and b.run_hours == 6 and b.completion_hours <= 6
    assert (b.keda_cron.start, b.keda_cron.end, b.keda_cron.timezone) == ("0 22 * * *", "0 4 * * *", "Europe/Berlin")
    assert b.keda_cron.desired_replicas == overnight.compute.replicas


def test_the_monthly_cost_counts_only_the_run_hours_on_the_environments_spot_capacity(overnight):
    p = overnight.predictions
    assert overnight.compute.capacity_type.value == "spot" and p.cost_is_estimate
    nodes, fixed = p.cost_lines[0].monthly_usd, sum(line.monthly_usd for line in p.cost_lines[1:])
    assert p.expected_monthly_cost_usd == pytest.approx(nodes * 6 / 24 + fixed, abs=0.01)
    assert p.expected_monthly_cost_usd < p.monthly_cost_usd


@pytest.mark.parametrize(("start", "hours", "cron"), [(23, 2.5, ("0 23 * * *", "30 1 * * *")),
                                                      (0, 0.01, ("0 0 * * *", "1 0 * * *")),
                                                      (22, 23.99, ("0 22 * * *", "0 22 * * *")), (5, 24, None)])
def test_the_cron_schedule_ends_at_the_deadline_rounded_up_to_the_minute(start, hours, cron):
    batch = Batch(requests_per_day=10, deadline_hours=min(hours, 24), window={"start_hour": start, "length_hours": 24})
    if cron is not None and cron[0] == cron[1]:  # 23 h 59.4 min rounds up to the whole day: always on
        assert keda_cron(batch, hours, 2) is None
        return
    found = keda_cron(batch, hours, 2)
    assert (found.start, found.end) == cron if cron else found is None


# --- what the user sees -----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A project of the held-back folder (Pulumi.yaml, the policy configs, stacks/requirements): its requirements
    folder, where `blueprint plan` takes its files."""
    root = tmp_path_factory.mktemp("batch")
    return Path(shutil.copytree(FOLDER, project_skeleton(root), dirs_exist_ok=True))


def _cli(*args: str):
    return CliRunner().invoke(app, [*args], catch_exceptions=False)


def _plan_edited(project: Path, data: dict, out: str):
    """`blueprint plan` of the held-back nightly batch rewritten as `data` (restored afterwards), into a scratch
    `out` folder: (the CLI result, its output on one line)."""
    path = project / "nightly-summaries.yaml"
    original = path.read_text()
    try:
        path.write_text(yaml.safe_dump(data))
        result = _cli("plan", str(path), "--as-of", PLAN_DATE.isoformat(), "--out-dir", str(project.parent.parent / out))
    finally:
        path.write_text(original)
    return result, " ".join(result.output.split())


def test_blueprint_plan_shows_the_completion_against_the_deadline_and_the_unit_costs(project, nightly):
    result = _cli("plan", str(project / "nightly-summaries.yaml"), "--as-of", PLAN_DATE.isoformat())
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    b = nightly.batch
    assert f"completes in {b.completion_hours:.2f} h of 24 h deadline" in text
    assert f"${nightly.predictions.unit_costs.expected.usd_per_million_tokens:g} total" in text
    saved = yaml.safe_load((project.parent / "Pulumi.nightly-summaries-prod.yaml").read_text())
    assert "batch" in json.dumps(saved)


def test_blueprint_plan_json_carries_the_batch_section(project, nightly):
    result = _cli("plan", str(project / "nightly-summaries.yaml"), "--as-of", PLAN_DATE.isoformat(), "--json",
                  "--out-dir", str(project.parent.parent / "stacks-json"))
    assert result.exit_code == 0, result.output
    [entry] = [e for e in json.loads(result.output) if e["stack"] == "nightly-summaries-prod"]
    assert entry["blueprint"]["batch"]["completion_hours"] == nightly.batch.completion_hours
    assert entry["blueprint"]["predictions"]["unit_costs"]["expected"]["usd_per_million_tokens"] == \
        nightly.predictions.unit_costs.expected.usd_per_million_tokens


# --- bad input: exit 2 naming the field and the fix -----------------------------------------------------------------


@pytest.mark.parametrize(("change", "words"), [
    ({"deadline_hours": 0.01}, ["traffic.batch.deadline_hours=0.01", "raise deadline_hours to >="]),
    ({"window": None}, ["traffic.batch.window", "start_hour"]),
    ({"deadline_hours": 10, "window": {"start_hour": 22, "length_hours": 8}},
     ["deadline_hours", "lower deadline_hours to <= 8"]),
    ({"tokens_per_day": 1e9}, ["traffic.batch.requests_per_day", "exactly one of requests_per_day"]),
    ({"requests_per_day": None}, ["traffic.batch.requests_per_day", "exactly one of requests_per_day"]),
    ({"window": {"start_hour": 24, "length_hours": 8}}, ["traffic.batch.window.start_hour", "0-23"]),
    ({"window": {"start_hour": 22, "end_hour": -1}}, ["traffic.batch.window.end_hour", "0-23"]),
    ({"window": {"start_hour": 22}}, ["traffic.batch.window.length_hours", "end_hour"]),
])
def test_a_bad_batch_exits_2_naming_the_field_and_the_fix(project, change, words):
    data = _requirements(**change)
    data["traffic"]["batch"] = {k: v for k, v in data["traffic"]["batch"].items() if v is not None}
    result, text = _plan_edited(project, data, "stacks-bad")
    assert result.exit_code == 2, text
    assert all(w in text for w in words), text


@pytest.mark.parametrize(("section", "value", "field"), [
    ("slo", {"ttft_p95_ms": 2000}, "slo.ttft_p95_ms"),
    ("traffic", {"peak_requests_per_s": 5}, "traffic.peak_requests_per_s"),
    ("traffic", {"pattern": "bursty"}, "traffic.pattern"),
    ("environments", {"prod": {"region": "us-east-1", "min_replicas": 2}}, "environments.prod.min_replicas"),
])
def test_a_batch_service_refuses_what_only_interactive_traffic_has(section, value, field):
    from blueprints.requirements.service import Requirements
    from pydantic import ValidationError

    data = _requirements()
    data[section] = value if section == "environments" else {**data.get(section, {}), **value}
    with pytest.raises(ValidationError, match=field.rsplit(".", 1)[-1]):
        Requirements.model_validate(data)


@pytest.mark.parametrize("given", [{}, {"mean_input_tokens": 2000}, {"mean_output_tokens": 200}])
def test_tokens_per_day_without_both_mean_lengths_is_refused_not_converted_with_the_defaults(given):
    """tokens_per_day is converted to requests with the mean lengths: the defaults (512, 256) are no one's figures, so
    a length left out would plan a volume the team never stated (found by hand-editing: planned silently)."""
    from blueprints.requirements.service import Requirements
    from pydantic import ValidationError

    data = _requirements(requests_per_day=None, tokens_per_day=3.3e9)
    del data["traffic"]["batch"]["requests_per_day"]
    for field in ("mean_input_tokens", "mean_output_tokens"):
        data["traffic"].pop(field)
    data["traffic"].update(given)
    with pytest.raises(ValidationError) as refused:
        Requirements.model_validate(data)
    missing = {"mean_input_tokens", "mean_output_tokens"} - set(given)
    assert all(f"give {field} (the mean of your documents)" in str(refused.value) for field in missing)
    data["traffic"].update(mean_input_tokens=2000, mean_output_tokens=200)
    traffic = Requirements.model_validate(data).traffic
    assert traffic.batch_requests_per_day == pytest.approx(1.5e6)  # 3.3e9 tokens over 2,200 a request


@pytest.mark.parametrize(("window", "deadline", "field", "words"), [
    # 02:00 Europe/Berlin does not exist on the last Sunday of March: the start never fires that day.
    ({"start_hour": 2, "length_hours": 4, "timezone": "Europe/Berlin"}, 4, "window.start_hour",
     "the run's start, 02:00 Europe/Berlin, does not exist on"),
    # 22:00 + 4.5 h ends at 02:30: that night would have no run.
    ({"start_hour": 22, "length_hours": 8, "timezone": "Europe/Berlin"}, 4.5, "deadline_hours",
     "the run's end, 02:30 Europe/Berlin, does not exist on"),
    ({"start_hour": 2, "length_hours": 4, "timezone": "America/New_York"}, 4, "window.start_hour",
     "the run's start, 02:00 America/New_York, does not exist on"),
])
def test_a_run_starting_or_ending_in_a_daylight_saving_gap_is_refused(tmp_path, window, deadline, field, words):
    """KEDA's cron scaler (robfig/cron's Next) steps over a wall time the clocks skip, to the next day: found by
    hand-editing a window start into the skipped hour (planned silently)."""
    from blueprints.core.errors import RequirementsError
    from blueprints.requirements.service import Requirements, load_requirements

    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(_requirements(window=window, deadline_hours=deadline)))
    with pytest.raises(RequirementsError) as refused:
        load_requirements(path)
    text = " ".join(str(refused.value).split())
    assert f"{path}" in text and f"traffic.batch.{field}: {words}" in text, text
    assert "time zone without daylight saving time (UTC)" in text, text
    # The same hours in UTC, and a start the clocks never skip, plan.
    Requirements.model_validate(_requirements(window={**window, "timezone": "UTC"}, deadline_hours=deadline))
    Requirements.model_validate(_requirements(window={**window, "start_hour": 3}, deadline_hours=min(deadline, 4)))


def test_skipped_on_finds_the_days_the_clocks_skip_and_only_those():
    import datetime as dt
    from blueprints.requirements.model import skipped_on

    assert skipped_on("Europe/Berlin", 2 * 60 + 30, today=dt.date(2027, 1, 1)) == dt.date(2027, 3, 28)
    assert skipped_on("America/New_York", 2 * 60, today=dt.date(2027, 1, 1)) == dt.date(2027, 3, 14)
    assert skipped_on("Europe/Berlin", 3 * 60, today=dt.date(2027, 1, 1)) is None  # 03:00 exists every day
    assert skipped_on("UTC", 2 * 60, today=dt.date(2027, 1, 1)) is None


def test_shortest_run_is_an_hour_short_on_the_night_spanning_the_spring_forward_change_only():
    import datetime as dt
    from blueprints.requirements.model import shortest_run

    today = dt.date(2026, 12, 1)
    # 22:00-04:00 Berlin: the clocks jump 02:00 -> 03:00 on Sunday 2027-03-28, in the run that starts the evening before.
    assert shortest_run("Europe/Berlin", 22 * 60, 360, today=today) == (5 * 3600, dt.date(2027, 3, 27))
    assert shortest_run("America/New_York", 23 * 60, 240, today=today) == (3 * 3600, dt.date(2027, 3, 13))
    # Lord Howe Island moves its clocks by 30 minutes (02:00 -> 02:30 on 2027-10-03).
    assert shortest_run("Australia/Lord_Howe", 60, 180, today=today) == (2.5 * 3600, dt.date(2027, 10, 3))
    # A run before the jump, in UTC, or spanning only the fall-back change (an hour longer) is never shorter.
    assert shortest_run("Europe/Berlin", 22 * 60, 180, today=today) == (3 * 3600, None)
    assert shortest_run("UTC", 22 * 60, 360, today=today) == (6 * 3600, None)
    assert shortest_run("Europe/Berlin", 22 * 60, 360, today=dt.date(2027, 4, 1))[1] == dt.date(2028, 3, 25)
    # A start in the repeated hour (02:30 twice on 2027-10-31) is held from its second occurrence, an end from its
    # first: the run is never counted longer than its wall-clock minutes.
    assert shortest_run("Europe/Berlin", 2 * 60 + 30, 240, today=dt.date(2027, 10, 1)) == (4 * 3600, None)


def test_a_run_spanning_the_spring_forward_change_is_planned_to_finish_within_that_nights_real_length(overnight):
    """22:00 Berlin for 6 h: the cron end (04:00) comes after 5 real hours on the run starting 2027-03-27, so the
    replayed day must end within 5 h, and the rationale names the night and the margin."""
    b = overnight.batch
    assert b.deadline_hours == 6 and b.run_hours == 6 and b.keda_cron.end == "0 4 * * *"
    assert b.completion_hours <= 5
    [note] = [line for line in overnight.rationale if line.startswith("batch:")]
    said = re.search(r"the run starting 2027-03-27 spans the spring-forward change, so its cron end comes after 5 h of "
                     r"real time, not 6 h: the fleet is sized to finish within that shortest run \(([0-9,]+) minutes "
                     r"to spare; a run not spanning the change, from another start_hour or in UTC, is planned on the "
                     r"whole deadline\)", note)
    assert said and abs(int(said[1].replace(",", "")) - (5 - b.completion_hours) * 60) <= 1, note


def test_a_deadline_that_holds_no_request_on_the_shortest_night_is_refused_naming_it():
    import datetime as dt
    from types import SimpleNamespace

    from blueprints.core.errors import RequirementsError
    from blueprints.plan.batch import _check_deadline
    from blueprints.requirements.model import Batch

    batch = Batch(requests_per_day=10, deadline_hours=2.5, window={"start_hour": 1, "length_hours": 4,
                                                                      "timezone": "Europe/Berlin"})
    deadline_s, night = batch.shortest_run_s(today=dt.date(2026, 12, 1))
    assert (deadline_s, night) == (5400, dt.date(2027, 3, 28))  # 01:00-03:30 spans 02:00 -> 03:00
    from blueprints.contracts.sections import Archetype

    bp = SimpleNamespace(archetype=Archetype.VLLM_GPU, compute=SimpleNamespace(instance_type="g6e.xlarge"))
    replay = SimpleNamespace(start_s=1500.0, request_latency_s=4000.0)  # 5,500 s: within 2.5 h, not within 1.5 h
    with pytest.raises(RequirementsError, match=r"deadline_hours=2.5 \(5,400 s, 1.5 h of real time on the run "
                       r"starting 2027-03-28 .*raise deadline_hours to >= 2.53"):
        _check_deadline(batch, bp, replay, deadline_s=deadline_s, night=night)
    assert _check_deadline(batch, bp, replay, deadline_s=9000, night=None) == 9000 - 5500


# --- the schedule deployed ------------------------------------------------------------------------------------------

SCALED_OBJECT = "kubernetes:keda.sh/v1alpha1:ScaledObject"


@pytest.fixture(scope="module")
def overnight_review(tmp_path_factory):
    """`blueprint preview overnight-summaries-prod` of the held-back folder planned into a scratch stacks folder."""
    from tests.kept_apart import plan_folder, review

    stacks_dir = tmp_path_factory.mktemp("batch-preview") / "stacks"
    plan_folder(Path(shutil.copytree(FOLDER, stacks_dir / "requirements")), stacks_dir)
    return review("overnight-summaries-prod", stacks_dir)


def test_the_overnight_stack_scales_on_its_cron_schedule_and_to_zero_outside_it(overnight_review, overnight_planned):
    bp = overnight_planned["prod"]
    [scaled] = [r.inputs for r in overnight_review.resources if r.type == SCALED_OBJECT]
    spec = scaled["spec"]
    assert spec["triggers"] == [{"type": "cron", "metadata": {
        "timezone": "Europe/Berlin", "start": "0 22 * * *", "end": "0 4 * * *",
        "desiredReplicas": str(bp.batch.replicas)}}]
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (0, bp.batch.replicas)
    # The whole fleet at once at the window's start, as the replay starts it.
    [up] = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleUp"]["policies"]
    assert up["value"] >= bp.batch.replicas


def test_the_overnight_stack_previews_clean_in_production(overnight_review):
    # The cron trigger wakes without a pod (signals), and a schedule is not production scaling to zero (policy).
    assert overnight_review.clean, (overnight_review.manifest_problems, overnight_review.mandatory_violations,
                                    overnight_review.deployability, overnight_review.signals)


def test_a_whole_day_batch_is_pinned_at_its_replicas(nightly):
    from blueprints.review.preview import run_under_mocks
    from components.autoscaling import KubernetesScaler, KubernetesScalerArgs

    run = run_under_mocks(lambda: KubernetesScaler("s", KubernetesScalerArgs(
        blueprint=nightly, deployment_name="d", namespace="serving", prometheus_url="http://prom:9090")),
        stack=nightly.stack)
    spec = run.one(SCALED_OBJECT).inputs["spec"]
    assert spec["minReplicaCount"] == spec["maxReplicaCount"] == nightly.batch.replicas


@pytest.mark.parametrize(("triggers", "refused"), [
    ([{"type": "cron", "metadata": {"start": "0 22 * * *", "end": "0 4 * * *", "timezone": "UTC",
                                    "desiredReplicas": "3"}}], False),
    ([{"type": "cron", "metadata": {}}, {"type": "prometheus", "metadata": {}}], True),
    ([{"type": "prometheus", "metadata": {}}], True), ([], True)])
def test_production_lets_only_a_cron_schedule_scale_a_scaled_object_to_zero(triggers, refused):
    from test_policy_stack_compliance import bucket
    from test_policy_support import policy_resource, stack_violations

    scaler = policy_resource(SCALED_OBJECT, {"spec": {"minReplicaCount": 0, "triggers": triggers}}, name="s")
    found = stack_violations("compliance-production", [bucket(production=True), scaler], {"production": True})
    assert bool(found) is refused


def test_tokens_per_day_convert_with_the_mean_request_and_a_dump_loads_again():
    from blueprints.requirements.service import Requirements

    data = _requirements(requests_per_day=None, tokens_per_day=2_200_000_000)
    data["traffic"]["batch"].pop("requests_per_day")
    req = Requirements.model_validate(data)
    traffic = req.traffic
    assert traffic.batch_requests_per_day == pytest.approx(1_000_000)  # 2,000 + 200 tokens a request
    assert traffic.peak_requests_per_s == pytest.approx(1_000_000 / (24 * 3600))
    # A validated file's dump (as a refusal's proven hints re-validate it) carries the derived rate: it loads again.
    again = Requirements.model_validate(req.model_dump(mode="json"))
    assert again.traffic.peak_requests_per_s == traffic.peak_requests_per_s


def test_blueprint_simulate_replays_a_batch_stacks_run_against_its_deadline(project, nightly):
    _cli("plan", str(project / "nightly-summaries.yaml"), "--as-of", PLAN_DATE.isoformat())  # the stack config
    result = _cli("simulate", "nightly-summaries-prod", "--stacks-dir", str(project.parent), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["completion_hours"] == pytest.approx(nightly.batch.completion_hours, abs=1e-3)
    assert data["within_deadline"] and data["deadline_hours"] == 24
    assert data["done_by_hour"][-1] == 1.0 and data["done_by_hour"] == sorted(data["done_by_hour"])
    refused = _cli("simulate", "nightly-summaries-prod", "--stacks-dir", str(project.parent), "--days", "2",
                   "--out", str(project.parent / "plots"))
    assert refused.exit_code == 2 and "--out" in refused.output


def test_a_scheduled_batch_pages_only_when_replicas_asked_for_do_not_come_up(overnight_planned, nightly):
    from blueprints.contracts.observability import slo_alerts

    [scheduled] = [r for r in slo_alerts(overnight_planned["prod"]) if r.name == "ServingReplicasUnavailable"]
    assert "kube_deployment_spec_replicas" in scheduled.expr  # none outside the schedule is no outage
    [all_day] = [r for r in slo_alerts(nightly) if r.name == "ServingReplicasUnavailable"]
    assert "kube_deployment_spec_replicas" not in all_day.expr


@pytest.mark.parametrize(("budget", "plans"), [(1_500, True), (500, False)])
def test_the_budget_applies_to_the_batchs_run_hours(budget, plans):
    from blueprints.catalog import load_catalog
    from blueprints.core.errors import SizingError
    from blueprints.plan.planner import plan
    from blueprints.requirements.service import load_requirements

    req = load_requirements(FOLDER / "overnight-summaries.yaml")
    req = req.model_copy(update={"budget": req.budget.model_copy(update={"max_monthly_usd": budget})})
    if plans:  # its 6 h run (2 replicas: sized for the 5 h spring-forward night) about $1,240 a month; all day 4x
        [bp] = plan(req, load_catalog(), as_of=PLAN_DATE, environments=["prod"])
        assert bp.batch.monthly_cost_usd <= budget < bp.predictions.monthly_cost_usd
    else:
        with pytest.raises(SizingError, match="budget.max_monthly_usd=500"):
            plan(req, load_catalog(), as_of=PLAN_DATE, environments=["prod"])


def test_plan_md_states_the_completion_against_the_deadline_the_run_cost_and_the_unit_costs(overnight_review,
                                                                                          overnight_planned):
    from blueprints.plan.unit_costs import describe
    from blueprints.review.report.stack import render_markdown

    bp = overnight_planned["prod"]
    text = render_markdown(overnight_review)
    assert f"completes in {bp.batch.completion_hours:.2f} h of 6 h deadline" in text
    assert f"${bp.predictions.expected_monthly_cost_usd:,.2f} (the batch's run hours only)" in text
    assert describe(bp.predictions.unit_costs.expected) in text
    assert "at the autoscaler's maximum" not in text  # a batch runs its planned replicas, no more


# --- one source of truth: the stack config says what deploys --------------------------------------------------------


def test_a_batch_stack_configs_autoscaling_states_its_schedule(overnight_planned, nightly):
    for bp in (*overnight_planned.values(), nightly):
        b, a = bp.batch, bp.autoscaling
        # A cron schedule: none outside the run, the planned replicas in it; all day: pinned at them.
        assert (a.min_replicas, a.max_replicas) == ((0 if b.keda_cron else b.replicas), b.replicas), bp.stack
        # On a cron schedule it scales on the cron scaler (desiredReplicas against 1 per replica), its one trigger.
        assert (a.metric, a.target) == ("cron", 1.0) if b.keda_cron else a.metric == "vllm:num_requests_running"
        # What reads the maximum follows: the NodePool's limit, the most the autoscaler can cost.
        assert bp.node_pool_max_nodes == bp.placement.nodes(b.replicas + 1)
        assert bp.predictions.max_monthly_cost_usd == bp.predictions.monthly_cost_usd
    assert overnight_planned["prod"].autoscaling.min_replicas == 0  # production: the schedule's zero, no request waits
    assert not overnight_planned["prod"].wakes_on_request


def test_the_scaled_object_is_the_stack_configs_autoscaling(overnight_review, overnight_planned):
    a = overnight_planned["prod"].autoscaling
    [scaled] = [r.inputs for r in overnight_review.resources if r.type == SCALED_OBJECT]
    assert (scaled["spec"]["minReplicaCount"], scaled["spec"]["maxReplicaCount"]) == (a.min_replicas, a.max_replicas)


@pytest.mark.parametrize(("utc", "active"), [
    ("2026-12-07T21:00", True),   # 22:00 Berlin (UTC+1 in December): the run starts
    ("2026-12-08T02:59", True),   # 03:59: past midnight, still running
    ("2026-12-08T03:00", False),  # 04:00: the deadline, the schedule's end
    ("2026-12-07T11:00", False),  # noon
    ("2026-07-07T20:00", True),   # 22:00 Berlin in summer (UTC+2)
    ("2026-07-07T21:00", True),
    ("2026-07-07T19:59", False),
])
def test_the_cron_schedule_is_judged_in_its_time_zone(utc, active):
    import datetime as dt

    from blueprints.contracts.sections import KedaCron

    cron = KedaCron.daily(start_hour=22, run_hours=6, timezone="Europe/Berlin", replicas=3)
    moment = dt.datetime.fromisoformat(utc).replace(tzinfo=dt.timezone.utc)
    assert cron.active_at(moment) is active


@pytest.mark.parametrize(("utc", "ok", "words"), [
    ("2026-12-07T11:00", True, "outside the batch window (KEDA cron '0 22 * * *' to '0 4 * * *' Europe/Berlin)"),
    ("2026-12-07T23:00", False, "although {replicas} replica(s) must run during the batch run"),
])
def test_verify_expects_nodes_only_during_the_batch_run(overnight_review, overnight_planned, utc, ok, words):
    import datetime as dt

    from blueprints.operate.manifests import StackManifests
    from blueprints.operate.verify import check_nodes

    sm = StackManifests(overnight_planned["prod"], tuple(overnight_review.manifests))
    pool = sm.node_pool["metadata"]["name"]

    def read(group, version, plural, namespace, name):
        assert (plural, name) == ("nodepools", pool)
        return {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}

    moment = dt.datetime.fromisoformat(utc).replace(tzinfo=dt.timezone.utc)
    pool_check, nodes = check_nodes(sm, read, lambda selector: [], now=moment)
    assert pool_check.ok and nodes.ok is ok
    assert words.format(replicas=overnight_planned["prod"].compute.replicas) in nodes.detail, nodes.detail


def test_an_infeasible_batch_names_the_batchs_own_fields(project):
    data = _requirements(requests_per_day=500_000_000)  # ~700 GPUs all day: beyond the prod policy's maxGpus
    result, text = _plan_edited(project, data, "stacks-infeasible")
    assert result.exit_code == 2, text
    assert "no option finishing traffic.batch by its deadline_hours stays within gpu-quota" in text
    assert "lower traffic.batch.requests_per_day (or tokens_per_day) or environments.prod.traffic_scale" in text
    assert "maxGpus" in text  # the hardware limit that binds
    for interactive in ("peak_requests_per_s", "relax the SLO", "meeting the SLO"):
        assert interactive not in text, text


def test_an_infeasible_windowed_batch_suggests_a_later_deadline_within_its_window():
    from blueprints.plan.options.infeasible import load_relief
    from blueprints.requirements.service import Requirements

    data = _requirements(deadline_hours=4, window={"start_hour": 22, "length_hours": 8})
    assert load_relief(Requirements.model_validate(data), "prod").endswith(
        "or raise traffic.batch.deadline_hours (up to the window's 8 h)")
    data = _requirements(deadline_hours=8, window={"start_hour": 22, "length_hours": 8})
    assert load_relief(Requirements.model_validate(data), "prod").endswith(
        "or lengthen traffic.batch.window and raise deadline_hours with it")


# --- hand edits of a batch stack config -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def batch_project(tmp_path_factory) -> Path:
    """A project (Pulumi.yaml, program, policy configs) with the held-back folder planned into its stacks/."""
    root = tmp_path_factory.mktemp("batch-edits")
    folder = Path(shutil.copytree(FOLDER, project_skeleton(root), dirs_exist_ok=True))
    for name in ("nightly-summaries.yaml", "nightly-summaries-interactive.yaml"):
        (folder / name).unlink()  # only the overnight batch: `plan --check` re-plans every file
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        result = _cli("plan", "stacks/requirements/overnight-summaries.yaml", "--as-of", PLAN_DATE.isoformat())
    assert result.exit_code == 0, result.output
    return root


def _batch_edit(path: str, value):
    def edit(blueprint: dict) -> None:
        node = blueprint
        *parents, last = path.split(".")
        for part in parents:
            node = node[part]
        node[last] = value
    return edit


@pytest.mark.parametrize(("edits", "names", "drifted"), [
    # More replicas in the batch section only: the schedule, the autoscaling and the compute no longer agree.
    ([_batch_edit("batch.replicas", 3)], ["batch.replicas", "batch.keda_cron", "desired_replicas 3"],
     ["batch.replicas"]),
    # The autoscaling's old interactive figures back: not the schedule's (one replica always on, one more at most).
    ([_batch_edit("autoscaling.min_replicas", 1), lambda bp: _batch_edit("autoscaling.max_replicas",
                                                                        bp["batch"]["replicas"] + 1)(bp)],
     ["blueprint.autoscaling:", "set min_replicas=0, max_replicas=", "metric=cron and target=1"],
     ["autoscaling.max_replicas"]),
    # Scaled on the engine's signal again: the ScaledObject would no longer follow the schedule.
    ([_batch_edit("autoscaling.metric", "vllm:num_requests_running"), _batch_edit("autoscaling.target", 64.0)],
     ["blueprint.autoscaling:", "metric=cron"], ["autoscaling.metric"]),
    # The window moved consistently within the stack config: its requirements say 22:00.
    ([_batch_edit("batch.window_start_hour", 23), _batch_edit("batch.keda_cron.start", "0 23 * * *"),
      _batch_edit("batch.keda_cron.end", "0 5 * * *")],
     ["batch.window_start_hour", "traffic.batch.window.start_hour gives 22"], ["batch.window_start_hour"]),
    # The cron end edited against the stack's own deadline.
    ([_batch_edit("batch.keda_cron.end", "0 6 * * *")], ["batch.keda_cron", "end '0 4 * * *'"],
     ["batch.keda_cron.end"]),
], ids=["replicas", "autoscaling", "metric", "window-moved", "cron-end"])
def test_a_hand_edited_batch_section_fails_preview_and_plan_check(batch_project, monkeypatch, edits, names, drifted):
    stack = batch_project / "stacks" / "Pulumi.overnight-summaries-prod.yaml"
    original = stack.read_text()
    data = yaml.safe_load(original)
    for edit in edits:
        edit(data["config"]["servingblueprints:blueprint"])
    monkeypatch.chdir(batch_project)
    try:
        stack.write_text(yaml.safe_dump(data, sort_keys=False))
        preview = _cli("preview", "overnight-summaries-prod")
        check = _cli("plan", "--check", "--json")
    finally:
        stack.write_text(original)
    text = " ".join(preview.output.split())
    assert preview.exit_code == 2 and "Traceback" not in text, text
    assert all(name in text for name in names), text
    assert check.exit_code == 1, check.output
    found = json.loads(check.stdout)
    assert {d["stack"] for d in found} == {"overnight-summaries-prod"}
    fields = {d["field"].removeprefix("servingblueprints:blueprint.") for d in found}
    assert set(drifted) <= fields, fields
    assert all("instead" in d["fix"] or "re-plan" in d["fix"] for d in found)
    # Each drifted field names the traffic.batch field behind it, never an interactive one.
    assert all("traffic.batch" in d["fix"] for d in found if d["field"].endswith(tuple(drifted))), found
    assert not any("environments.prod.min_replicas" in d["fix"] or "peak_requests_per_s" in d["fix"] for d in found)


def test_plan_check_of_a_planned_batch_is_clean(batch_project, monkeypatch):
    monkeypatch.chdir(batch_project)
    result = _cli("plan", "--check")
    assert result.exit_code == 0, result.output


def test_plan_md_states_the_schedules_replicas(overnight_review, overnight_planned):
    from blueprints.review.report.stack import render_markdown

    a = overnight_planned["prod"].autoscaling
    assert (f"{a.min_replicas}-{a.max_replicas} on the batch's schedule (KEDA cron '0 22 * * *' to '0 4 * * *' "
            "Europe/Berlin)") in render_markdown(overnight_review)


def test_verify_reads_a_scheduled_batchs_hpa_value_as_the_cron_scalers(overnight_planned):
    from blueprints.operate.verify import scaler_range

    bp = overnight_planned["prod"]
    low, high, unit = scaler_range(bp)
    assert (low, high) == (0.0, float(bp.batch.replicas)) and "desiredReplicas" in unit


def test_verify_outside_the_batch_window_says_so_and_calls_no_endpoint(overnight_review, overnight_planned):
    import datetime as dt

    from blueprints.operate.manifests import StackManifests
    from blueprints.operate.verify import verify_kubernetes

    sm = StackManifests(overnight_planned["prod"], tuple(overnight_review.manifests))

    def read(group, version, plural, namespace, name):
        if plural == "nodepools":
            return {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
        raise LookupError(name)

    def fetch(*args, **kwargs):
        raise AssertionError("no replica runs outside the window: nothing to call")

    noon = dt.datetime(2026, 12, 7, 11, 0, tzinfo=dt.timezone.utc)  # 12:00 Berlin
    report = verify_kubernetes(sm, {"endpoint": "https://x/v1", "api_key": "k" * 20}, prom=None, read=read,
                               list_nodes=lambda selector: [], fetch=fetch, now=noon)
    [window] = [c for c in report.checks if c.check == "batch-window"]
    assert not window.ok and "0 replicas expected" in window.detail and not report.ok
    assert not any(c.check.startswith("endpoint") for c in report.checks)
    assert all(c.ok for c in report.checks if c.check == "nodes-ready")


def test_a_batch_run_against_interactive_requirements_is_below_its_floors(overnight_planned):
    from blueprints.plan.floors import floor_problems, stack_floors
    from blueprints.requirements.service import load_requirements

    interactive = load_requirements(FOLDER / "nightly-summaries-interactive.yaml")
    floors = stack_floors(interactive, "prod", service="overnight-summaries", source="interactive.yaml",
                          guardrails=None)
    [batch] = [p for p in floor_problems(overnight_planned["prod"], floors) if p.loc == ("batch",)]
    assert "has no traffic.batch" in str(batch)


# --- SageMaker asynchronous inference: the managed candidate ------------------------------------------------------


def _managed_folder(root: Path, *, preference: str = "managed", kms: bool = False, **traffic) -> Path:
    """The held-back folder in `<root>/stacks/requirements`, nightly-summaries with `operations.preference`
    `preference` (with `kms` a customer-managed key, so the results are encrypted with the store's own key) and
    `traffic` changed; its platform file names the SNS topic a production SageMaker endpoint's alarms notify."""
    folder = Path(shutil.copytree(FOLDER, project_skeleton(root), dirs_exist_ok=True))
    data = yaml.safe_load((folder / "nightly-summaries.yaml").read_text())
    data["operations"]["preference"] = preference
    if kms:
        data["compliance"] = {"customer_managed_kms": True}
    data["traffic"].update(traffic)
    (folder / "nightly-summaries.yaml").write_text(yaml.safe_dump(data))
    platform = yaml.safe_load((folder / "platform.yaml").read_text())
    platform["alerting"]["sns_topic_arns"] = {"us-east-1": "arn:aws:sns:us-east-1:123456789012:ml-serving-alerts"}
    (folder / "platform.yaml").write_text(yaml.safe_dump(platform))
    return folder


def _plan_in(folder: Path, name: str):
    from blueprints.workspace import plan_requirements_file

    return plan_requirements_file(folder / f"{name}.yaml", as_of=PLAN_DATE, policy_dir=POLICY_DIR,
                                  requirements_dir=folder).blueprints


def test_a_managed_nightly_batch_deploys_an_asynchronous_endpoint_that_scales_from_zero_on_its_queue(tmp_path):
    from blueprints.core import defaults
    from tests.kept_apart import plan_folder, review

    folder = _managed_folder(tmp_path, kms=True)
    assert "nightly-summaries-prod" in plan_folder(folder, tmp_path / "stacks")
    report = review("nightly-summaries-prod", tmp_path / "stacks")
    bp, b = report.blueprint, report.blueprint.batch
    a = b.async_inference
    assert bp.archetype.value == "sagemaker-endpoint" and b.keda_cron is None and a is not None
    # The last request starts within RequestTTLSeconds of the window's start, the day completes by the deadline.
    assert b.completion_hours * 3600 - b.request_latency_s <= defaults.SAGEMAKER_ASYNC_REQUEST_TTL_S
    assert b.completion_hours <= b.deadline_hours and b.request_latency_s <= 3600
    assert a.max_concurrent_invocations_per_instance == min(bp.engine.max_rolling_batch_size, 1000)
    # Paid by the instance-hour: each instance from its start to the empty queue plus the scale-in lag.
    lag_s = defaults.SAGEMAKER_ASYNC_SCALE_IN_LAG_S - defaults.SAGEMAKER_ASYNC_SCALE_FROM_ZERO_S
    assert a.instance_hours_per_day == pytest.approx(b.replicas * (b.completion_hours + lag_s / 3600), abs=0.01)
    nodes, fixed = bp.predictions.cost_lines[0], sum(line.monthly_usd for line in bp.predictions.cost_lines[1:])
    assert b.monthly_cost_usd == pytest.approx(nodes.monthly_usd / b.replicas * a.instance_hours_per_day / 24 + fixed,
                                               abs=0.01)
    assert b.monthly_cost_usd < bp.predictions.monthly_cost_usd  # the same instances all day

    def of(kind):
        return [r.inputs for r in report.resources if r.type == kind]

    [config] = of("aws:sagemaker/endpointConfiguration:EndpointConfiguration")
    [model] = of("aws:sagemaker/model:Model")
    bucket = model["primaryContainer"]["modelDataSource"]["s3DataSources"][0]["s3Uri"].split("/")[2]
    out = config["asyncInferenceConfig"]["outputConfig"]
    assert out["s3OutputPath"] == f"s3://{bucket}/async/nightly-summaries-prod/out/"
    assert out["s3FailurePath"] == f"s3://{bucket}/async/nightly-summaries-prod/failed/"
    assert config["asyncInferenceConfig"]["clientConfig"]["maxConcurrentInvocationsPerInstance"] == \
        a.max_concurrent_invocations_per_instance
    assert config["productionVariants"][0]["initialInstanceCount"] == 1
    [target] = of("aws:appautoscaling/target:Target")
    assert (target["minCapacity"], target["maxCapacity"]) == (0, b.replicas)
    policies = of("aws:appautoscaling/policy:Policy")
    [tracking] = [p["targetTrackingScalingPolicyConfiguration"] for p in policies
                  if p.get("targetTrackingScalingPolicyConfiguration")]
    assert tracking["customizedMetricSpecification"]["metricName"] == "ApproximateBacklogSizePerInstance"
    assert tracking["customizedMetricSpecification"]["dimensions"] == [{"name": "EndpointName",
                                                                        "value": "nightly-summaries-prod"}]
    assert tracking["targetValue"] == a.backlog_target
    [step] = [p["stepScalingPolicyConfiguration"] for p in policies if p.get("stepScalingPolicyConfiguration")]
    assert step["stepAdjustments"] == [{"metricIntervalLowerBound": "0", "scalingAdjustment": b.replicas}]
    alarms = {a["metricName"]: a for a in of("aws:cloudwatch/metricAlarm:MetricAlarm")}
    assert alarms["HasBacklogWithoutCapacity"]["dimensions"] == {"EndpointName": "nightly-summaries-prod"}
    assert {"ExpiredRequests", "InvocationFailures"} <= set(alarms)
    [role] = [r for r in of("aws:iam/rolePolicy:RolePolicy") if "WriteAsyncResults" in r["policy"]]
    statements = {st["Sid"]: st for st in json.loads(role["policy"])["Statement"]}
    assert statements["WriteAsyncResults"]["Resource"] == [
        f"arn:aws:s3:::{bucket}/async/nightly-summaries-prod/out/*",
        f"arn:aws:s3:::{bucket}/async/nightly-summaries-prod/failed/*"]
    # Encrypted with the store's own key, the one the role decrypts the model with and may encrypt results with.
    assert out["kmsKeyId"] and statements["DecryptModelData"]["Resource"] == [out["kmsKeyId"]]
    assert statements["EncryptAsyncResults"] == {"Sid": "EncryptAsyncResults", "Effect": "Allow",
                                                 "Action": ["kms:GenerateDataKey"], "Resource": [out["kmsKeyId"]]}
    assert report.outputs["endpoint"].endswith("/endpoints/nightly-summaries-prod/async-invocations")
    assert "invoke-endpoint-async" in report.outputs["example_request"]
    # The policy pack passes it: production, yet minCapacity 0, because the endpoint queues its requests.
    assert report.clean and not report.mandatory_violations and not report.signals, (
        report.mandatory_violations, report.signals)


@pytest.mark.parametrize(("edit", "words"), [
    (lambda d: d["batch"]["async_inference"].update(max_concurrent_invocations_per_instance=3),
     "must be the instance's batch, engine.max_rolling_batch_size"),
    (lambda d: d["batch"]["async_inference"].update(output_prefix="async/someone-else/"),
     "must be 'async/nightly-summaries-prod/'"),
    (lambda d: d["engine"].update(initial_instance_count=2), "an asynchronous endpoint is created with one instance"),
    (lambda d: d["batch"]["async_inference"].update(instance_hours_per_day=1), "batch.monthly_cost_usd="),
    (lambda d: d["autoscaling"].update(min_replicas=1), "autoscaling is 1-"),
    (lambda d: d["batch"].update(async_inference=None), "a batch on sagemaker-endpoint is served by asynchronous"),
])
def test_a_hand_edited_asynchronous_batch_is_refused_naming_the_field(tmp_path, edit, words):
    from pydantic import ValidationError

    from blueprints.contracts.blueprint import Blueprint

    folder = _managed_folder(tmp_path, batch={**_requirements()["traffic"]["batch"], "requests_per_day": 20_000})
    [bp] = _plan_in(folder, "nightly-summaries")
    data = bp.model_dump(mode="json")
    Blueprint.model_validate(data)  # as planned
    edit(data)
    with pytest.raises(ValidationError) as refused:
        Blueprint.model_validate(data)
    assert words in str(refused.value), str(refused.value)


def test_a_small_batch_under_any_takes_asynchronous_inference_because_it_costs_less(tmp_path):
    batch = yaml.safe_load((FOLDER / "overnight-summaries.yaml").read_text())["traffic"]["batch"]
    folder = _managed_folder(tmp_path / "any", preference="any", batch={**batch, "requests_per_day": 2000})
    chosen = {bp.environment: bp for bp in _plan_in(folder, "nightly-summaries")}["prod"]
    hosted = _managed_folder(tmp_path / "self", preference="self-hosted", batch={**batch, "requests_per_day": 2000})
    managed = _managed_folder(tmp_path / "managed", batch={**batch, "requests_per_day": 2000})
    [self_hosted] = _plan_in(hosted, "nightly-summaries")
    [asynchronous] = _plan_in(managed, "nightly-summaries")
    assert self_hosted.archetype.value == "vllm-gpu" and asynchronous.archetype.value == "sagemaker-endpoint"
    assert asynchronous.batch.monthly_cost_usd < self_hosted.batch.monthly_cost_usd
    assert chosen.archetype.value == "sagemaker-endpoint"
    assert chosen.batch.monthly_cost_usd == asynchronous.batch.monthly_cost_usd
    note = next(r for r in chosen.rationale if r.startswith("batch with operations.preference any"))
    assert f"SageMaker asynchronous inference ${asynchronous.batch.monthly_cost_usd:,.0f}/month" in note
    assert f"self-hosted vLLM on GPU nodes ${self_hosted.batch.monthly_cost_usd:,.0f}/month" in note
    assert note.endswith("planned SageMaker asynchronous inference, the cheaper run")


def test_a_request_longer_than_the_asynchronous_invocation_timeout_exits_2_naming_the_lengths(tmp_path):
    folder = _managed_folder(tmp_path, mean_output_tokens=100_000)
    data = yaml.safe_load((folder / "nightly-summaries.yaml").read_text())
    data["model"]["max_context_tokens"] = 131_072  # the model's own context: the request fits, only not in time
    (folder / "nightly-summaries.yaml").write_text(yaml.safe_dump(data))
    result = _cli("plan", str(folder / "nightly-summaries.yaml"), "--as-of", PLAN_DATE.isoformat())
    text = " ".join(result.output.split())
    assert result.exit_code == 2, text
    assert "traffic.mean_output_tokens" in text and "3,600 s" in text and "InvocationTimeoutSeconds" in text, text


# --- re-plans: the plan is a function of the requirements and the existing hardware ---------------------------------

#: 5M requests within 5 h (4 h on the spring-forward night) on p4d/p5: the nominal rate plans p5.48xlarge, whose
#: replay asks for p5.4xlarge. A re-plan keeping p5.4xlarge (`plan --check`) used to size it from the nominal rate,
#: raise that rate by its own lateness and record another rate: drift with nothing changed.
SWITCHED = (5_000_000, 5, ["p4d", "p5"])


def _overnight_data(requests_per_day: int, deadline_hours: int, families: list[str] | None) -> dict:
    """overnight-summaries (22:00 Berlin, window to 06:00) in prod only, at this volume, deadline and families."""
    data = yaml.safe_load((FOLDER / "overnight-summaries.yaml").read_text())
    data["traffic"]["batch"].update(requests_per_day=requests_per_day, deadline_hours=deadline_hours)
    data["environments"] = {"prod": data["environments"]["prod"]}
    if families:
        data["hardware"] = {"allowed_instance_families": families}
    return data


@pytest.mark.parametrize(("requests_per_day", "deadline_hours", "families"),
                         [SWITCHED, (400_000, 6, None), (1_500_000, 5, ["p4d", "p5"]), (30_000, 8, ["g5", "g6"])])
def test_a_batch_replan_over_its_own_hardware_is_the_same_plan(requests_per_day, deadline_hours, families):
    from blueprints.catalog import load_catalog
    from blueprints.plan.planner import plan
    from blueprints.plan.stability import hardware_of
    from blueprints.requirements.service import Requirements

    req = Requirements.model_validate(_overnight_data(requests_per_day, deadline_hours, families))
    [first] = plan(req, load_catalog(), as_of=PLAN_DATE)
    [again] = plan(req, load_catalog(), as_of=PLAN_DATE,
                   existing={first.stack: hardware_of(first.model_dump(mode="json"))})
    assert again.model_dump(mode="json") == first.model_dump(mode="json")
    # The replay judges the fleet: it ends within the shortest run (4 h or 5 h on the spring-forward night).
    shortest_s, night = req.batch.shortest_run_s(today=PLAN_DATE)
    b = first.batch
    assert night is not None and shortest_s == (deadline_hours - 1) * 3600
    assert b.replicas == first.compute.replicas and b.completion_hours * 3600 <= shortest_s
    assert BatchReplay(b.requests_per_day, b.replicas, b.requests_per_s_per_replica, b.start_s,
                       b.request_latency_s).completion_s == pytest.approx(b.completion_hours * 3600, abs=2)


def test_plan_check_after_planning_a_batch_whose_replay_switched_hardware_is_clean(tmp_path, monkeypatch):
    root = tmp_path / "project"
    root.mkdir()
    folder = project_skeleton(root)
    platform = yaml.safe_load((FOLDER / "platform.yaml").read_text())
    platform["platforms"] = {"prod-us-east-1": platform["platforms"]["prod-us-east-1"]}  # prod only is planned
    (folder / "platform.yaml").write_text(yaml.safe_dump(platform, sort_keys=False))
    (folder / "overnight-summaries.yaml").write_text(yaml.safe_dump(_overnight_data(*SWITCHED), sort_keys=False))
    monkeypatch.chdir(root)
    planned = _cli("plan", "stacks/requirements/overnight-summaries.yaml", "--as-of", PLAN_DATE.isoformat())
    assert planned.exit_code == 0, planned.output
    check = _cli("plan", "--check")
    assert check.exit_code == 0, check.output
