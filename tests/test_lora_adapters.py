"""LoRA adapters (`model.adapters`): planned onto vllm-gpu with their GPU slots counted out of the KV cache, rendered as
the vLLM 0.24.0 flags (parsed back as vLLM parses them), synced into the model store and copied onto each pod, refused
where they cannot be served, and reviewed as a change that restarts every pod."""

from __future__ import annotations

import argparse
import copy
import json

import pytest
import yaml
from pydantic import ValidationError
from typer.testing import CliRunner

from blueprints.catalog import load_catalog
from blueprints.cli import app
from blueprints.catalog.lora import load_lora_catalog
from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.lora import LORA_MOUNT, adapter_gib, adapters_volume_gib, lora_engine
from blueprints.contracts.memory import GIB, LoraSlots, kv_bytes_per_token, kv_cache_tokens, lora_bytes_per_gpu, \
    lora_elements_per_rank
from blueprints.core import bounds
from blueprints.core.errors import format_validation_error
from blueprints.requirements.adapters import LoraAdapter
from blueprints.requirements.model import Precision
from blueprints.requirements.service import Requirements
from blueprints.review.changes import review_changes
from blueprints.review.manifests import validate_manifest
from blueprints.review.report.changes import review_lines
from components.weights_sync import WeightsSync, WeightsSyncArgs
from tests.blueprint_builders import manifests, pod_spec, run_program
from blueprints.review.preview import run_under_mocks
from tests.conftest import example_data, plan_env

LLAMA_8B = load_catalog().model("llama-3.1-8b").architecture


@pytest.fixture(scope="module")
def partner_prod() -> Blueprint:
    """The bundled partner API (two adapters, ranks 16 and 32), planned for prod."""
    return plan_env(Requirements.model_validate(example_data("partner-api")), "prod")


@pytest.fixture(scope="module")
def partner_run(partner_prod):
    return run_program(partner_prod)


def vllm_parser() -> argparse.ArgumentParser:
    """The LoRA flags as vLLM 0.24.0 declares them: --enable-lora a BooleanOptionalAction (engine/arg_utils.py:1303),
    --max-loras / --max-cpu-loras ints, --max-lora-rank one of `MaxLoRARanks` (config/lora.py:26), --lora-modules
    nargs "+" whose action keeps `name=path` items and REPLACES the list on each use (entrypoints/openai/cli_args.py:
    35-66)."""

    class LoRAParserAction(argparse.Action):
        def __call__(self, parser, namespace, values, option_string=None):
            modules = []
            for item in values:
                if "=" in item and "," not in item:
                    name, path = item.split("=")
                    modules.append((name, path))
                else:
                    parser.error(f"not name=path: {item}")
            setattr(namespace, self.dest, modules)

    parser = argparse.ArgumentParser(exit_on_error=False)
    parser.add_argument("model")
    parser.add_argument("--enable-lora", action=argparse.BooleanOptionalAction)
    parser.add_argument("--lora-modules", nargs="+", action=LoRAParserAction)
    parser.add_argument("--max-loras", type=int, default=1)
    parser.add_argument("--max-lora-rank", type=int, choices=[1, 8, 16, 32, 64, 128, 256, 320, 512], default=16)
    parser.add_argument("--max-cpu-loras", type=int)
    return parser


def vllm_container(run) -> dict:
    [container] = [c for c in pod_spec(run)["containers"] if c["name"] == "vllm"]
    return container


def test_two_adapters_render_lora_flags_vllm_parses_back(partner_run):
    args, _ = vllm_parser().parse_known_args(vllm_container(partner_run)["args"])
    assert args.enable_lora is True
    assert args.lora_modules == [("support-tone", "/adapters/support-tone"), ("sql-assist", "/adapters/sql-assist")]
    # Ranks 16 and 32: the smallest supported slot rank holding both is 32; one slot per adapter; both in host memory.
    assert (args.max_loras, args.max_lora_rank, args.max_cpu_loras) == (2, 32, 2)
    assert args.max_cpu_loras >= args.max_loras  # vLLM refuses less (config/lora.py:112-116)


