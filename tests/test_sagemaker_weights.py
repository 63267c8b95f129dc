"""SageMaker weights: an `s3://` source is copied into the stack's encrypted model store (a Lambda copy with a role of
its own), the model reads the store, and a declared source key is decrypted by the copy alone."""

from __future__ import annotations

import importlib.util
import json

import pytest
import yaml
from typer.testing import CliRunner

from blueprints.cli import app
from components.weights_copy import HANDLER_FILE, TIMEOUT_S
from tests.blueprint_builders import derive, run_program, sagemaker_blueprint
from tests.conftest import ROOT, example_data, plan_env, requirements_with

SOURCE = "s3://labs-models/mistral-7b/"
SOURCE_KEY = "arn:aws:kms:us-east-1:210987654321:key/0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b"


def _s3_source(chat_prod, *, key: str | None = None, cmk: bool = False):
    bp = sagemaker_blueprint(chat_prod)
    model = {**bp.model.model_dump(mode="json"), "source_uri": SOURCE, "source_kms_key_arn": key}
    return derive(bp, models=[model], storage={"customer_managed_kms": cmk})


def _policy(run, name_suffix: str) -> dict:
    [record] = [r for r in run.of_type("aws:iam/rolePolicy:RolePolicy") if r.name.endswith(name_suffix)]
    return json.loads(record.inputs["policy"])


def _statement(policy: dict, sid: str) -> dict:
    [found] = [s for s in policy["Statement"] if s["Sid"] == sid]
    return found


@pytest.fixture(scope="module")
def copied(chat_prod):
    bp = _s3_source(chat_prod)
    return bp, run_program(bp)


def test_an_s3_source_is_copied_into_the_store_and_the_model_reads_the_store(copied):
    bp, run = copied
    payload = json.loads(run.one("aws:lambda/invocation:Invocation").inputs["input"])
    assert payload["source_bucket"] == "labs-models" and payload["source_prefix"] == "mistral-7b/"
    assert payload["destination_prefix"] == f"models/{bp.model.name}/"
    [source] = run.one("aws:sagemaker/model:Model").inputs["primaryContainer"]["modelDataSource"]["s3DataSources"]
    assert source["s3Uri"] == f"s3://{payload['destination_bucket']}/{payload['destination_prefix']}"
    assert payload["destination_bucket"].startswith(f"{bp.stack}-weights-bucket")


def test_the_endpoint_role_reads_only_the_store_prefix_never_the_source(copied):
    bp, run = copied
    policy = _policy(run, "-endpoint-execution-policy")
    read = _statement(policy, "ReadModelData")
    assert len(read["Resource"]) == 1 and read["Resource"][0].endswith(f"/models/{bp.model.name}/*")
    assert "labs-models" not in json.dumps(policy)


def test_the_copy_role_reads_the_source_prefix_and_writes_only_the_model_prefix(copied):
    bp, run = copied
    policy = _policy(run, "-weights-copy-policy")
    assert _statement(policy, "ReadSource0")["Resource"] == ["arn:aws:s3:::labs-models/mistral-7b/*"]
    assert _statement(policy, "ListSource0")["Condition"] == {"StringLike": {"s3:prefix": ["mistral-7b/*"]}}
    write = _statement(policy, "WriteModelWeights")
    assert len(write["Resource"]) == 1 and write["Resource"][0].endswith(f"/models/{bp.model.name}/*")
    assert "s3:PutObject" in write["Action"]
    assert _statement(policy, "WriteOwnLogs")["Resource"] == [
        f"arn:aws:logs:{bp.region}:*:log-group:/aws/lambda/{bp.stack}-copy-{bp.model.name}:*"]
    assert not [s for s in policy["Statement"] if "kms:Decrypt" in s["Action"]]  # no key declared, store on aws/s3
    [role] = [r for r in run.of_type("aws:iam/role:Role") if r.name.endswith("-weights-copy-role")]
    trust = json.loads(role.inputs["assumeRolePolicy"])
    assert trust["Statement"][0]["Principal"] == {"Service": "lambda.amazonaws.com"}


def test_a_declared_source_key_is_decrypted_by_the_copy_role_through_s3_only(chat_prod):
    bp = _s3_source(chat_prod, key=SOURCE_KEY)
    run = run_program(bp)
    decrypt = _statement(_policy(run, "-weights-copy-policy"), "DecryptSource0")
    assert decrypt["Action"] == ["kms:Decrypt"] and decrypt["Resource"] == [SOURCE_KEY]
    assert decrypt["Condition"] == {"StringEquals": {"kms:ViaService": "s3.us-east-1.amazonaws.com"}}
    assert SOURCE_KEY not in json.dumps(_policy(run, "-endpoint-execution-policy"))


def test_a_customer_managed_store_key_is_used_by_both_roles(chat_prod):
    run = run_program(_s3_source(chat_prod, cmk=True))
    [key] = run.of_type("aws:kms/key:Key")
    copy = _statement(_policy(run, "-weights-copy-policy"), "EncryptModelWeights")
    assert set(copy["Action"]) == {"kms:GenerateDataKey", "kms:Decrypt"}
    endpoint = _statement(_policy(run, "-endpoint-execution-policy"), "DecryptModelData")
    assert endpoint["Action"] == ["kms:Decrypt"]
    assert copy["Resource"] == endpoint["Resource"] and endpoint["Resource"][0].startswith("arn:aws:kms:")
    assert key.name.endswith("-weights-key")


