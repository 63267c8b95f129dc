"""Every command line our containers run, parsed by that tool's own parser at the version its image carries
(blueprints/catalog/processes.yaml `tools`): `hf download` by huggingface_hub's CLI app (the download stubbed),
`aws s3 sync/cp` and `aws eks get-token` by the AWS CLI's driver and argument tables (the transfer stubbed), in the
tools virtualenv (tests/tools/checkov.in). A `sh -c` script runs under a real shell whose every external command is
recorded instead of run, so its command lines are the ones the shell would really build.

Checked by: chat-assistant-prod's weights Job argv, parsed by huggingface_hub 1.21.0's CLI, requests every
safetensors file; a program whose version the catalog does not record is named with its image.
"""

from __future__ import annotations

import json
import os
import posixpath
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from blueprints.catalog.processes import process_facts, tool_facts
from blueprints.contracts.sections import Archetype
from blueprints.contracts.weights import HF_EXCLUDE_PATTERNS, HF_INCLUDE_PATTERNS
from blueprints.requirements.model import MODEL_FILE
from components.cluster import kubeconfig_json
from tests.cli_tools import ROOT, tools_python
from tests.bundled import bundled_review

TOOLS = ROOT / "tests" / "tools"
STACK = "chat-assistant-prod"
#: The files of meta-llama/Llama-3.1-8B-Instruct on the Hub (its "Files and versions" tree, main): four safetensors
#: shards and their index, configs, tokenizer, and Meta's own `original/` copy.
LLAMA_FILES = ["LICENSE", "README.md", "USE_POLICY.md", "config.json", "generation_config.json",
               *(f"model-0000{i}-of-00004.safetensors" for i in range(1, 5)), "model.safetensors.index.json",
               "original/consolidated.00.pth", "original/params.json", "original/tokenizer.model",
               "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json"]
#: POSIX utilities our scripts call with fixed words (cp, mv, mkdir -p, dirname, sleep, cat; sha256sum -c): their
#: options have not changed in decades, so no version is recorded for them.
POSIX_UTILITIES = {"cp", "mv", "mkdir", "dirname", "sleep", "cat", "sha256sum"}
SHELLS = {"sh", "bash"}
REPOSITORY_ARCHETYPES = (Archetype.TRITON_MULTI_MODEL, Archetype.ONNX_CPU)
#: Defined before the script: bash calls it for every command PATH does not hold (PATH is empty), so each external
#: command is recorded (one JSON line) and succeeds without running; builtins (`[`, `shift`, `exit`) run as usual.
RECORDER = ('command_not_found_handle() { python3 -c \'import json,os,sys; '
            'open(os.environ["RECORD"], "a").write(json.dumps(sys.argv[1:]) + "\\n")\' "$@"; return 0; }; ')


@dataclass(frozen=True)
class Run:
    """One program a container runs: where, in which image, and its argv (`argv[0]` the program's base name)."""

    where: str
    image: str
    argv: tuple[str, ...]

    @property
    def program(self) -> str:
        return self.argv[0]


def pod_specs(manifest: dict) -> list[dict]:
    spec = manifest.get("spec") or {}
    template = (spec.get("jobTemplate", {}).get("spec", {}) if manifest.get("kind") == "CronJob" else spec)
    pod = (template.get("template") or {}).get("spec")
    return [pod] if isinstance(pod, dict) else []


def containers(manifests: list[dict]) -> list[tuple[str, dict]]:
    """(`Kind/name container`, container) of every container and init container the manifests run."""
    found = []
    for m in manifests:
        for pod in pod_specs(m):
            for key in ("initContainers", "containers"):
                for c in pod.get(key) or []:
                    found.append((f"{m['kind']}/{m['metadata'].get('name')} {c['name']}", c))
    return found


def script_runs(where: str, image: str, argv: list[str], tmp: Path) -> list[Run]:
    """What a `sh -c SCRIPT NAME ARGS...` container executes: the script under bash (the aws-cli image's `sh`,
    amazonlinux 2), with PATH empty and every external command recorded by `RECORDER`."""
    assert argv[1] == "-c", argv
    record = tmp / "record.jsonl"
    record.write_text("")
    bash = shutil.which("bash")
    env = {"PATH": str(tmp / "empty"), "RECORD": str(record), "HOME": str(tmp)}
    assert bash
    script = RECORDER.replace("python3", sys.executable) + argv[2]
    subprocess.run([bash, "-c", script, *argv[3:]], env=env, capture_output=True, text=True, timeout=60)
    runs = [Run(where, image, tuple(json.loads(line))) for line in record.read_text().splitlines()]
    assert runs, f"{where}: its script ran no command"
    return runs