def test_the_adapters_are_copied_where_the_flags_point_even_though_the_weights_stream(partner_run, partner_prod):
    spec = pod_spec(partner_run)
    container = vllm_container(partner_run)
    assert "--load-format=runai_streamer" in container["args"]  # the base weights stream from the store
    [fetch] = spec["initContainers"]
    assert fetch["name"] == "fetch-adapters"
    pairs = list(zip(fetch["args"][::2], fetch["args"][1::2]))
    assert [dest for _, dest in pairs] == ["/adapters/support-tone", "/adapters/sql-assist"]
    assert all(src.startswith("s3://") and src.endswith(f"/models/{dest.rsplit('/', 1)[1]}/") for src, dest in pairs)
    assert {"name": "adapters", "mountPath": LORA_MOUNT, "readOnly": True} in container["volumeMounts"]
    [volume] = [v for v in spec["volumes"] if v["name"] == "adapters"]
    # rank 16 + rank 32 at fp32 on Llama-3.1-8B: 48 x 2,886,144 x 4 B = 0.516 GiB, +10 % + 1 GiB -> 2 GiB.
    assert volume["emptyDir"]["sizeLimit"] == "2Gi" == f"{adapters_volume_gib(LLAMA_8B, partner_prod.engine.lora)}Gi"
    assert fetch["resources"]["requests"]["ephemeral-storage"] == "2Gi"
    # The replica's disk request holds the adapters beside its scratch (10 GiB streamed -> 12).
    assert partner_prod.compute.ephemeral_storage_gib_per_replica == 12
    [deployment] = [m for m in manifests(partner_run) if m["kind"] == "Deployment"]
    assert validate_manifest(deployment) == []


def test_each_adapter_has_a_sync_job_into_its_store_prefix_and_the_serving_role_reads_it(partner_run):
    jobs = {m["metadata"]["name"]: m for m in manifests(partner_run) if m["kind"] == "Job"}
    assert set(jobs) == {"partner-api-sync-llama-3-1-8b", "partner-api-sync-support-tone",
                         "partner-api-sync-sql-assist"}
    [copy_step] = jobs["partner-api-sync-sql-assist"]["spec"]["template"]["spec"]["containers"]
    assert copy_step["args"][0] == "s3://partner-finetunes-example/llama-3.1-8b/sql-assist/"
    assert copy_step["args"][1].endswith("/models/sql-assist/")
    sync_policy = next(r for r in partner_run.of_type("aws:iam/rolePolicy:RolePolicy") if "weights-sync" in r.name)
    assert "arn:aws:s3:::partner-finetunes-example/llama-3.1-8b/sql-assist/*" in sync_policy.inputs["policy"]
    serving = next(r for r in partner_run.of_type("aws:iam/rolePolicy:RolePolicy") if r.name.endswith("-serving-policy"))
    statements = json.loads(serving.inputs["policy"])["Statement"]
    read = [res for s in statements if "s3:GetObject" in s["Action"] for res in s["Resource"]]
    assert any(r.endswith("/models/support-tone/*") for r in read) and any(r.endswith("/models/sql-assist/*")
                                                                           for r in read)


def test_an_hf_adapter_is_downloaded_by_its_own_job(partner_prod):
    data = partner_prod.model_dump(mode="json")
    data["engine"]["lora"]["adapters"][0]["source_uri"] = "hf://example-org/llama-3.1-8b-support-tone"
    bp = Blueprint.model_validate(data)
    run = run_under_mocks(lambda: WeightsSync("sync", WeightsSyncArgs(blueprint=bp, bucket_name="store",
                                                                       hf_token="hf_x")), stack=bp.stack)
    [job] = [m for m in manifests(run) if m["kind"] == "Job" and m["metadata"]["name"].endswith("support-tone")]
    [download] = job["spec"]["template"]["spec"]["initContainers"]
    assert download["command"][:3] == ["hf", "download", "example-org/llama-3.1-8b-support-tone"]
    [upload] = job["spec"]["template"]["spec"]["containers"]
    assert upload["args"][1] == "s3://store/models/support-tone/"


def test_a_plan_without_adapters_renders_no_lora_flag_and_records_no_lora_key(chat_prod):
    assert chat_prod.engine.lora is None
    assert "lora" not in chat_prod.model_dump(mode="json")["engine"]
    run = run_program(chat_prod)
    assert not any(a.startswith("--enable-lora") or "lora" in a for a in vllm_container(run)["args"])
    assert all(c["name"] != "fetch-adapters" for c in pod_spec(run).get("initContainers", []))


