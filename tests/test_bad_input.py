"""Bad input found by trying to break the CLI: each gives exit 2, one message naming the file and field, and no
file written. One case per finding."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml
from typer.testing import CliRunner

from blueprints.catalog import load_catalog
from blueprints.cli import app
from blueprints.contracts.stackconfig import read_stack_config
from tests.conftest import CHAT_EXAMPLE, EXAMPLES, ROOT, example_data

runner = CliRunner()
#: The instance type chat-assistant-prod plans on (the bundled stack config is what `plan` writes, `plan --check`)
#: and its vCPUs in the catalog.
CHAT_PROD_TYPE = read_stack_config(ROOT / "stacks" / "Pulumi.chat-assistant-prod.yaml").compute.instance_type
CHAT_PROD_VCPUS = load_catalog().instance(CHAT_PROD_TYPE).vcpus


@pytest.fixture()
def project(tmp_path, monkeypatch):
    shutil.copy(ROOT / "__main__.py", tmp_path / "__main__.py")
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    shutil.copytree(EXAMPLES, tmp_path / "stacks" / "requirements")
    shutil.copytree(ROOT / "policies" / "config", tmp_path / "policies" / "config")
    monkeypatch.chdir(tmp_path)
    assert runner.invoke(app, ["plan", "stacks/requirements/chat-assistant.yaml",
                                       "--as-of", "2026-12-01"]).exit_code == 0
    return tmp_path


def fails(args: list[str], *messages: str) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    for message in messages:
        assert message in result.output, result.output
    return result.output


def write_requirements(project, mutate) -> str:
    data = example_data()
    data["service"] = "chat-draft"  # a draft planned from elsewhere may not redeclare a service of the project
    mutate(data)
    path = project / "stacks" / "requirements" / "bad.yaml"  # a draft of its own service, in the requirements folder
    path.parent.mkdir(exist_ok=True)
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_a_plan_that_would_overwrite_another_services_stack_is_refused(project):
    stack = project / "stacks" / "Pulumi.chat-assistant-dev.yaml"
    before = stack.read_text()
    path = write_requirements(project, lambda d: d.update(service="chat", environments={
        "assistant-dev": {"region": "us-west-2"}}))
    # Refused before anything is written: the project's requirements files are checked for stack names together.
    fails(["plan", path], "both plan stack 'chat-assistant-dev'", "chat-assistant.yaml",
          "rename a service or an environment")
    assert stack.read_text() == before


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda d: d["slo"].update(latency_p95_ms=5), "slo.latency_p95_ms / latency_p99_ms apply to non-generative"),
    (lambda d: d["model"].update(format="onnx"), "format=onnx cannot be served by vLLM"),
    (lambda d: d["environments"]["prod"].update(region="xx-fake-9"), "unknown AWS region 'xx-fake-9'"),
    (lambda d: d["traffic"].update(peak_requests_per_s=float("inf")), "traffic.peak_requests_per_s"),
    (lambda d: d.update(owner="   "), "owner: should be a tag value"),
    (lambda d: d.update(owner="x" * 300), "owner: String should have at most 256 characters"),
    (lambda d: d["operations"].update(kubernetes_version="1.99"), "operations.kubernetes_version"),
    (lambda d: d["model"].update(id="llama-9-999b"), "model.id: unknown model id 'llama-9-999b'; did you mean"),
    (lambda d: d["traffic"].update(shared_prefix_tokens=1300),
     "traffic.shared_prefix_tokens: shared_prefix_tokens=1300 is above mean_input_tokens=1200"),
    (lambda d: d["traffic"].update(sessions={"turns": 9}),
     "traffic.sessions.turns: sessions.turns=9 conversations resending 300-token answers cannot average"),
    (lambda d: d["traffic"].update(sessions={"turns": 1}), "traffic.sessions.turns"),
])
def test_requirements_the_plan_would_silently_misread_are_refused(project, mutate, message):
    fails(["plan", write_requirements(project, mutate)], message)
    assert not (project / "stacks" / "Pulumi.chat-assistant-staging.yaml").exists()


def test_a_latency_slo_on_a_classifier_must_be_request_latency(project):
    data = yaml.safe_load((EXAMPLES / "edge-classifier.yaml").read_text())
    data["slo"] = {"ttft_p95_ms": 1, "itl_p95_ms": 1}
    data["service"] = "edge-draft"
    (project / "stacks" / "requirements" / "edge.yaml").write_text(yaml.safe_dump(data))
    fails(["plan", "stacks/requirements/edge.yaml"], "slo.ttft_p95_ms / itl_p95_ms apply to text generation")


def test_top_level_traffic_next_to_models_is_refused(project):
    data = yaml.safe_load((EXAMPLES / "search-relevance.yaml").read_text())
    data["traffic"] = {"peak_requests_per_s": 5}
    (project / "stacks" / "requirements" / "estate.yaml").write_text(yaml.safe_dump(data))
    fails(["plan", "stacks/requirements/estate.yaml"], "top-level `traffic` goes with `model`")


@pytest.mark.parametrize(("path", "value", "message"), [
    (("engine", "port"), 99999, "engine.port: Input should be less than or equal to 65535"),
    (("compute", "cpu_per_replica"), 500,
     f"cpu_per_replica=500 exceeds the {CHAT_PROD_VCPUS} vCPUs of {CHAT_PROD_TYPE}: the pod can never be scheduled"),
    (("engine", "max_model_len"), 10_000_000, "engine.max_model_len: Input should be less than or equal to 1048576"),
    (("engine", "max_model_len"), 100_000, "engine.max_model_len: max_model_len=100000 exceeds the model's "
                                           "max_context_tokens=8192"),
    (("models", 0, "source_uri"), "ftp://x", "models[0] (llama-3-1-8b).source_uri: should be `s3://bucket/prefix/`"),
    (("predictions", "itl_p95_ms"), 500, "predictions.itl_p95_ms: itl_p95_ms=500 misses slo.itl_p95_ms=50"),
    (("service",), "other", "the file must be Pulumi.other-prod.yaml"),
    (("compute", "instance_type"), "zz.mega", "compute.instance_type: unknown instance type 'zz.mega'"),
    (("engine", "tensor_parallel_size"), 3, "engine.tensor_parallel_size: tensor_parallel_size=3 must equal "
                                            "compute.gpus_per_replica=1"),
])
def test_a_stack_config_edited_into_nonsense_exits_2(project, path, value, message):
    _edited_stack_fails(project, "chat-assistant-prod", path, value, message)


@pytest.mark.parametrize(("path", "value", "message"), [
    (("router", "port"), 9000, "router.port: router.port=9000 must be the engine's port 8000"),
    (("router", "routing_logic"), "kvaware", "router.routing_logic: Input should be 'prefixaware' or 'session'"),
    (("router", "image"), "ghcr.io/x/router", "router.image"),
    (("router", "replicas"), 1, "router.replicas: Input should be greater than or equal to 2"),
    (("autoscaling", "min_replicas"), 0, "router: a service that scales to zero has no router"),
])
def test_a_router_edited_into_nonsense_exits_2(project, path, value, message):
    # rag-assistant's generator declares a shared prefix: its committed prod stack has the prefix-aware router.
    for name in ("rag-assistant-generator-prod", "platform-prod-us-east-1"):
        shutil.copy(ROOT / "stacks" / f"Pulumi.{name}.yaml", project / "stacks" / f"Pulumi.{name}.yaml")
    _edited_stack_fails(project, "rag-assistant-generator-prod", path, value, message)


def _edited_stack_fails(project, name: str, path, value, message) -> None:
    stack = project / "stacks" / f"Pulumi.{name}.yaml"
    data = yaml.safe_load(stack.read_text())
    node = data["config"]["servingblueprints:blueprint"]
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    stack.write_text(yaml.safe_dump(data, sort_keys=False))
    fails(["preview", name], message)


def test_files_that_are_not_utf8_text_exit_2(project):
    binary = project / "binary.bin"
    binary.write_bytes(b"service: caf\xe9\n\x00\xff")
    fails(["plan", str(binary)], "the requirements file is not UTF-8 text")
    fails(["preview", "chat-assistant-prod", "--policy-config", str(binary)], "the policy config is not UTF-8 text")
    fails(["preview", "chat-assistant-prod", "--baseline", str(binary)], "the baseline report is not UTF-8 text")
    fails(["stacks", "--changed", str(binary)], "the changed-files list is not UTF-8 text")
    shutil.copy(binary, project / "stacks" / "Pulumi.broken-dev.yaml")
    fails(["preview", "broken-dev"], "the stack config is not UTF-8 text")


def test_a_file_larger_than_any_input_is_refused_before_it_is_read_whole(project):
    """A 1 GiB file (sparse: zeros, as /dev/zero gives) is refused after its first 16 MiB, not read into memory."""
    from blueprints.core.errors import MAX_TEXT_FILE_BYTES

    huge = project / "huge.yaml"
    with huge.open("wb") as file:
        file.truncate(1 << 30)
    fails(["plan", str(huge)], f"the requirements file is larger than {MAX_TEXT_FILE_BYTES // 1024 // 1024} MiB")
    fails(["stacks", "--changed", str(huge)], "the changed-files list is larger than 16 MiB")


def test_line_ends_are_read_as_newlines_and_byte_offsets_name_the_byte(tmp_path):
    from blueprints.core.errors import BlueprintError, read_text_file

    crlf = tmp_path / "crlf.txt"
    crlf.write_bytes(b"a: 1\r\nb: 2\rc: 3\n")
    assert read_text_file(crlf, BlueprintError, "file") == crlf.read_text() == "a: 1\nb: 2\nc: 3\n"
    late = tmp_path / "late.txt"
    late.write_bytes(b"x" * 20_000 + b"\xff")
    with pytest.raises(BlueprintError, match=r"not UTF-8 text \(byte 20000\)"):
        read_text_file(late, BlueprintError, "file")


@pytest.mark.parametrize(("config", "message"), [
    ({"gpu-quota": {"enforcementLevel": "mandatroy"}}, "gpu-quota.enforcementLevel: 'mandatroy' is not one of"),
    ({"gpu-quota": {"maxGpus": "lots"}}, "gpu-quota.maxGpus: 'lots' is not of type 'integer'"),
    ({"gpu-qouta": {"maxGpus": 8}}, "gpu-qouta: no such policy; did you mean gpu-quota?"),
    ({"images-pinned": "sometimes"}, "images-pinned: 'sometimes' is not an enforcement level"),
])
def test_a_policy_config_with_wrong_values_exits_2(project, config, message):
    (project / "policy.json").write_text(json.dumps(config))
    fails(["preview", "chat-assistant-prod", "--policy-config", "policy.json"], message)


@pytest.mark.parametrize(("args", "message"), [
    (["--model", "llama-3.1-8b", "--gpu", "h100", "--tensor-parallel", "16"], "the largest h100 node has 8 GPUs"),
    (["--model", "resnet-50", "--gpu", "h100"], "resnet-50 is a vision model"),
    (["--model", "llama-3.1-8b", "--gpu", "h100", "--input-tokens", "200000"], "exceed llama-3.1-8b's context"),
])
def test_estimate_refuses_questions_the_model_cannot_answer(args, message):
    fails(["estimate", *args], message)


def test_stacks_in_a_missing_folder_exits_2(project):
    fails(["stacks", "--stacks-dir", "nope"], "--stacks-dir nope: no such folder")


def test_schema_never_overwrites_a_requirements_file(project):
    before = (project / "stacks" / "requirements" / "chat-assistant.yaml").read_text()
    fails(["schema", "--out", "stacks/requirements/chat-assistant.yaml"], "name a .json file")
    assert (project / "stacks" / "requirements" / "chat-assistant.yaml").read_text() == before
    assert CHAT_EXAMPLE.read_text() == before


def test_a_key_given_twice_is_refused_not_last_one_wins(project):
    (project / "dup.yaml").write_text(CHAT_EXAMPLE.read_text() + "service: other-svc\n")
    fails(["plan", "dup.yaml"], "dup.yaml: not valid YAML at line", "duplicate key 'service'")
    assert not list((project / "stacks").glob("Pulumi.other-svc-*.yaml"))


def _alias_bomb(levels: int = 9) -> str:
    """1.2 KB of YAML whose aliases expand to 9**levels strings."""
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines)


def test_an_alias_bomb_is_refused_quickly_with_a_short_message(project):
    """A 1.2 KB alias bomb assigned to `owner:` once hung `plan` for minutes and printed megabytes."""
    import time

    text = (project / "stacks" / "requirements" / "chat-assistant.yaml").read_text()
    path = project / "drafts" / "bomb.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(_alias_bomb() + "\n" + text.replace("owner: ml-platform", "owner: *l8"))
    start = time.perf_counter()
    output = fails(["plan", str(path)], "bomb.yaml", "expands to more than 200,000 YAML nodes")
    assert time.perf_counter() - start < 5 and len(output) < 2000


def test_a_recursive_alias_and_an_oversized_document_are_refused(project):
    path = project / "drafts" / "loop.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text("service: &s [*s]\n")
    fails(["plan", str(path)], "loop.yaml", "refers to a node that contains it")
    path.write_text("service: x\nowner: " + "y" * (3 * 1024 * 1024) + "\n")
    output = fails(["plan", str(path)], "loop.yaml", "larger than 2 MiB")
    assert len(output) < 2000


def test_a_huge_bad_value_is_quoted_as_a_short_excerpt(project):
    path = write_requirements(project, lambda d: d.update(owner="x" * 100_000 + "\n"))
    output = fails(["plan", path], "owner", "(100,004 characters)")  # the repr: quotes and an escaped newline
    assert len(output) < 3000


@pytest.mark.parametrize("written, fix", [
    ("1e30", "YAML reads 1e30 as text even without quotes (an exponent needs a decimal point and a sign): write "
             "1.0e+30"),
    ('"12"', "write it without quotes"),
])
def test_a_number_yaml_read_as_text_gets_the_fix_that_yaml_reads_as_a_number(project, written, fix):
    """PyYAML (YAML 1.1) reads an unquoted 1e30 as a string: the fix is the form it reads as a number, not 'remove
    the quotes' there were none of; and the fix given is read as a number (here refused by the bound instead)."""
    data = example_data()
    data["service"] = "chat-draft"
    path = project / "stacks" / "requirements" / "bad.yaml"
    text = yaml.safe_dump(data).replace("peak_requests_per_s: 20", f"peak_requests_per_s: {written}")
    assert f"peak_requests_per_s: {written}" in text
    path.write_text(text)
    fails(["plan", str(path)], "traffic.peak_requests_per_s", fix)
    path.write_text(text.replace(f"peak_requests_per_s: {written}", "peak_requests_per_s: 1.0e+30"))
    fails(["plan", str(path)], "traffic.peak_requests_per_s", "100,000 requests/s per model")