def runs_of(manifests: list[dict], stack: str, tmp: Path) -> list[Run]:
    """Every program the manifests' containers run, with its argv (scripts expanded, `script_runs`); a container
    that names no command runs its image's entrypoint (argv[0] `<entrypoint>`)."""
    runs = []
    for where, c in containers(manifests):
        command = [str(a) for a in (c.get("command") or [])] + [str(a) for a in (c.get("args") or [])]
        where = f"{stack}: {where}"
        if not c.get("command"):
            runs.append(Run(where, c["image"], ("<entrypoint>", *command)))
        elif posixpath.basename(command[0]) in SHELLS:
            runs.extend(script_runs(where, c["image"], command, tmp))
        else:
            runs.append(Run(where, c["image"], (posixpath.basename(command[0]), *command[1:])))
    return runs


def unrecorded(runs: list[Run]) -> list[str]:
    """Each program whose version in its image blueprints/catalog/processes.yaml `tools` does not record, named with
    the image and where it runs."""
    problems = []
    for run in runs:
        if run.program in POSIX_UTILITIES:
            continue
        if run.program == "<entrypoint>":
            facts = process_facts(run.image)
            if facts is None or not any(t.entrypoint for t in facts.tools):
                problems.append(f"{run.where}: the entrypoint of {run.image}: its program and version are not in "
                                "blueprints/catalog/processes.yaml `tools`")
        elif tool_facts(run.image, run.program) is None:
            problems.append(f"{run.where}: {run.program} in {run.image}: the version this image carries is not in "
                            "blueprints/catalog/processes.yaml `tools` (add it, with how it was determined)")
    return problems


def in_tools_venv(script: str, payload) -> dict:
    """Run `tests/tools/<script>` in the tools virtualenv with `payload` as JSON on stdin; its last stdout line."""
    result = subprocess.run([str(tools_python()), str(TOOLS / script)], input=json.dumps(payload),
                            capture_output=True, text=True, timeout=300, cwd=ROOT,
                            env={"PATH": os.environ.get("PATH", ""), "HOME": tempfile.mkdtemp(prefix="tools-home-"),
                                 "AWS_DEFAULT_REGION": "us-east-1", "HF_HUB_DISABLE_UPDATE_CHECK": "1",
                                 "HF_HUB_DISABLE_TELEMETRY": "1"})
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def hf_download(argv: list[str], env: dict[str, str], tmp: Path) -> dict:
    """`argv` through the image's `hf` entry point; HF_HOME moved under `tmp` (nothing is written outside it)."""
    return in_tools_venv("hf_argv.py", {"argv": argv, "env": {**env, "HF_HOME": str(tmp / "hf-home")}})


def selected(call: dict, files: list[str], tmp: Path) -> list[str]:
    """`files` kept by huggingface_hub's own filter (`filter_repo_objects`, what `snapshot_download` applies to the
    repository's file list) with the call's allow and ignore patterns."""
    code = ("import json, sys; from huggingface_hub.utils import filter_repo_objects; r = json.load(sys.stdin); "
            "print(json.dumps(list(filter_repo_objects(r['files'], allow_patterns=r['allow'], "
            "ignore_patterns=r['ignore']))))")
    result = subprocess.run([str(tools_python()), "-c", code], capture_output=True, text=True, timeout=120,
                            input=json.dumps({"files": files, "allow": call.get("allow_patterns"),
                                              "ignore": call.get("ignore_patterns")}))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


# --- the rendered stacks -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def chat_prod_preview():
    return bundled_review(STACK)


@pytest.fixture(scope="module")
def benchmark_job(benchmark_dry_run) -> list[dict]:
    """`blueprint benchmark chat-assistant-prod --dry-run`: the benchmark Job's manifests."""
    return [m for m in yaml.safe_load_all(benchmark_dry_run.stdout) if m]


@pytest.fixture(scope="module")
def every_run(bundled_previews, benchmark_job, tmp_path_factory) -> list[Run]:
    """Every program every bundled stack's containers run, and the benchmark Job's."""
    tmp = tmp_path_factory.mktemp("runs")
    runs = [r for stack, report in bundled_previews.items() for r in runs_of(report.manifests, stack, tmp)]
    return runs + runs_of(benchmark_job, f"{STACK} benchmark", tmp)


def weights_download(report) -> tuple[dict, dict]:
    """The `hf://` sync Job's download init container and its upload container."""
    [job] = [m for m in report.manifests if m["kind"] == "Job" and m["spec"]["template"]["spec"].get("initContainers")]
    pod = job["spec"]["template"]["spec"]
    return pod["initContainers"][0], pod["containers"][0]