def test_the_model_waits_for_the_copy(copied):
    _, run = copied
    invocation = run.one("aws:lambda/invocation:Invocation")
    model = run.one("aws:sagemaker/model:Model")
    assert invocation.urn in model.dependencies
    function = run.one("aws:lambda/function:Function").inputs
    assert function["timeout"] == TIMEOUT_S and function["handler"] == "copy_weights.handler"
    assert function["code"]["archive"]["copy_weights.py"]["file"] == HANDLER_FILE.name


def test_an_hf_source_has_no_copy_and_the_deploy_warns(chat_prod):
    run = run_program(sagemaker_blueprint(chat_prod))
    assert run.of_type("aws:lambda/function:Function") == [] and run.of_type("aws:lambda/invocation:Invocation") == []
    assert any("is not copied by the stack" in w for w in run.warnings)


def test_the_plan_says_where_the_model_reads_its_weights():
    bp = plan_env(requirements_with("prototype-summarizer"), "pilot")
    [line] = [r for r in bp.rationale if r.startswith("weights: ")]
    assert bp.model.source_uri in line and f"models/{bp.model.name}/" in line
    assert "one-off server-side copy" in line and "never the source" in line
    keyed = plan_env(requirements_with("prototype-summarizer", model={"weights_kms_key_arn": SOURCE_KEY}), "pilot")
    assert keyed.model.source_kms_key_arn == SOURCE_KEY
    assert f"it decrypts {bp.model.source_uri} with {SOURCE_KEY}" in next(
        r for r in keyed.rationale if r.startswith("weights: "))


def test_a_kubernetes_sync_job_decrypts_a_declared_source_key(chat_prod):
    model = {**chat_prod.model.model_dump(mode="json"), "source_uri": SOURCE, "source_kms_key_arn": SOURCE_KEY}
    run = run_program(derive(chat_prod, models=[model]))
    decrypt = _statement(_policy(run, "-weights-sync-identity-policy"), "DecryptSource0")
    assert decrypt["Resource"] == [SOURCE_KEY]


@pytest.mark.parametrize(("weights_uri", "key", "needle"), [
    ("hf://mistralai/Mistral-7B-Instruct-v0.3", SOURCE_KEY, "applies to an s3:// weights_uri"),
    ("s3://labs-models/mistral-7b/", "arn:aws:kms:us-east-1:210987654321:alias/models", "model.weights_kms_key_arn"),
])
def test_a_bad_source_key_exits_2_naming_the_field(tmp_path, weights_uri, key, needle):
    data = example_data("prototype-summarizer")
    data["model"].update(weights_uri=weights_uri, weights_kms_key_arn=key)
    path = tmp_path / "req.yaml"
    path.write_text(yaml.safe_dump(data))
    result = CliRunner().invoke(app, ["plan", str(path), "--no-policy", "--out-dir", str(tmp_path)])
    assert result.exit_code == 2 and needle in result.output and "Traceback" not in result.output


# --- the copy function itself (boto3's managed copy against a fake client) -----------------------------------------


class _FakeS3:
    def __init__(self, keys: dict[str, int]):
        self.keys, self.copies = keys, []

    def get_paginator(self, name):
        assert name == "list_objects_v2"
        keys = self.keys

        class _Pages:
            def paginate(self, Bucket, Prefix):  # noqa: N803 (boto3's parameter names)
                items = [{"Key": k, "Size": v} for k, v in sorted(keys.items()) if k.startswith(Prefix)]
                return [{"Contents": items[:2]}, {"Contents": items[2:]}, {}]
        return _Pages()

    def copy(self, source, bucket, key, Config):  # noqa: N803
        self.copies.append((source["Bucket"], source["Key"], bucket, key, Config.multipart_threshold))


def _handler_module():
    spec = importlib.util.spec_from_file_location("copy_weights", HANDLER_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_copy_keeps_relative_keys_across_pages_and_uses_multipart_parts():
    mod = _handler_module()
    s3 = _FakeS3({"m/config.json": 10, "m/model-00001.safetensors": 6 * 1024**3, "m/sub/": 0,
                  "m/tokenizer.json": 5, "other/x": 1})
    result = mod.copy_prefix(s3, source_bucket="src", source_prefix="m/", destination_bucket="store",
                             destination_prefix="models/mistral/")
    assert result == {"objects": 3, "bytes": 10 + 6 * 1024**3 + 5}
    assert sorted(c[3] for c in s3.copies) == ["models/mistral/config.json", "models/mistral/model-00001.safetensors",
                                               "models/mistral/tokenizer.json"]
    assert {c[4] for c in s3.copies} == {mod.PART_BYTES} and mod.PART_BYTES < 5 * 1024**3


def test_the_copy_of_an_empty_prefix_fails_the_deploy():
    mod = _handler_module()
    with pytest.raises(RuntimeError, match="no objects under s3://src/missing/"):
        mod.copy_prefix(_FakeS3({}), source_bucket="src", source_prefix="missing/", destination_bucket="store",
                        destination_prefix="models/x/")
    with pytest.raises(ValueError, match="destination_prefix"):
        mod.handler({"source_bucket": "a", "source_prefix": "b/", "destination_bucket": "c"}, None)


def test_the_handler_file_imports_nothing_of_this_project():
    text = HANDLER_FILE.read_text()
    assert "blueprints" not in text and "components" not in text.replace("components.weights_copy", "")
    assert (ROOT / "components" / "lambda_src" / HANDLER_FILE.name).exists()
