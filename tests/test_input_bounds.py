"""Every number a user gives is bounded, with a reason, and finite; tiny models plan; the break-it pass's reproducers
(issue 15) exit 2 naming the field, quickly and briefly, with no traceback.

Bounds are read from the JSON Schemas of the input models, so a new number field without `ge=`/`le=` (or without a
reason in `blueprints.core.bounds.REASONS`, for the files users write) fails here.
"""

from __future__ import annotations


import pytest
import yaml
from typer.testing import CliRunner

from blueprints.catalog.engines import engine_facts
from blueprints.core import bounds
from blueprints.contracts.blueprint import Blueprint
from blueprints.cli import app
from blueprints.contracts.platform import PlatformConfig
from blueprints.requirements.platform_file import PlatformRequirements
from blueprints.requirements.service import Requirements
from tests.conftest import EXAMPLES, ROOT, example_data, plan_env, requirements_with

runner = CliRunner()


def numbers(schema: dict) -> list[tuple[str, dict]]:
    """(property name, its schema) of every integer or number in a JSON Schema, through $refs, unions and lists."""
    defs = schema.get("$defs", {})
    found: list[tuple[str, dict]] = []
    seen: set[str] = set()

    def walk(node: object, name: str) -> None:
        if isinstance(node, list):
            for item in node:
                walk(item, name)
            return
        if not isinstance(node, dict):
            return
        ref = node.get("$ref")
        if ref:
            key = ref.rsplit("/", 1)[-1]
            if key not in seen:
                seen.add(key)
                walk(defs[key], key)
            return
        if node.get("type") in ("integer", "number"):
            found.append((name, node))
        for key, sub in node.get("properties", {}).items():
            walk(sub, key)
        # A model's own combinators (anyOf, oneOf, allOf, if/then) are its cross-field rules: they restate fields,
        # never bound them. A field's anyOf is its union (e.g. a number or null).
        unions = () if "properties" in node else ("anyOf", "oneOf")
        for key in (*unions, "items", "additionalProperties", "prefixItems"):
            if key in node:
                walk(node[key], name)
        for sub in node.get("patternProperties", {}).values():
            walk(sub, name)

    walk(schema, "(top level)")
    return found


def _bounded(node: dict) -> bool:
    if "const" in node or "enum" in node:
        return True
    return ("minimum" in node or "exclusiveMinimum" in node) and ("maximum" in node or "exclusiveMaximum" in node)


@pytest.mark.parametrize("model", [Requirements, PlatformRequirements], ids=["requirements", "platform.yaml"])
def test_every_number_in_a_file_users_write_has_bounds_and_a_reason(model):
    found = numbers(model.model_json_schema())
    assert found  # the walk reaches the numbers
    unbounded = [name for name, node in found if not _bounded(node)]
    assert unbounded == []
    assert sorted({name for name, _ in found} - set(bounds.REASONS)) == []


@pytest.mark.parametrize("model", [Blueprint, PlatformConfig], ids=["blueprint", "platform config"])
def test_every_number_in_a_stack_config_has_bounds(model):
    found = numbers(model.model_json_schema())
    assert len(found) > 5
    assert [name for name, node in found if not _bounded(node)] == []


def test_replica_counts_stay_within_int32_and_the_limit_one_stack_scales_to():
    schema = Blueprint.model_json_schema()
    for name, node in numbers(schema):
        assert node.get("maximum", node.get("exclusiveMaximum", 0)) <= max(bounds.INT32_MAX, 1e12), name
    assert bounds.MAX_REPLICAS <= bounds.INT32_MAX


@pytest.mark.parametrize("params_b", [0.002, 1e-6])
def test_a_tiny_model_plans_its_weights_rounded_up_never_to_zero(params_b):
    """A model of 2M (or 1,000) parameters once failed validation: its weights rounded to 0 GiB."""
    req = requirements_with(model={"id": None, "name": "tiny", "architecture": {
        "params_b": params_b, "layers": 2, "hidden_size": 128, "attention_heads": 2, "kv_heads": 2, "head_dim": 64},
        "max_context_tokens": 2048})
    bp = plan_env(req, "prod")
    assert bp.model.weights_gib == bounds.MIN_WEIGHTS_GIB  # 2M x 2 bytes = 0.004 GiB, rounded up
    assert bp.compute.ephemeral_storage_gib_per_replica >= bp.model.weights_gib