# --- hf download ---------------------------------------------------------------------------------------------------


def test_the_weights_jobs_hf_download_requests_every_safetensors_file(chat_prod_preview, tmp_path):
    """chat-assistant-prod's rendered Job, parsed by huggingface_hub 1.21.0's own CLI (the version the vLLM image
    installs): one snapshot download of the model's repository into the folder the upload reads, with every include
    and exclude pattern, which keeps all four safetensors shards and drops Meta's `original/` copy."""
    download, upload = weights_download(chat_prod_preview)
    env = {e["name"]: e["value"] for e in download["env"] if "value" in e}
    result = hf_download(download["command"], env, tmp_path)
    assert result["versions"]["huggingface_hub"] == tool_facts(download["image"], "hf").version
    assert result["exit"] == 0 and result["warnings"] == []
    [call] = result["calls"]
    repo = chat_prod_preview.blueprint.model.source_uri.removeprefix("hf://")
    assert call["function"] == "snapshot_download" and call["repo_id"] == repo == "meta-llama/Llama-3.1-8B-Instruct"
    assert call["allow_patterns"] == list(HF_INCLUDE_PATTERNS) and call["ignore_patterns"] == list(HF_EXCLUDE_PATTERNS)
    assert call["local_dir"] == upload["args"][0]  # `aws s3 sync <local_dir> s3://...` uploads what was downloaded
    kept = selected(call, LLAMA_FILES, tmp_path)
    shards = [f"model-0000{i}-of-00004.safetensors" for i in range(1, 5)]
    assert [f for f in kept if f.endswith(".safetensors")] == shards
    assert "model.safetensors.index.json" in kept and "tokenizer.json" in kept and "config.json" in kept
    assert not [f for f in kept if f.startswith("original/")]


def test_the_old_argv_with_several_patterns_after_one_include_fetches_no_safetensors(chat_prod_preview, tmp_path):
    """The argv before the fix (`--include a b c`), under the same parser: the CLI ignores the patterns, fetches one
    file named `*.safetensors.index.json` and no weights, and exits 0: what the test above would catch."""
    download, _ = weights_download(chat_prod_preview)
    repo, local = download["command"][2], download["command"][4]
    old = ["hf", "download", repo, "--local-dir", local, "--include", *HF_INCLUDE_PATTERNS,
           "--exclude", *HF_EXCLUDE_PATTERNS]
    result = hf_download(old, {}, tmp_path)
    assert result["exit"] == 0
    assert "Ignoring `--include` since filenames have been explicitly set." in result["warnings"]
    assert [c.get("allow_patterns") or [c.get("filename")] for c in result["calls"]] != [list(HF_INCLUDE_PATTERNS)]
    for call in result["calls"]:
        files = selected(call, LLAMA_FILES, tmp_path) if call["function"] == "snapshot_download" else []
        assert not [f for f in files if f.endswith(".safetensors")]
        assert not call.get("filename", "").endswith(".safetensors")


# --- aws -----------------------------------------------------------------------------------------------------------

#: AWS CLI commands our containers run that awscli v1 has no table for (v2 only): not parsed.
V2_ONLY = {("configure", "export-credentials")}


def aws_argvs(runs: list[Run]) -> list[list[str]]:
    return [["aws", *r.argv[1:]] for r in runs if r.program == "aws" and tuple(r.argv[1:3]) not in V2_ONLY]


def test_every_aws_command_line_parses_with_the_aws_clis_own_tables(every_run):
    """Every `aws` argv of every bundled stack (sync Jobs, init containers' scripts) and of the benchmark Job, through
    awscli's driver: accepted (no unknown option, both paths given) and received by the command we meant."""
    argvs = aws_argvs(every_run)
    assert {tuple(a[1:3]) for a in argvs} == {("s3", "sync"), ("s3", "cp")}
    parsed = in_tools_venv("aws_argv.py", argvs)
    for result in parsed["results"]:
        assert result["exit"] == 0, result["argv"]
        [received] = result["received"]
        assert received["command"] == result["argv"][2]
        args = received["args"]
        assert args["paths"] == result["argv"][3:5]
        assert args["only_show_errors"] is True
    flags = {a for argv in argvs for a in argv if a.startswith("--")}
    assert flags <= {"--no-progress", "--only-show-errors", "--exclude", "--include", "--recursive"}