@pytest.mark.parametrize(("vpc", "words"), [
    # pydantic's bare "Field required" becomes what to add, with what the field holds (its description).
    ({"vpc_id": "vpc-0abc12345def67890"}, "platforms.prod-us-east-1.existing_vpc.private_subnet_ids: missing: add "
     "`platforms.prod-us-east-1.existing_vpc.private_subnet_ids` (the private subnets' ids, in >= 2 availability "
     "zones)"),
    # A pattern in words, not the regular expression.
    ({"vpc_id": "vpc-1", "private_subnet_ids": ["subnet-0abc1234", "subnet-0abc1235"]},
     "platforms.prod-us-east-1.existing_vpc.vpc_id: should be a VPC id such as vpc-0abc12345def67890 (vpc- and 8-17 "
     "lowercase hex digits) (got 'vpc-1')"),
])
def test_a_bad_platform_yaml_says_what_to_write_not_pydantics_words(tmp_path, monkeypatch, vpc, words):
    folder = tmp_path / "stacks" / "requirements"
    folder.mkdir(parents=True)
    shutil.copy(EXAMPLES / "chat-assistant.yaml", folder / "chat-assistant.yaml")
    (folder / "platform.yaml").write_text(yaml.safe_dump({"platforms": {"prod-us-east-1": {"existing_vpc": vpc}}}))
    monkeypatch.chdir(tmp_path)
    output = fails(["plan", "stacks/requirements/chat-assistant.yaml", "--as-of", "2026-12-01", "--no-policy"],
                   "platform.yaml")
    text = " ".join(output.split())
    assert words in text and "Field required" not in text and "should match" not in text, text