def fails(args: list[str], *messages: str) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and len(result.output) < 10_000
    for message in messages:
        assert message in result.output, result.output
    return result.output


def _requirements(project, name: str, mutate) -> str:
    path = project / "stacks" / "requirements" / f"{name}.yaml"
    data = yaml.safe_load(path.read_text())
    mutate(data)
    path.write_text(yaml.safe_dump(data))
    return str(path)


def _traffic(rate):
    return lambda d: d["traffic"].update(peak_requests_per_s=rate)


@pytest.mark.parametrize("service", ["chat-assistant", "prototype-summarizer"])  # vLLM and SageMaker
@pytest.mark.parametrize(("rate", "message"), [
    (5e-324, "traffic.peak_requests_per_s: Input should be greater than or equal to 0.001 (got 5e-324): a peak"),
    (1e-310, "traffic.peak_requests_per_s: Input should be greater than or equal to 0.001 (got 1e-310)"),
    (1e307, "traffic.peak_requests_per_s: Input should be less than or equal to 100000 (got 1e+307)"),
    (1e12, "traffic.peak_requests_per_s: Input should be less than or equal to 100000 (got 1000000000000.0)"),
])
def test_a_peak_rate_out_of_bounds_exits_2_naming_the_field(project, service, rate, message):
    """5e-324 divided by zero, 1e-310 gave an infinite cost per token, 1e307 an infinite cost line (SageMaker: an
    OverflowError), 1e12 planned 44.6 billion replicas."""
    before = sorted(p.read_bytes() for p in (project / "stacks").glob("*.yaml"))
    fails(["plan", _requirements(project, service, _traffic(rate)), "--as-of", "2026-12-01"], message)
    assert sorted(p.read_bytes() for p in (project / "stacks").glob("*.yaml")) == before


def test_a_peak_times_traffic_scale_out_of_bounds_names_the_environment(project):
    def tiny_dev(d):
        d["traffic"]["peak_requests_per_s"] = 0.002
        d["environments"]["dev"]["traffic_scale"] = 0.1
    fails(["plan", _requirements(project, "chat-assistant", tiny_dev)],
          "environments.dev.traffic_scale: llama-3-1-8b's peak here is 0.002 x 0.1 = 0.0002 requests/s, outside "
          "0.001-100,000")


def test_a_peak_needing_more_replicas_than_one_stack_scales_to_exits_2_naming_the_environment(project):
    def busiest(d):
        d["traffic"]["peak_requests_per_s"] = bounds.MAX_PEAK_REQUESTS_PER_S  # a replica serves a few requests/s
        del d["budget"]
    fails(["plan", _requirements(project, "chat-assistant", busiest), "--no-policy"],
          "environments.prod: no option meeting the SLO stays within replica-limit",
          f"more than one stack scales to ({bounds.MAX_REPLICAS:,}: one autoscaler and node pool)",
          f"split the load over several services (at most {bounds.MAX_REPLICAS:,} replicas each)")


def test_an_unknown_measured_instance_type_names_its_field(project):
    def measured(d):
        d["model"].update(measured_latency_ms=5, measured_instance_type="c9z.huge")
    fails(["plan", _requirements(project, "edge-classifier", measured)],
          "model.measured_instance_type: unknown instance type 'c9z.huge'")


def test_a_models_entry_is_named_by_index_and_name(project):
    fails(["plan", _requirements(project, "search-relevance", lambda d: d["models"][1].update(max_context_tokens=1))],
          "models[1] (reranker).max_context_tokens: Input should be greater than or equal to 64 (got 1)")