def test_the_sync_jobs_upload_skips_the_download_cache_and_the_benchmark_fetches_only_the_tokenizer(every_run):
    """What the parse gives the commands: the upload's one `--exclude .cache/*` filter; the benchmark's `cp
    --recursive` with `--exclude *` first, then its includes (awscli applies filters in order)."""
    argvs = aws_argvs(every_run)
    upload = next(a for a in argvs if "--exclude" in a and ".cache/*" in a)
    cp = next(a for a in argvs if a[2] == "cp")
    parsed = {tuple(r["argv"]): r["received"][0]["args"] for r in in_tools_venv("aws_argv.py", [upload, cp])["results"]}
    assert parsed[tuple(upload)]["filters"] == [["--exclude", ".cache/*"]]
    assert parsed[tuple(upload)]["progress"] is False
    filters = parsed[tuple(cp)]["filters"]
    assert parsed[tuple(cp)]["dir_op"] is True and filters[0] == ["--exclude", "*"]
    assert {f[0] for f in filters[1:]} >= {"--include"}


def test_a_triton_repository_pod_copies_only_the_config_and_the_file_its_backend_loads(bundled_previews, tmp_path):
    """Every Triton-repository stack's fetch-weights copy, filtered by awscli's own filter over a Hugging Face ONNX
    export's listing: `config.pbtxt`, the loaded file (`MODEL_FILE`) and its external data only; no other ONNX
    variant, safetensors or tokenizer. A model the server reads whole (no loaded file) gets every file."""
    entries, expected = [], []
    for stack, report in bundled_previews.items():
        if report.is_platform or report.blueprint.archetype not in REPOSITORY_ARCHETYPES:
            continue
        models = {m.name: m for m in report.blueprint.models}
        for run in runs_of(report.manifests, stack, tmp_path):
            if run.program != "aws" or not run.where.endswith(" fetch-weights"):
                continue
            name = run.argv[3].rstrip("/").rsplit("/", 1)[1]
            file = MODEL_FILE.get(models[name].format, "") if name in models else ""
            listing = ["config.pbtxt", f"1/onnx/{file or 'model.onnx'}", f"1/onnx/{file or 'model.onnx'}_data",
                       "1/onnx/model_quantized.onnx", "1/model.safetensors", "1/pytorch_model.bin", "1/tokenizer.json"]
            entries.append({"argv": ["aws", *run.argv[1:]], "keys": listing})
            expected.append(listing[:3] if file else listing)
    assert len(entries) >= 3 and any(e != e_all for e, e_all in zip(expected, (x["keys"] for x in entries)))
    results = in_tools_venv("aws_argv.py", entries)["results"]
    assert [r["kept"] for r in results] == expected


def test_a_misspelt_aws_option_is_refused_by_the_same_parse():
    parsed = in_tools_venv("aws_argv.py", [["aws", "s3", "sync", "s3://a/b/", "/models/m", "--no-progess"]])
    assert parsed["results"][0]["exit"] != 0 and parsed["results"][0]["received"] == []


def test_the_kubeconfigs_token_command_parses_as_eks_get_token():
    """The platform's kubeconfig runs `aws eks get-token` (the deployer's own AWS CLI): cluster name and the global
    region and output options reach the command."""
    user = json.loads(kubeconfig_json("prod-cluster", "https://example", "Y2E=", region="eu-west-1"))["users"][0]
    exec_ = user["user"]["exec"]
    [result] = in_tools_venv("aws_argv.py", [[exec_["command"], *exec_["args"]]])["results"]
    assert result["exit"] == 0
    [received] = result["received"]
    assert received["command"] == "get-token" and received["args"]["cluster_name"] == "prod-cluster"
    assert (received["globals"]["region"], received["globals"]["output"]) == ("eu-west-1", "json")


# --- every program has its version --------------------------------------------------------------------------------


def test_every_program_a_container_runs_has_the_version_its_image_carries_in_the_catalog(every_run):
    assert {r.program for r in every_run} >= {"hf", "aws", "vllm", "tritonserver", "envoy", "aws_signing_helper"}
    assert unrecorded(every_run) == []


def test_a_program_whose_version_is_not_recorded_is_named_with_its_image():
    runs = [Run("svc-prod: Job/x download", "vllm/vllm-openai:v0.99.0", ("hf", "download", "org/model")),
            Run("svc-prod: Deployment/y fetch", "public.ecr.aws/aws-cli/aws-cli:2.31.13", ("rclone", "copy")),
            Run("svc-prod: Deployment/z router", "ghcr.io/example/router:1.0", ("<entrypoint>",))]
    problems = unrecorded(runs)
    assert len(problems) == 3
    assert "hf in vllm/vllm-openai:v0.99.0" in problems[0] and "processes.yaml `tools`" in problems[0]
    assert "rclone in public.ecr.aws/aws-cli/aws-cli:2.31.13" in problems[1]
    assert "the entrypoint of ghcr.io/example/router:1.0" in problems[2]