def test_the_slot_memory_follows_vllms_buffers_for_llama_31_8b():
    # Per decoder layer, TP 1 (h 4096, q 4096, kv 1024, I 14336): qkv 3h + q + 2kv, o q + h, gate_up 2h + 2I,
    # down I + h = 81,920 per unit of rank; embed_tokens and lm_head add vocab + h each.
    per_layer = (3 * 4096 + 4096 + 2 * 1024) + (4096 + 4096) + (2 * 4096 + 2 * 14336) + (14336 + 4096)
    assert per_layer == 81_920
    assert lora_elements_per_rank(LLAMA_8B, 1) == 32 * per_layer + 2 * (4096 + 128_256)
    # One rank-16 slot of the decoder layers at BF16: 83.9 MB (the research's ~84 MB).
    assert 32 * per_layer * 16 * 2 == 83_886_080
    # TP 2 halves the sharded sides only: qkv 3h + 3072, o 2048 + h, gate_up 2h + 14336, down 7168 + h.
    assert lora_elements_per_rank(LLAMA_8B, 2) == 32 * (15_360 + 6_144 + 22_528 + 11_264) + 2 * (4096 + 128_256)
    two_slots = lora_bytes_per_gpu(LLAMA_8B, LoraSlots(2, 32), precision=Precision.BF16, tensor_parallel_size=1)
    graphs = load_lora_catalog().cuda_graph_extra_gib_per_gpu * GIB
    assert two_slots - graphs == 2 * 32 * 2_886_144 * 2
    fp32 = lora_bytes_per_gpu(LLAMA_8B, LoraSlots(2, 32), precision=Precision.FP32, tensor_parallel_size=1)
    assert fp32 - graphs == 2 * (two_slots - graphs)
    assert adapter_gib(LLAMA_8B, 16) == pytest.approx(16 * 2_886_144 * 4 / GIB)


def test_the_kv_cache_of_a_replica_with_adapters_is_smaller_by_their_slots(partner_prod):
    gpu = load_catalog().gpu(partner_prod.compute.gpu)
    slots = partner_prod.engine.lora.slots
    without = kv_cache_tokens(LLAMA_8B, gpu, precision=Precision.BF16, tensor_parallel_size=1)
    with_lora = kv_cache_tokens(LLAMA_8B, gpu, precision=Precision.BF16, tensor_parallel_size=1, lora=slots)
    lost = lora_bytes_per_gpu(LLAMA_8B, slots, precision=Precision.BF16, tensor_parallel_size=1)
    assert (without - with_lora) == pytest.approx(lost / kv_bytes_per_token(LLAMA_8B), abs=1)
    assert (without, with_lora) == (192_863, 183_819)
    # An FP8 cache (the same bytes hold twice the tokens) loses as many bytes, twice the tokens.
    fp8 = {lora: kv_cache_tokens(LLAMA_8B, gpu, precision=Precision.BF16, tensor_parallel_size=1,
                                 kv_cache_fp8=True, lora=lora) for lora in (None, slots)}
    assert (fp8[None] - fp8[slots]) == pytest.approx(lost / kv_bytes_per_token(LLAMA_8B, kv_cache_fp8=True), abs=1)
    assert (fp8[None], fp8[slots]) == (385_727, 367_639)
    # The plan's cache is the one at its KV-cache dtype (FP8 only where it is cheaper), with the slots taken out.
    planned = {"fp8": fp8[slots], "auto": with_lora}[partner_prod.engine.kv_cache_dtype]
    assert any(f"{planned:,} KV-cache tokens" in r for r in partner_prod.rationale)
    assert any(r.startswith("LoRA: 2 adapter(s) on llama-3-1-8b") and "1.10 GiB per GPU" in r
               for r in partner_prod.rationale)
    # ... and the plan fits: the served context within that smaller cache (the stack-config check re-validates it).
    assert partner_prod.engine.max_model_len <= planned
    Blueprint.model_validate(partner_prod.model_dump(mode="json"))


