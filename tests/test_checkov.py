"""checkov over every bundled stack's manifests: no failed check unless the checked-in skip list excuses it.

checkov runs from its own virtualenv (`make test-tools`, pinned in the Makefile; `make test` passes its path in
`CHECKOV`), offline (`--skip-download`), once over the manifests `blueprint preview --out` writes for each stack
scanned: in every run one stack per archetype and a platform (`REPRESENTATIVE`), and every bundled stack in the
`slow` run (`make test-slow`, which CI runs after `make test`: `.ci/run`).
"""

from __future__ import annotations

import fnmatch
import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from blueprints.review.report.stack import write_report_dir
from tests.bundled import bundled_review

ROOT = Path(__file__).resolve().parents[1]
SKIPS = Path(__file__).parent / "data" / "checkov-skips.yaml"


def checkov_binary() -> Path:
    given = os.environ.get("CHECKOV")
    path = Path(given) if given else ROOT / ".venv-checkov" / "bin" / "checkov"
    if not path.exists():
        if given or os.environ.get("CI"):
            pytest.fail(f"checkov not found at {path}; run `make test-tools`")
        pytest.skip("checkov is not installed: `make test` (or `make test-tools`) creates its virtualenv")
    return path


def skips() -> list[dict]:
    entries = yaml.safe_load(SKIPS.read_text())
    assert all(e.get("reason", "").strip() and e["check"].startswith("CKV") for e in entries), "each skip needs a reason"
    return entries


def excused(finding: dict, entries: list[dict]) -> dict | None:
    for entry in entries:
        if finding["check_id"] == entry["check"] and (
                "resources" not in entry or any(fnmatch.fnmatch(finding["resource"], p) for p in entry["resources"])):
            return entry
    return None


#: One stack per archetype, and a platform: vLLM with the prompt-reuse router (the one pod that needs its API token),
#: Triton, ONNX Runtime on an edge cluster, a SageMaker endpoint and its proxy, and the platform they land on. Between
#: them they raise every check the skip list excuses.
REPRESENTATIVE = ["rag-assistant-generator-prod", "search-relevance-prod", "edge-classifier-prod",
                  "prototype-summarizer-pilot", "platform-prod-us-east-1"]


def scan(reports: dict, out: Path) -> list[dict]:
    """checkov's failed checks over the manifests of `reports` (stack -> its review), written under `out`."""
    binary = checkov_binary()
    for stack, report in reports.items():
        write_report_dir(report, out / stack)
    result = subprocess.run([str(binary), "-d", str(out), "--framework", "kubernetes", "--skip-download", "--quiet",
                             "--compact", "-o", "json"], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "BC_SKIP_MAPPING": "TRUE"})
    data = json.loads(result.stdout)
    runs = data if isinstance(data, list) else [data]
    assert any(r.get("check_type") == "kubernetes" for r in runs), result.stdout[:500]
    return [f for r in runs for f in r.get("results", {}).get("failed_checks", [])]


@pytest.fixture(scope="module")
def every_finding(tmp_path_factory, bundled_previews) -> list[dict]:
    """The scan of every bundled stack."""
    return scan(bundled_previews, tmp_path_factory.mktemp("checkov-every"))


@pytest.fixture(scope="module", params=["representative", pytest.param("every", marks=pytest.mark.slow)])
def findings(request, tmp_path_factory) -> list[dict]:
    if request.param == "every":
        return request.getfixturevalue("every_finding")
    reports = {stack: bundled_review(stack) for stack in REPRESENTATIVE}
    return scan(reports, tmp_path_factory.mktemp("checkov"))


def test_checkov_reports_no_unexcused_failure_over_the_bundled_stacks(findings):
    entries = skips()
    unexcused = sorted({(f["check_id"], f["check_name"], f["resource"]) for f in findings if not excused(f, entries)})
    assert unexcused == []


def test_the_representative_stacks_are_bundled_and_of_every_archetype():
    from blueprints.contracts.platform import PlatformConfig
    from blueprints.contracts.sections import Archetype
    from blueprints.contracts.stackconfig import read_config

    subjects = [read_config(ROOT / "stacks" / f"Pulumi.{stack}.yaml") for stack in REPRESENTATIVE]
    assert {"platform" if isinstance(s, PlatformConfig) else s.archetype for s in subjects} == {*Archetype, "platform"}


@pytest.mark.slow
def test_every_skip_still_excuses_a_finding(every_finding):
    used = {excused(f, skips())["check"] for f in every_finding if excused(f, skips())}
    assert [e["check"] for e in skips() if e["check"] not in used] == []


def test_the_checks_the_issue_named_now_pass(findings):
    """Root containers, the mounted token and the missing NetworkPolicy (CKV_K8S_23/29/38/40 outside Triton's own
    user, CKV2_K8S_6) and the writable root filesystem (CKV_K8S_22) are gone, not skipped."""
    named = {"CKV_K8S_23", "CKV_K8S_29", "CKV_K8S_38", "CKV2_K8S_6", "CKV_K8S_22"}
    # The prompt-reuse router watches pods through the API server: the one pod that needs its token (skip list).
    needed = {("CKV_K8S_38", f["resource"]) for f in findings if f["resource"].endswith("-router")}
    assert [f["resource"] for f in findings if f["check_id"] in named and (f["check_id"], f["resource"]) not in needed] \
        == []
    assert {f["resource"].rsplit("-", 1)[-1] for f in findings if f["check_id"] == "CKV_K8S_40"} <= {
        "triton", "onnxruntime"}
