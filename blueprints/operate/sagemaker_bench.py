"""`blueprint benchmark` of a SageMaker endpoint: the same client (`vllm bench serve` from the catalog's pinned vLLM
image, `defaults.VLLM_IMAGE`) on the machine that runs the command, through the signing proxy on loopback
(`blueprints.operate.sagemaker`). A SageMaker endpoint has no cluster next to it: the client runs in Docker with the
host's network (`--network host`, Linux), so the proxy on 127.0.0.1 is reachable; each run's budget is its duration
twice plus `PER_RUN_OVERHEAD_S`. The client's network path to the endpoint is part of what it measures: run it from
the endpoint's region (an EC2 instance or a CI runner there).
"""

from __future__ import annotations

import fnmatch
import json
import subprocess
from pathlib import Path
from typing import Any, Callable

from blueprints.contracts.blueprint import Blueprint
from blueprints.core import defaults
from blueprints.core.errors import BenchmarkError, DeployedStackError, read_text_file
from blueprints.core.yamlio import load_json
from blueprints.operate import benchmark as bench
from blueprints.operate.prompts import PROMPTS_DIR_IN_POD, PROMPTS_FILE
from blueprints.contracts.benchmark_result import VllmBenchRun

#: The client's backend and path: the OpenAI chat schema LMI answers on /invocations.
BACKEND, ENDPOINT = "openai-chat", "/v1/chat/completions"
#: Seconds `docker pull` of the client image may take (about 10 GB).
PULL_TIMEOUT_S = 3600
#: Most tokenizer files copied (a model prefix holds a dozen small files besides the weights).
MAX_TOKENIZER_FILES = 64
#: Stand-ins of a dry run.
DRY_RUN_PORT, DRY_RUN_TOKENIZER, DRY_RUN_RESULTS = "<proxy-port>", "<tokenizer-dir>", "<results-dir>"
#: Stands in for the prompts file in the client's format (written to the run's temporary folder) in a dry run.
DRY_RUN_PROMPTS = "<prompts-dir>"


def docker_commands(bp: Blueprint, settings: bench.BenchmarkSettings, *, port: int | str, tokenizer_dir: str,
                    results_dir: str, prompts_dir: str | None = None,
                    image: str = defaults.VLLM_IMAGE) -> list[list[str]]:
    """One `docker run` of `vllm bench serve` per rate: non-root, read-only root filesystem, the tokenizer mounted
    read-only, results to `results_dir`; requests to the signing proxy at 127.0.0.1:`port`. With `--prompts`, the
    folder holding them in the client's format (`write_prompts`) is bind-mounted read-only at the path the client
    reads."""
    if (settings.prompts is None) != (prompts_dir is None):
        raise ValueError("prompts_dir goes with the settings' prompts")
    prompts = ["-v", f"{prompts_dir}:{PROMPTS_DIR_IN_POD}:ro"] if prompts_dir is not None else []
    commands = []
    for run in range(len(settings.rates)):
        commands.append([
            "docker", "run", "--rm", "--network", "host", "--user", f"{bench.RUN_AS}:{bench.RUN_AS}", "--read-only",
            "--tmpfs", "/tmp", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
            "-e", "HOME=/tmp", "-e", "HF_HUB_OFFLINE=1", "-e", "VLLM_NO_USAGE_STATS=1", "-e", "DO_NOT_TRACK=1",
            "-v", f"{tokenizer_dir}:{bench.TOKENIZER_DIR}:ro", "-v", f"{results_dir}:{bench.RESULTS_DIR_IN_POD}",
            *prompts,
            "--entrypoint", "vllm", image, "bench", "serve",
            *bench.client_args(settings, run, base_url=f"http://127.0.0.1:{port}", backend=BACKEND,
                               endpoint=ENDPOINT, model=bp.model.name)])
    return commands


def write_prompts(settings: bench.BenchmarkSettings, folder: Path) -> str:
    """Write the replayed prompts in the client's format to `folder/PROMPTS_FILE` (readable by the client's UID);
    the folder to bind-mount."""
    assert settings.prompts is not None
    folder.mkdir(exist_ok=True)
    path = folder / PROMPTS_FILE
    path.write_text(settings.prompts.custom_jsonl, encoding="utf-8")
    folder.chmod(0o755)
    path.chmod(0o644)
    return str(folder)


def fetch_tokenizer(s3: Any, weights_uri: str, dest: Path) -> list[str]:
    """Copy the tokenizer files (`bench.TOKENIZER_INCLUDES`, never the weights) of the model's store prefix to
    `dest`; their names."""
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, _, prefix = weights_uri.removeprefix("s3://").partition("/")
    copied: list[str] = []
    try:
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix,
                                                              PaginationConfig={"MaxItems": 1000})
        for page in pages:
            for obj in page.get("Contents", []):
                name = obj["Key"][len(prefix):]
                if "/" in name or not any(fnmatch.fnmatch(name, p) for p in bench.TOKENIZER_INCLUDES) or \
                        any(fnmatch.fnmatch(name, p) for p in bench.TOKENIZER_EXCLUDES):
                    continue
                if len(copied) >= MAX_TOKENIZER_FILES:
                    raise BenchmarkError(f"{weights_uri}: more than {MAX_TOKENIZER_FILES} tokenizer files")
                s3.download_file(bucket, obj["Key"], str(dest / name))
                copied.append(name)
    except (ClientError, BotoCoreError) as exc:
        raise DeployedStackError(f"cannot read the tokenizer from {weights_uri} ({exc}): the benchmark needs "
                                 "s3:ListBucket and s3:GetObject on the model store prefix") from None
    if not copied:
        raise BenchmarkError(f"{weights_uri}: no tokenizer files ({', '.join(bench.TOKENIZER_INCLUDES)})")
    return copied


def run_commands(commands: list[list[str]], *, image: str, budget_s: float, results: Path,
                 log: Callable[[str], None], runner: Callable[..., Any] = subprocess.run,
                 observe: Callable[[int | None], None] | None = None) -> list[VllmBenchRun]:
    """Pull the client image, run each command (at most `budget_s` each), read each run's JSON; `observe(run)` is
    called before and after each run (the autoscaler's record, `blueprints.operate.scaling`)."""
    try:
        runner(["docker", "pull", image], check=True, timeout=PULL_TIMEOUT_S, capture_output=True)
    except FileNotFoundError:
        raise DeployedStackError("docker is not on PATH: a SageMaker benchmark runs vllm bench serve in the pinned "
                                 f"vLLM image ({image}) on this machine") from None
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        raise DeployedStackError(f"`docker pull {image}` failed: {exc}") from None
    runs = []
    for i, command in enumerate(commands):
        log(f"run {i + 1}/{len(commands)}: {' '.join(command[-40:])[:200]}")
        if observe is not None:
            observe(i)
        try:
            runner(command, check=True, timeout=budget_s, capture_output=True)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            raise BenchmarkError(f"run {i + 1} of the sweep failed: {exc}") from None
        if observe is not None:
            observe(i)
        path = results / bench.result_file(i)
        try:
            runs.append(VllmBenchRun.model_validate(load_json(read_text_file(path, BenchmarkError, "result"))))
        except (BenchmarkError, json.JSONDecodeError) as exc:
            raise BenchmarkError(f"run {i + 1} wrote no result ({path}: {exc})") from None
    return runs