def test_a_stack_config_whose_slots_leave_no_room_for_the_context_is_refused(partner_prod):
    data = partner_prod.model_dump(mode="json")
    adapters = [{"name": f"tune-{i}", "source_uri": f"s3://partner-finetunes-example/tune-{i}/", "rank": 512}
                for i in range(bounds.MAX_LORA_ADAPTERS)]
    # 16 slots of rank 512: 16 x 512 x 2,886,144 x 2 B = 47.3 GB on a 48 GB L40S.
    data["engine"]["lora"] = {"adapters": adapters, "max_loras": 16, "max_lora_rank": 512, "max_cpu_loras": 16}
    data["compute"]["ephemeral_storage_gib_per_replica"] = 200  # room for their copies: only the GPU is short
    with pytest.raises(ValueError, match=r"this model's weights with 16 LoRA slot\(s\) of rank 512 leave no room for "
                       r"a KV cache on 1x NVIDIA L40S .*: vLLM fails to start; lower engine.lora.max_loras / "
                       r"max_lora_rank, or re-plan"):
        Blueprint.model_validate(data)
    data["compute"]["ephemeral_storage_gib_per_replica"] = 12
    with pytest.raises(ValueError, match=r"ephemeral_storage_gib_per_replica=12 is below the 108 GiB .* LoRA adapters"):
        Blueprint.model_validate(data)


@pytest.mark.parametrize(("lora", "message"), [
    ({"max_lora_rank": 24}, "engine.lora.max_lora_rank: max_lora_rank=24 is not one vLLM accepts"),
    ({"max_lora_rank": 16}, "engine.lora.adapters[1] (sql-assist).rank: adapter sql-assist has rank 32, above max_lora_rank=16"),
    ({"max_cpu_loras": 1}, "engine.lora.max_cpu_loras: max_cpu_loras=1 is below max_loras=2"),
    ({"max_loras": 3, "max_cpu_loras": 3}, "engine.lora.max_loras: max_loras=3 is more slots than the 2 adapters"),
    ({"adapters": [{"name": "llama-3-1-8b", "source_uri": "s3://partner-finetunes-example/a/", "rank": 8},
                   {"name": "b", "source_uri": "s3://partner-finetunes-example/b/", "rank": 8}]},
     "engine.lora.adapters[0] (llama-3-1-8b).name: adapter name 'llama-3-1-8b' is the base model's served name"),
], ids=["rank-not-supported", "adapter-above-slot", "cpu-below-gpu-slots", "more-slots-than-adapters",
        "adapter-named-as-base"])
def test_a_hand_edited_lora_section_is_refused_naming_its_field(partner_prod, lora, message):
    data = partner_prod.model_dump(mode="json")
    data["engine"]["lora"] = {**data["engine"]["lora"], **lora}
    with pytest.raises(ValidationError) as caught:
        Blueprint.model_validate(data)
    shown = format_validation_error(caught.value, source="Pulumi.partner-api-prod.yaml", data=data)
    assert message in shown, shown


def test_the_planner_takes_the_smallest_supported_slot_rank_and_caps_the_slots():
    adapters = [LoraAdapter(name=f"a{i}", uri=f"hf://org/a{i}", rank=r) for i, r in enumerate((4, 12, 8, 9, 2, 1))]
    lora = lora_engine(adapters)
    assert (lora.max_lora_rank, lora.max_loras, lora.max_cpu_loras) == (16, load_lora_catalog().default_max_loras, 6)
    assert lora_engine([LoraAdapter(name="big", uri="hf://org/big", rank=257)]).max_lora_rank == 320
    assert lora_engine(None) is None


def test_the_rank_bound_is_the_pinned_vllms_largest_slot_rank():
    assert bounds.MAX_LORA_RANK == load_lora_catalog().max_rank == 512


