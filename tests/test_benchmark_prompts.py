"""`blueprint benchmark --prompts FILE.jsonl`: the user's own prompts replayed with vLLM 0.24.0's custom dataset,
mounted into the client (a ConfigMap for the Kubernetes Job, a bind mount for SageMaker's local client), checked where
they enter (exit 2 naming the file, the line and the field), never printed, logged or recorded: the result file keeps
the file's sha256, its line count and length statistics."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import statistics

import pytest
import yaml
from typer.testing import CliRunner

from blueprints.cli import app
from blueprints.contracts.benchmark_result import load_result, write_result
from blueprints.contracts.stackconfig import read_stack_config
from blueprints.core.errors import CalibrationError
from blueprints.operate import benchmark as bench
from blueprints.operate import prompts as replay
from blueprints.review.deployability.pod_security import pod_security_violations
from blueprints.review.manifests import validate_manifest
from tests.conftest import ROOT
from tests.test_benchmark import arg
from tests.test_verify import bare_env  # noqa: F401 (fixture)

STACK = "chat-assistant-prod"
SAGEMAKER = "prototype-summarizer-pilot"
#: In every prompt: never in any output or file the command writes.
SENTINEL = "ZQX-SECRET-PROMPT-7731"
RECORDED = ROOT / "tests" / "data" / "benchmark-results" / STACK / "2026-12-03.json"
runner = CliRunner()


def write_prompts(path, lines: list) -> None:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))


@pytest.fixture
def prompts_file(tmp_path):
    """40 requests: prompts and one-user-message chats, each with the sentinel, 100-139 output tokens."""
    path = tmp_path / "traffic.jsonl"
    lines = [{"prompt": f"{SENTINEL} question {i} " + "x" * i, "max_tokens": 100 + i} for i in range(30)]
    lines += [{"messages": [{"role": "user", "content": f"{SENTINEL} chat {i}"}], "max_tokens": 130 + i}
              for i in range(10)]
    write_prompts(path, lines)
    return path


def benchmark(*args: str):
    return runner.invoke(app, ["benchmark", *args])


def test_a_kubernetes_dry_run_mounts_the_prompts_from_a_configmap_and_runs_the_custom_dataset(bare_env, prompts_file):
    result = benchmark(STACK, "--dry-run", "--rates", "1,2", "--duration", "30", "--prompts", str(prompts_file))
    assert result.exit_code == 0, result.output
    assert SENTINEL not in result.output
    assert "your 40 prompt(s) from traffic.jsonl" in " ".join(result.stderr.split())
    objects = list(yaml.safe_load_all(result.stdout))
    [config_map] = [o for o in objects if o["kind"] == "ConfigMap"]
    job = objects[-1]
    assert job["kind"] == "Job" and objects.index(config_map) < len(objects) - 1  # created before the Job
    assert config_map["immutable"] is True and config_map["metadata"]["namespace"] == job["metadata"]["namespace"]
    assert config_map["data"][replay.PROMPTS_FILE].endswith("not printed>")
    pod = job["spec"]["template"]["spec"]
    [volume] = [v for v in pod["volumes"] if v["name"] == "prompts"]
    assert volume["configMap"]["name"] == config_map["metadata"]["name"]
    runs = [c for c in pod["initContainers"] if c["name"].startswith("rate-")]
    assert len(runs) == 2
    for c in runs:
        assert {"name": "prompts", "mountPath": replay.PROMPTS_DIR_IN_POD, "readOnly": True} in c["volumeMounts"]
        args = c["args"]
        assert arg(args, "--dataset-name") == "custom"
        assert arg(args, "--dataset-path") == f"{replay.PROMPTS_DIR_IN_POD}/{replay.PROMPTS_FILE}"
        assert arg(args, "--custom-output-len") == "-1"  # each line's output_tokens
        assert "--skip-chat-template" in args and "--ignore-eos" in args  # the server applies the template
        assert not [a for a in args if a.startswith("--random-")]
        assert arg(args, "--backend") == "openai-chat"
    for obj in objects:  # the ConfigMap and the Job with its volume: valid objects, Pod Security restricted
        assert validate_manifest(obj, kubernetes_version="1.35") == [], obj["kind"]
    assert pod_security_violations(pod, "restricted") == []


def test_the_configmap_holds_the_prompts_in_vllms_custom_format(bare_env, prompts_file):
    bp = read_stack_config(ROOT / "stacks" / f"Pulumi.{STACK}.yaml")
    settings = bench.benchmark_settings(bp, rates=[1], duration_s=30, prompts=prompts_file)
    from blueprints.operate.run import rendered

    sm, _ = rendered(STACK, bp, stacks_dir=ROOT / "stacks", program=ROOT / "__main__.py")
    config_map = bench.prompts_config_map(sm, settings, name="job")
    lines = [json.loads(line) for line in config_map["data"][replay.PROMPTS_FILE].splitlines()]
    # CustomDataset (datasets.py:2468): a `prompt` column, `output_tokens` read with --custom-output-len -1
    assert lines[0] == {"prompt": f"{SENTINEL} question 0 ", "output_tokens": 100}
    assert lines[30] == {"prompt": f"{SENTINEL} chat 0", "output_tokens": 130}
    assert all(set(line) == {"prompt", "output_tokens"} for line in lines) and len(lines) == 40


def test_a_sagemaker_dry_run_bind_mounts_the_prompts_read_only(bare_env, prompts_file):
    result = benchmark(SAGEMAKER, "--dry-run", "--prompts", str(prompts_file))
    assert result.exit_code == 0, result.output
    assert SENTINEL not in result.output
    for line in result.stdout.strip().splitlines():
        args = line.split()
        assert f"<prompts-dir>:{replay.PROMPTS_DIR_IN_POD}:ro" in args
        assert arg(args, "--dataset-name") == "custom" and "--skip-chat-template" in args
    assert "the client repeats prompts" in " ".join(result.stderr.split())  # 90 requests from 40 lines


def _bad(tmp_path, *lines) -> str:
    path = tmp_path / "bad.jsonl"
    write_prompts(path, list(lines))
    return str(path)


GOOD = {"prompt": f"{SENTINEL} fine", "max_tokens": 10}


@pytest.mark.parametrize(("lines", "where"), [
    ([GOOD, f'{{"prompt": "{SENTINEL}", "max_tokens": 5'], "line 2: line: not JSON"),
    ([GOOD, {"prompt": SENTINEL}], "line 2: max_tokens: missing"),
    ([GOOD, GOOD, {"prompt": SENTINEL, "max_tokens": 8192}], "line 3: max_tokens: expected an integer 1-8191 (the "
                                                             "stack's max_model_len is 8192"),
    ([{"prompt": SENTINEL, "max_tokens": "10"}], "line 1: max_tokens: expected an integer"),
    ([{"prompt": SENTINEL, "max_tokens": True}], "line 1: max_tokens: expected an integer"),
    ([{"max_tokens": 10}], "line 1: prompt/messages: give exactly one"),
    ([{"prompt": SENTINEL, "messages": [], "max_tokens": 10}], "line 1: prompt/messages: give exactly one"),
    ([{"prompt": "  ", "max_tokens": 10}], "line 1: prompt: expected a non-empty string"),
    ([{"prompt": SENTINEL, "max_tokens": 10, "temperature": 0}], "line 1: temperature: unknown key"),
    ([[SENTINEL]], "line 1: line: expected a JSON object"),
    ([{"messages": [{"role": "robot", "content": SENTINEL}], "max_tokens": 3}], "line 1: messages[0].role: expected "
                                                                                "one of system"),
    ([{"messages": [{"role": "user", "content": [{"type": "text", "text": SENTINEL}]}], "max_tokens": 3}],
     "line 1: messages[0].content: expected a non-empty string of Unicode text (text only"),
    ([{"messages": [{"role": "system", "content": SENTINEL}, {"role": "user", "content": "hi"}], "max_tokens": 3}],
     "line 1: messages: 2 message(s) (system, user): vLLM 0.24.0's custom dataset sends one user message per request"),
    ([], "file: no request"),
])
def test_a_bad_line_exits_2_naming_the_file_the_line_and_the_field_without_its_content(bare_env, tmp_path, lines,
                                                                                       where):
    path = _bad(tmp_path, *lines)
    result = benchmark(STACK, "--dry-run", "--prompts", path)
    assert result.exit_code == 2, result.output
    assert f"BenchmarkError: --prompts {path}: {where}" in " ".join(result.stderr.split())
    assert SENTINEL not in result.output and "Traceback" not in result.output


def test_sizes_are_bounded_where_the_file_enters(bare_env, tmp_path, monkeypatch):
    long_line = _bad(tmp_path, {"prompt": "y" * (replay.MAX_LINE_BYTES + 1), "max_tokens": 1})
    result = benchmark(STACK, "--dry-run", "--prompts", long_line)
    assert result.exit_code == 2 and "line 1: line: 1,048,6" in result.stderr
    monkeypatch.setattr(replay, "MAX_PROMPT_LINES", 3)
    result = benchmark(STACK, "--dry-run", "--prompts", _bad(tmp_path, *[GOOD] * 4))
    assert result.exit_code == 2 and "line 4: file: more than 3 requests" in result.stderr
    monkeypatch.setattr(replay, "MAX_PROMPTS_FILE_BYTES", 100)
    result = benchmark(STACK, "--dry-run", "--prompts", _bad(tmp_path, *[GOOD] * 4))
    assert result.exit_code == 2 and "the --prompts file is larger than 100 bytes, far more than any --prompts file " \
        "needs; replay a sample" in " ".join(result.stderr.split())
    result = benchmark(STACK, "--dry-run", "--prompts", str(tmp_path / "missing.jsonl"))
    assert result.exit_code == 2 and "missing.jsonl: cannot read --prompts file (No such file" in result.stderr


@pytest.mark.parametrize(("text", "where"), [
    # JSON the project's bounded reader refuses (blueprints.core.yamlio.load_json), not json.loads: no traceback.
    ('{"prompt": "a", "max_tokens": 1, "x": ' + "[" * 10_000 + "]" * 10_000 + "}",
     "line 1: line: not JSON (x[0][0][0][0][0]...[0][0][0][0]: mappings and lists nested more than 64 levels deep"),
    ('{"prompt": "a", "max_tokens": ' + "9" * 5000 + "}", "line 1: line: not JSON (max_tokens: a number of 5,000 "
                                                         "digits"),
    ('{"prompt": "", "prompt": "a", "max_tokens": 1}', "line 1: line: not JSON (duplicate key 'prompt'"),
    # Lone surrogate escapes decode to no Unicode text: refused where the line enters, not when the ConfigMap encodes.
    ('{"prompt": "a\\ud800", "max_tokens": 1}', "line 1: prompt: expected a non-empty string of Unicode text"),
    ('{"messages": [{"role": "user", "content": "\\udfff"}], "max_tokens": 1}',
     "line 1: messages[0].content: expected a non-empty string of Unicode text"),
])
def test_json_lines_out_of_bounds_or_not_text_exit_2_naming_the_line_and_field(bare_env, tmp_path, text, where):
    path = tmp_path / "bad.jsonl"
    path.write_text(text + "\n")
    result = benchmark(STACK, "--dry-run", "--prompts", str(path))
    assert result.exit_code == 2, result.output
    assert f"BenchmarkError: --prompts {path}: {where}" in " ".join(result.stderr.split())
    assert "Traceback" not in result.output


@pytest.mark.parametrize("kind", ["directory", "fifo", "device"])
def test_a_prompts_path_that_is_no_regular_file_is_refused_without_reading_it(bare_env, tmp_path, kind):
    """A FIFO would block the read forever and /dev/zero never ends: refused from the stat, as every input file."""
    import os

    path = tmp_path / "p.jsonl"
    if kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    result = benchmark(STACK, "--dry-run", "--prompts", str(path))
    assert result.exit_code == 2, result.output
    assert f"{path}: the --prompts file is a {kind if kind != 'fifo' else 'FIFO'}" in result.stderr


@pytest.mark.parametrize("raw", [
    b'\xef\xbb\xbf{"prompt": "a", "max_tokens": 5}\n{"prompt": "b", "max_tokens": 7}\n',  # a BOM (Windows editors)
    b'{"prompt": "a", "max_tokens": 5}\r\n{"prompt": "b", "max_tokens": 7}\r\n',  # CRLF
    b'{"prompt": "a", "max_tokens": 5}\r{"prompt": "b", "max_tokens": 7}\r',  # CR only (classic Mac)
])
def test_line_ends_and_a_byte_order_mark_are_read_as_text_editors_write_them(tmp_path, raw):
    path = tmp_path / "p.jsonl"
    path.write_bytes(raw)
    replayed = replay.load_prompts(path, max_model_len=8192)
    assert replayed.lines == 2 and replayed.record.max_tokens_mean == 6
    assert replayed.record.sha256 == hashlib.sha256(raw).hexdigest()
    assert [json.loads(line)["prompt"] for line in replayed.custom_jsonl.splitlines()] == ["a", "b"]


def test_prompts_beyond_what_a_configmap_holds_are_refused_for_the_job_with_the_fix(bare_env, tmp_path):
    # 3 lines of 400 KB: within every bound of the file, beyond the 1 MiB a ConfigMap holds
    path = _bad(tmp_path, *[{"prompt": "z" * 400_000, "max_tokens": 1}] * 3)
    result = benchmark(STACK, "--dry-run", "--prompts", path)
    assert result.exit_code == 2, result.output
    assert "more than the 1,048,576 a Kubernetes ConfigMap holds" in " ".join(result.stderr.split())
    assert "replay a sample of fewer or shorter prompts" in " ".join(result.stderr.split())
    assert benchmark(SAGEMAKER, "--dry-run", "--prompts", path).exit_code == 0  # a bind mount has no such limit


def test_several_messages_are_joined_only_when_approximate_and_the_result_says_so(bare_env, tmp_path):
    path = _bad(tmp_path, {"messages": [{"role": "system", "content": "be brief"},
                                        {"role": "user", "content": SENTINEL}], "max_tokens": 7}, GOOD)
    bp = read_stack_config(ROOT / "stacks" / f"Pulumi.{STACK}.yaml")
    settings = bench.benchmark_settings(bp, rates=[1], duration_s=30, prompts=tmp_path / "bad.jsonl",
                                        approximate=True)
    assert json.loads(settings.prompts.custom_jsonl.splitlines()[0]) == {"prompt": f"be brief\n\n{SENTINEL}",
                                                                         "output_tokens": 7}
    record = bench.settings_record(settings, backend="openai-chat", endpoint="/v1/chat/completions")
    assert record.prompts.messages_joined == 1
    assert record.approximations == ["--prompts: 1 of 2 request(s) have several chat messages, sent joined into "
                                     "one user message (vLLM 0.24.0's custom dataset sends one per request)"]
    result = benchmark(STACK, "--dry-run", "--approximate-workload", "--prompts", path)
    assert result.exit_code == 0 and "approximate workload" in result.stderr and SENTINEL not in result.output


def test_the_result_file_records_the_prompts_by_sha256_and_statistics_never_their_content(bare_env, prompts_file,
                                                                                          tmp_path):
    from blueprints.operate.run import BenchmarkRun, result_file

    bp = read_stack_config(ROOT / "stacks" / f"Pulumi.{STACK}.yaml")
    recorded = load_result(RECORDED)
    settings = bench.benchmark_settings(bp, rates=recorded.settings.request_rates,
                                        duration_s=int(recorded.settings.duration_s), prompts=prompts_file)
    written = result_file(BenchmarkRun(bp, settings, [], []), list(recorded.runs), client_image=bp.engine.image,
                          backend="openai-chat", endpoint="/v1/chat/completions", address="x",
                          date=dt.date(2026, 12, 7))
    path = tmp_path / "result.json"
    write_result(written, path)
    assert SENTINEL not in path.read_text() and "question" not in path.read_text()
    again = load_result(path)
    p = again.settings.prompts
    assert again.settings.dataset_name == "custom"
    assert p.sha256 == hashlib.sha256(prompts_file.read_bytes()).hexdigest() and p.file == "traffic.jsonl"
    assert p.lines == 40 and p.bytes == prompts_file.stat().st_size
    outputs = [100 + i for i in range(30)] + [130 + i for i in range(10)]
    assert p.max_tokens_mean == pytest.approx(statistics.mean(outputs), abs=0.05)
    assert (p.max_tokens_p50, p.max_tokens_p95) == (sorted(outputs)[19], sorted(outputs)[37])
    chars = sorted([len(f"{SENTINEL} question {i} ") + i for i in range(30)] + [len(f"{SENTINEL} chat {i}")
                                                                              for i in range(10)])
    assert (p.prompt_chars_p50, p.prompt_chars_p95) == (chars[19], chars[37])
    # a result without --prompts keeps the format it had: no prompts key, the random dataset
    plain = json.loads(RECORDED.read_text())
    assert "prompts" not in plain["settings"] and load_result(RECORDED).settings.dataset_name == "random"


def test_calibrate_refuses_a_result_measured_with_the_users_prompts(bare_env, prompts_file, tmp_path):
    from blueprints.operate.calibrate import _check_workload
    from blueprints.operate.workload import planned_workload

    bp = read_stack_config(ROOT / "stacks" / f"Pulumi.{STACK}.yaml")
    recorded = load_result(RECORDED)
    settings = bench.benchmark_settings(bp, rates=[1], duration_s=30, prompts=prompts_file)
    result = recorded.model_copy(update={"settings": recorded.settings.model_copy(update={
        "dataset_name": "custom", "prompts": settings.prompts.record})})
    with pytest.raises(CalibrationError, match="settings.prompts.*calibrate with `blueprint benchmark "
                                               "chat-assistant-prod` without --prompts"):
        _check_workload(tmp_path / "r.json", result, bp, planned_workload(bp))


def test_a_completions_stack_replays_prompts_raw_and_refuses_chat_messages(tmp_path):
    from blueprints.core.errors import BenchmarkError

    chat = read_stack_config(ROOT / "stacks" / f"Pulumi.{STACK}.yaml")
    model = chat.model.model_copy(update={"traffic": chat.model.traffic.model_copy(update={"api": "completions"})})
    bp = chat.model_copy(update={"models": [model]})
    path = tmp_path / "p.jsonl"
    write_prompts(path, [GOOD, {"messages": [{"role": "user", "content": SENTINEL}], "max_tokens": 3}])
    with pytest.raises(BenchmarkError) as refused:
        bench.benchmark_settings(bp, rates=[1], duration_s=30, prompts=path)
    assert f"--prompts {path}: line 2: messages: the stack serves the completions API" in str(refused.value)
    assert SENTINEL not in str(refused.value)
    write_prompts(path, [GOOD])
    settings = bench.benchmark_settings(bp, rates=[1], duration_s=30, prompts=path)
    args = bench.client_args(settings, 0, base_url="http://x:8080", backend=settings.workload.backend,
                             endpoint=settings.workload.endpoint, model=bp.model.name)
    assert (arg(args, "--backend"), arg(args, "--endpoint")) == ("openai", "/v1/completions")
    assert arg(args, "--dataset-name") == "custom" and "--skip-chat-template" in args  # the raw prompt