def test_duplicate_model_names_name_each_entry(project):
    output = fails(["plan", _requirements(project, "search-relevance", lambda d: d["models"][1].update(
        name="embedder"))])
    assert "models[0] (embedder).name: model name 'embedder' is used by another entry too" in output
    assert "models[1] (embedder).name: model name 'embedder' is used by another entry too" in output
    assert "(top level)" not in output


def _edit_stack(project, stack: str, edit) -> None:
    path = project / "stacks" / f"Pulumi.{stack}.yaml"
    data = yaml.safe_load(path.read_text())
    edit(data["config"]["servingblueprints:blueprint"])
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def _set(section: str, **values):
    def edit(bp):
        node = bp
        for key in section.split("."):
            node = node[int(key)] if isinstance(node, list) else node[key]
        node.update(values)
    return edit


@pytest.mark.parametrize(("stack", "edit", "message"), [
    ("edge-classifier-prod", _set("compute", cpu_per_replica=0.001),
     "compute.cpu_per_replica: Input should be greater than or equal to 1 (got 0.001)"),
    ("search-relevance-prod", _set("engine.models.0", name="renamed"),
     "engine.models[0] (renamed).name: 'renamed' is not a served model"),
    ("prototype-summarizer-pilot", _set("engine", image="docker.io/library/nginx:1.27"),
     "engine.image: should be an ECR image URI"),
    ("chat-assistant-prod", _set("compute", instance_type="ml.g5.xlarge"),
     "compute.instance_type: ml.g5.xlarge is a SageMaker hosting type; archetype vllm-gpu runs on EC2"),
    ("chat-assistant-prod", _set("compute", instance_type="p5.48xlarge", gpu="h100"),
     "compute.gpus_per_node: gpus_per_node=1 but p5.48xlarge has 8"),
    ("partner-api-prod", _set("compute", gpu="h100"), "compute.gpu: gpu='h100' but g6e.xlarge has 'l40s'"),
    ("prototype-summarizer-pilot", _set("autoscaling", max_replicas=100_000),
     "autoscaling.max_replicas: Input should be less than or equal to 1000"),
    ("chat-assistant-prod", _set("compute", memory_gib_per_replica=0.01),
     "compute.memory_gib_per_replica: memory_gib_per_replica=0.01 is below the"),
    ("chat-assistant-prod", _set("compute", ephemeral_storage_gib_per_replica=1),
     "compute.ephemeral_storage_gib_per_replica: ephemeral_storage_gib_per_replica=1 is below the"),
    ("rag-assistant-generator-prod", _set("models.0", catalog_id="llama-3.1-70b"),  # a 70B on one 48 GB L40S
     "models[0] (generator).catalog_id: this model's weights leave no room for a KV cache on 1x NVIDIA L40S"),
    ("chat-assistant-prod", _set("engine", max_model_len=64),
     "engine.max_model_len: max_model_len=64 is shorter than a mean request (1500 tokens"),
    ("chat-assistant-prod", _set("engine", max_num_seqs=100_000, max_num_batched_tokens=100_000),
     "engine.max_num_seqs: Input should be less than or equal to 65536"),
    ("chat-assistant-prod", _set("engine", max_num_seqs=5000, max_num_batched_tokens=8192),
     "engine.max_num_seqs: max_num_seqs=5000 is more sequences than the KV cache holds at 1500 tokens each"),
    ("chat-assistant-prod", _set("startup", node_provisioning_s=0, image_pull_s=0, weights_download_s=0,
                                 model_load_s=0), "startup.weights_download_s: Input should be greater than or "
     "equal to 1"),
    ("chat-assistant-prod", _set("startup", node_provisioning_s=0),
     "startup.node_provisioning_s: is 0 exactly on an edge cluster"),
    ("chat-assistant-prod", _set("predictions", monthly_cost_usd=0),
     "predictions.monthly_cost_usd: a stack on EC2 or SageMaker capacity costs more than $0"),
    ("partner-api-prod", _set("predictions.cost_lines.0", usd_per_hour=0.5, monthly_usd=365),
     "predictions.cost_lines[0].usd_per_hour: the first cost line is the g6e.xlarge nodes at the catalog's"),
    ("chat-assistant-prod", _set("tags", owner="ml\nplatform"), "tags.owner: should be a tag value"),
    ("chat-assistant-prod", _set("models.0", source_uri="hf://../.."),
     "models[0] (llama-3-1-8b).source_uri: should be `s3://bucket/prefix/`"),
    ("support-sentiment-prod", _set("platform", kubernetes_version="1.99"),
     "platform.kubernetes_version: unknown Kubernetes version '1.99'; EKS versions in the catalog: 1.31"),
    ("edge-classifier-prod", _set("network.exposure", allowed_cidrs=["10.0.0.0/8"]),
     "network.exposure.allowed_cidrs: traefik cannot restrict an Ingress to source CIDRs"),
    ("support-sentiment-prod", _set("models.0", format="safetensors"),
     "models[0] (ticket-sentiment).format: format safetensors: ONNX Runtime loads ONNX files only"),
    ("rag-assistant-retrieval-prod", _set("engine.models.0", backend="pytorch"),
     "engine.models[0] (embedder).backend: backend pytorch but embedder is onnx, which Triton loads with the "
     "onnxruntime backend"),
    ("rag-assistant-generator-prod", _set("engine", quantization="awq"),
     "engine.quantization: quantization='awq' but generator's bf16 weights load on NVIDIA L40S with quantization "
     "null"),
    ("partner-api-prod", _set("engine", dtype="float32"),
     "engine.dtype: dtype='float32' but llama-3-1-8b's bf16 weights run on NVIDIA L40S as 'bfloat16'"),
    ("prototype-summarizer-pilot", _set("engine", tensor_parallel_degree=8),
     "engine.tensor_parallel_degree: tensor_parallel_degree=8 is more than the 1 GPU(s) of ml.g6e.2xlarge"),
    ("prototype-summarizer-pilot", _set("engine", initial_instance_count=1000),
     "engine.initial_instance_count: initial_instance_count=1000 is outside the autoscaling range 1-1"),
    ("rag-assistant-retrieval-prod", _set("engine", http_port=8001),
     "engine.grpc_port: grpc_port=8001 is also http_port"),
    ("edge-classifier-prod", _set("compute", replicas=50),
     "compute.replicas: replicas=50 but the edge cluster's 3 owned node(s) hold 1 each (3 in all)"),
    ("edge-classifier-prod", _set("roles_anywhere", acm_pca_arn="not-an-arn"),
     "roles_anywhere.acm_pca_arn: should be an ACM Private CA ARN"),
    ("edge-classifier-prod", _set("roles_anywhere", certificate_common_name="edge\nprod"),
     "roles_anywhere.certificate_common_name: should be a certificate CN: one line"),
    ("rag-assistant-generator-prod", _set("pipeline", stacks=["rag-assistant-generator-prod"] * 2),
     "pipeline.stacks: ['rag-assistant-generator-prod', 'rag-assistant-generator-prod'] names a stack twice"),
    ("rag-assistant-generator-prod", _set("pipeline.stages.1", rounds=100),
     "pipeline.stages[1].rounds: rounds=100 is more than calls_per_request=20"),
    ("support-sentiment-prod", _set("autoscaling", metric="made_up_metric"),
     "autoscaling.metric: 'made_up_metric' is not a scaling signal of onnx-cpu (its engine onnxruntime scales on cpu)"),
    ("support-sentiment-prod", _set("autoscaling", target=1e9),
     "autoscaling.target: target=1e+09 % of the CPU request (= limit) is never reached"),
    ("support-sentiment-prod", _set("storage", retain_on_delete=False),
     "storage.retain_on_delete: a production stack keeps its model store when destroyed"),
    ("edge-classifier-prod", _set("network.exposure", ingress_class_name=None),
     "network.exposure.ingress_class_name: via ingress: name the IngressClass"),
    ("prototype-summarizer-pilot", _set("autoscaling", min_replicas=0),
     "autoscaling.min_replicas: a SageMaker real-time endpoint variant keeps at least one instance"),
    ("chat-assistant-prod", _set("models.0", sha256="a" * 64),
     "models[0] (llama-3-1-8b).sha256: an https:// source comes with its sha256, and only an https:// source has "
     "one"),
    ("chat-assistant-prod", _set("models.0", source_kms_key_arn="arn:aws:kms:us-east-1:123456789012:key/"
                                                                  "0b5c7e4a-1d2f-4c3b-9a8e-7f6d5c4b3a21"),
     "models[0] (llama-3-1-8b).source_kms_key_arn: a source key decrypts an s3:// source only"),
    ("partner-api-prod", _set("engine.lora", max_lora_rank=24),
     "engine.lora.max_lora_rank: max_lora_rank=24 is not one vLLM accepts (1, 8, 16, 32, 64, 128, 256, 320, 512"),
], ids=["onnx-cpu-0.001", "triton-renamed-model", "sagemaker-non-ecr", "ml-type-on-eks", "p5-gpus-per-node-1",
        "h100-on-l40s", "sagemaker-max-replicas", "memory-0.01", "ephemeral-1", "70b-on-one-l40s", "max-model-len-64",
        "max-num-seqs-100000", "max-num-seqs-beyond-kv", "zero-startup", "zero-node-start", "monthly-cost-0",
        "cost-line-price",
        "newline-in-tag", "hf-dot-dot", "kubernetes-1.99", "ingress-cidrs-traefik",
        "safetensors-on-onnx-runtime", "triton-backend-for-format", "vllm-quantization", "vllm-dtype",
        "sagemaker-tp-beyond-gpus", "sagemaker-initial-count", "triton-ports", "edge-replicas-beyond-owned-nodes",
        "roles-anywhere-pca-arn", "roles-anywhere-cn-newline", "pipeline-stack-twice", "pipeline-rounds",
        "unknown-scaling-metric", "cpu-target-beyond-100", "production-store-deleted",
        "ingress-without-class", "sagemaker-min-0", "sha256-on-hf-source", "source-key-on-hf-source",
        "lora-slot-rank"])