def test_an_adapter_change_is_reviewed_as_a_restart_of_every_pod(partner_prod, chat_prod):
    before = partner_prod.model_dump(mode="json")
    before["engine"].pop("lora")
    review = review_changes(partner_prod.stack, before, partner_prod)
    assert review.adapters is not None
    assert (review.adapters.added, review.adapters.removed) == (("support-tone", "sql-assist"), ())
    assert (review.adapters.slots_before, review.adapters.slots_after) == (None, "2 x rank 32")
    assert "every pod restarts" in review.adapters.message
    assert review.to_json()["adapters"]["restarts_pods"] is True
    assert ("note", review.adapters.message) in review_lines(review)
    changed = copy.deepcopy(partner_prod.model_dump(mode="json"))
    changed["engine"]["lora"]["adapters"][1]["source_uri"] = "s3://partner-finetunes-example/sql-assist-v2/"
    again = review_changes(partner_prod.stack, changed, partner_prod).adapters
    assert again is not None and again.changed == ("sql-assist",) and again.slots_before == again.slots_after
    # No adapter change, no adapter note (and a plan without adapters never has one).
    assert review_changes(partner_prod.stack, partner_prod.model_dump(mode="json"), partner_prod).adapters is None
    assert review_changes(chat_prod.stack, chat_prod.model_dump(mode="json"), chat_prod).adapters is None
    assert "adapters" not in review_changes(chat_prod.stack, chat_prod.model_dump(mode="json"), chat_prod).to_json()


# --- bad input: exit 2 naming the field, nothing written -------------------------------------------------------------

runner = CliRunner()



def _adapter(name: str, rank: int = 16) -> dict:
    return {"name": name, "uri": f"s3://partner-finetunes-example/{name}/", "rank": rank}


def _model(**changes):
    def edit(data):
        data["model"].update(changes)
    return edit


@pytest.mark.parametrize(("edit", "message"), [
    (_model(adapters=[_adapter("support-tone"), _adapter("sql-assist", 600)]),
     "model.adapters[1] (sql-assist).rank: Input should be less than or equal to 512 (got 600): a LoRA rank of 1 to "
     "512, the largest --max-lora-rank vLLM 0.24.0 serves"),
    (_model(adapters=[_adapter("support-tone"), _adapter("support-tone")]),
     "model.adapters[1] (support-tone).name: adapter name 'support-tone' is given twice"),
    (_model(adapters=[_adapter("llama-3-1-8b")]),
     "model.adapters[0] (llama-3-1-8b).name: adapter name 'llama-3-1-8b' is the base model's served name"),
    (_model(adapters=[{**_adapter("web"), "uri": "https://example.com/adapter.safetensors"}]),
     "model.adapters[0] (web).uri: should be `s3://bucket/prefix/`"),
    (_model(adapters=[_adapter(f"tune-{i}") for i in range(17)]),
     "model.adapters: List should have at most 16 items after validation, not 17"),
    (_model(id="mixtral-8x7b", weights_uri="hf://mistralai/Mixtral-8x7B-Instruct-v0.1", adapters=[_adapter("a")]),
     "model.adapters: adapters need a dense model with a known MLP width; this is a mixture-of-experts model"),
    (_model(id="bge-large-en-v1.5", task=None, weights_uri="hf://BAAI/bge-large-en-v1.5", adapters=[_adapter("a")]),
     "model.adapters: LoRA adapters are served by vLLM on a text-generation model; this model's task is embedding"),
    (lambda d: d["operations"].update(preference="managed"),
     "model.adapters: 2 LoRA adapter(s) need vLLM on the vllm-gpu archetype, and operations.preference=managed plans "
     "a SageMaker endpoint"),
], ids=["rank-above-512", "duplicate-name", "named-as-base", "https-source", "seventeen", "moe-base",
        "embedding-base", "managed-preference"])
def test_adapters_that_cannot_be_served_exit_2_naming_the_field(project, edit, message):
    data = example_data("partner-api")
    data["service"] = "lora-draft"
    edit(data)
    data["model"] = {k: v for k, v in data["model"].items() if v is not None}
    path = project / "stacks" / "requirements" / "lora-draft.yaml"
    path.write_text(yaml.safe_dump(data))
    result = runner.invoke(app, ["plan", str(path), "--as-of", "2026-12-01"])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert message in " ".join(result.output.split()), result.output
    assert not list((project / "stacks").glob("Pulumi.lora-draft-*.yaml"))


def test_adapters_with_operations_preference_any_plan_vllm_gpu_and_say_why(partner_prod):
    data = example_data("partner-api")
    data["operations"]["preference"] = "any"
    bp = plan_env(Requirements.model_validate(data), "prod")
    assert bp.archetype.value == "vllm-gpu" and bp.engine.lora == partner_prod.engine.lora
    assert any("LoRA adapters are served by vLLM on vllm-gpu only" in r and "preference=any" in r
               for r in bp.rationale)