def test_a_hand_edited_stack_config_exits_2_naming_the_field(project, stack, edit, message):
    _edit_stack(project, stack, edit)
    fails(["preview", stack], f"servingblueprints:blueprint.{message}")


def test_numbers_are_finite_everywhere():
    data = example_data()
    data["slo"]["ttft_p95_ms"] = float("nan")
    with pytest.raises(ValueError, match="finite number"):
        Requirements.model_validate(data)


@pytest.mark.parametrize("model", ["llama-3.1-70b", "llama-3.1-8b"])
def test_a_trickle_of_traffic_plans_a_scaling_target_of_at_least_one_running_request(model):
    """Found by the schema-generated fuzz: 0.001 requests/s of 4-token prompts left nothing running at the peak, and
    the planner crashed on a scaling target of 0 (a target below one request would scale out at the first one)."""
    req = requirements_with(model={"id": model, "weights_uri": "s3://models/llama/"}, budget={},
                            traffic={"peak_requests_per_s": 0.001, "mean_input_tokens": 4, "mean_output_tokens": 1},
                            environments={"dev": {"region": "us-west-2"}})
    bp = plan_env(req, "dev")
    assert bp.autoscaling.metric == engine_facts(bp.engine.kind).signal("running")  # whichever engine plans it
    assert bp.autoscaling.target == 1.0


def test_a_hand_edited_platform_config_with_an_unknown_kubernetes_version_exits_2(project):
    """kubernetes-validate has no schemas for it: the preview once ended in an IndexError traceback."""
    path = project / "stacks" / "Pulumi.platform-prod-us-east-1.yaml"
    data = yaml.safe_load(path.read_text())
    data["config"]["servingblueprints:platform"]["kubernetes_version"] = "1.20"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    fails(["preview", "platform-prod-us-east-1"],
          "servingblueprints:platform.kubernetes_version: unknown Kubernetes version '1.20'")
