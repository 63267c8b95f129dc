"""Our engines' command lines, parsed by each engine's own parser at the pinned version.

SGLang: the flags blueprints/catalog/engines.yaml records and the argv the component renders, by SGLang 0.5.14's own
parser from the release's source (tests/tools/sglang_argv.py: `ServerArgs.add_cli_args`, what `python3 -m
sglang.launch_server` builds, in the tools virtualenv, torch stood in; `$SGLANG_SOURCE`). Checked by: an argv of
every mapped setting, the host, metrics, API key, prefix-cache and LoRA flags parses to the values given; every
quantization value mapped parses; `fp8` as a KV cache dtype, vLLM's --max-num-seqs and a misspelt flag are refused;
no option takes its default, type or choices from a stand-in.

vLLM: the `vllm serve` argv of every bundled vLLM stack's rendered Deployment, by the `vllm` CLI's own parser from
vLLM 0.24.0's source (tests/tools/vllm_serve_argv.py, in the tools virtualenv, torch stood in; `$VLLM_SOURCE`).
Checked by: each parses to its stack config's settings (parallelism, batch limits, context, dtypes, memory, port,
served name, prefix caching, LoRA, the weights streamer); a misspelt flag and an unknown KV cache dtype exit 2.
"""

from __future__ import annotations

import pytest
import yaml

from tests.cli_tools import ROOT, engine_parse

#: Our generic setting -> a value a stack could give it (engines.yaml `values` maps it where the engine differs).
SAMPLE = {"served_model_name": "chat", "tensor_parallel_size": 2, "gpu_memory_utilization": 0.85,
          "max_model_len": 8192, "max_num_seqs": 64, "max_num_batched_tokens": 8192, "dtype": "bfloat16",
          "kv_cache_dtype": "fp8", "quantization": "fp8", "port": 8000}


def parse(argvs: list[list[str]]) -> dict:
    """`argvs` (each the container's argv) through SGLang 0.5.14's own parser (tests/tools/sglang_argv.py). Every
    option's default, type, choices and const are SGLang's: none comes from a stand-in for torch or the modules the
    parser does not call."""
    out = engine_parse("sglang", "sglang_argv.py", argvs)
    assert out["standin_options"] == {}
    return out


def dest(flag: str) -> str:
    return flag.removeprefix("--").replace("-", "_")


@pytest.fixture(scope="module")
def sglang() -> dict:
    [entry] = [e for e in yaml.safe_load((ROOT / "blueprints" / "catalog" / "engines.yaml").read_text())["engines"]
               if e["name"] == "sglang"]
    return entry


def test_every_flag_the_catalog_maps_parses_to_its_value(sglang):
    expected = {dest(sglang["model_flag"]): "/models/chat", dest(sglang["host"]["flag"]): sglang["host"]["value"],
                "enable_metrics": True, "api_key": "$(SGLANG_API_KEY)", "disable_radix_cache": True}
    argv = [*sglang["command"], sglang["model_flag"], "/models/chat", sglang["host"]["flag"], sglang["host"]["value"],
            sglang["metrics"]["enable_flag"], sglang["api_key"]["flag"], "$(SGLANG_API_KEY)",
            sglang["settings"]["prefix_caching_off"]["flag"]]
    for setting, value in SAMPLE.items():
        mapped = sglang["settings"][setting]
        engine_value = mapped.get("values", {}).get(value, value)
        argv += [mapped["flag"], str(engine_value)]
        expected[dest(mapped["flag"])] = engine_value
    lora = sglang["features"]["lora"]["flags"]
    argv += ["--enable-lora", "--lora-paths", "support=/adapters/support", "--max-loras-per-batch", "4",
             "--max-lora-rank", "16"]
    expected.update(enable_lora=True, lora_paths=["support=/adapters/support"], max_loras_per_batch=4,
                    max_lora_rank=16)
    assert {"--enable-lora", "--lora-paths", "--max-loras-per-batch", "--max-lora-rank"} <= set(lora)
    quantizations = [[*sglang["command"], sglang["model_flag"], "/m", "--quantization", q]
                     for q in sglang["settings"]["quantization"]["values"].values()]
    refused = [[*sglang["command"], sglang["model_flag"], "/m", "--kv-cache-dtype", "fp8"],
               [*sglang["command"], sglang["model_flag"], "/m", "--max-num-seqs", "64"]]
    out = parse([argv, *quantizations, *refused])
    assert out["sglang"] == sglang["version"]
    first, *rest = out["results"]
    assert first["exit"] == 0, first["error"]
    assert {k: first["args"][k] for k in expected} == expected
    assert first["args"]["schedule_policy"] == sglang["scheduler"]["schedule_policy_default"]
    assert all(r["exit"] == 0 for r in rest[:len(quantizations)]), [r["error"] for r in rest]
    kv, seqs = rest[len(quantizations):]
    assert kv["exit"] == 2 and "invalid choice: 'fp8'" in kv["error"]
    assert seqs["exit"] == 2 and "unrecognized arguments: --max-num-seqs" in seqs["error"]


def test_the_defaults_the_catalog_records_are_the_parsers(sglang):
    [result] = parse([[*sglang["command"], sglang["model_flag"], "/m"]])["results"]
    args = result["args"]
    assert args[dest(sglang["host"]["flag"])] == sglang["host"]["default"]
    assert args[dest(sglang["settings"]["port"]["flag"])] == sglang["settings"]["port"]["default"]
    assert args["disable_radix_cache"] is not sglang["scheduler"]["prefix_cache"]["default_on"]
    assert args["mem_fraction_static"] is None and args["max_running_requests"] is None  # derived at startup
    assert args["chunked_prefill_size"] is None and args["enable_metrics"] is False


def test_the_command_line_the_component_renders_parses_to_the_planned_settings():
    """`blueprints.engines.server_command`, what the SGLang Deployment runs, through SGLang's own parser."""
    from blueprints.catalog.engines import engine_facts
    from blueprints.contracts.sections import VllmEngine
    from blueprints.engines import server_command

    facts = engine_facts("sglang")
    engine = VllmEngine(kind="sglang", image=facts.image, tensor_parallel_size=2, gpu_memory_utilization=0.835,
                        max_model_len=8192, max_num_seqs=96, max_num_batched_tokens=8192, dtype="bfloat16",
                        quantization="fp8", kv_cache_dtype="fp8", shm_size_gib=2)
    command, args = server_command(engine, "chat")
    argv = [*command, *map(str, args)]
    out = parse([argv, [*argv, "--max-runing-requests", "4"]])
    assert out["sglang"] == facts.version
    result, misspelt = out["results"]
    assert result["exit"] == 0, result["error"]
    assert misspelt["exit"] == 2 and "unrecognized arguments: --max-runing-requests 4" in misspelt["error"]
    got = result["args"]
    assert (got["model_path"], got["served_model_name"], got["tp_size"], got["mem_fraction_static"]) == \
        ("/models/chat", "chat", 2, 0.835)
    assert (got["context_length"], got["max_running_requests"], got["chunked_prefill_size"]) == (8192, 96, 8192)
    assert (got["dtype"], got["kv_cache_dtype"], got["quantization"]) == ("bfloat16", "fp8_e4m3", "fp8")
    assert (got["host"], got["port"], got["enable_metrics"], got["api_key"]) == \
        ("0.0.0.0", 8000, True, "$(SGLANG_API_KEY)")


# --- vLLM ----------------------------------------------------------------------------------------------------------


def serve_argvs(previews: dict) -> dict[str, list[str]]:
    """`{stack: argv after vllm}` of every `vllm serve` container the bundled stacks' manifests run."""
    found = {}
    for stack, report in previews.items():
        for manifest in report.manifests:
            pod = ((manifest.get("spec") or {}).get("template") or {}).get("spec") or {}
            for c in pod.get("containers") or []:
                argv = [str(a) for a in (c.get("command") or []) + (c.get("args") or [])]
                if argv[:2] == ["vllm", "serve"]:
                    assert stack not in found, f"{stack}: two vllm serve containers"
                    found[stack] = argv[1:]
    return found


def test_every_bundled_vllm_stacks_server_command_line_parses_to_its_planned_settings(bundled_previews):
    """The `vllm serve` argv of each bundled vLLM stack's rendered Deployment, through vLLM 0.24.0's own parser
    (tests/tools/vllm_serve_argv.py: the `vllm` CLI's parser with its `serve` subcommand, from the release's source):
    exit 0 and every planned setting parsed to the stack config's value; a misspelt flag and a KV cache dtype vLLM
    does not offer exit 2, as in the image."""
    from blueprints.catalog.engines import engine_facts
    from blueprints.catalog.startup import load_startup_catalog
    from blueprints.contracts.lora import LORA_MOUNT
    from blueprints.contracts.weights import MODELS_MOUNT, streams_weights
    from components.weights_storage import MODELS_PREFIX

    planned = {s: r.blueprint for s, r in bundled_previews.items()
               if not r.is_platform and getattr(r.blueprint.engine, "kind", None) == "vllm"}
    argvs = serve_argvs(bundled_previews)
    assert planned and set(argvs) == set(planned)
    first = argvs[min(argvs)]
    misspelt = [*first, "--max-num-seqz=4"]
    bad_choice = [a if not a.startswith("--kv-cache-dtype=") else "--kv-cache-dtype=fp9" for a in first]
    out = engine_parse("vllm", "vllm_serve_argv.py", [*argvs.values(), misspelt, bad_choice])
    assert out["vllm"] == engine_facts("vllm").version
    # The one option whose parser value comes from a stand-in: the compilation config's default `backend` (the
    # platform's compile backend); no flag we render.
    assert set(out["standin_options"]) == {"--compilation-config"}
    *results, misspelt_result, bad_choice_result = out["results"]
    streamer = load_startup_catalog().weights.streamer
    for (stack, argv), result in zip(argvs.items(), results):
        assert result["exit"] == 0, (stack, result["error"][-500:])
        bp, got = planned[stack], result["args"]
        e, name = bp.engine, bp.model.name
        assert (got["subparser"], got["served_model_name"], got["host"], got["port"]) == \
            ("serve", [name], None, e.port), stack
        assert (got["tensor_parallel_size"], got["gpu_memory_utilization"], got["max_model_len"], got["max_num_seqs"],
                got["max_num_batched_tokens"]) == (e.tensor_parallel_size, e.gpu_memory_utilization,
                                                   e.max_model_len, e.max_num_seqs, e.max_num_batched_tokens), stack
        assert (got["dtype"], got["kv_cache_dtype"], got["quantization"]) == \
            (e.dtype, e.kv_cache_dtype, e.quantization), stack
        # Unset, the parser leaves it None and CacheConfig's default (on) applies.
        assert got["enable_prefix_caching"] is (True if e.enable_prefix_caching else None), stack
        assert got["disable_fastapi_docs"] is True, stack
        if streams_weights(bp):
            assert (got["load_format"], got["model_loader_extra_config"]) == \
                ("runai_streamer", {"concurrency": streamer.concurrency,
                                    "memory_limit": streamer.memory_limit_bytes}), stack
            assert got["model_tag"].startswith("s3://") and got["model_tag"].endswith(f"/{MODELS_PREFIX}/{name}"), stack
        else:
            assert (got["model_tag"], got["load_format"]) == (f"{MODELS_MOUNT}/{name}", "auto"), stack
        if e.lora is None:
            assert (got["enable_lora"], got["lora_modules"]) == (None, None), stack
        else:
            assert got["enable_lora"] is True, stack
            assert [(m["name"], m["path"]) for m in got["lora_modules"]] == \
                [(a.name, f"{LORA_MOUNT}/{a.name}") for a in e.lora.adapters], stack
            assert (got["max_loras"], got["max_lora_rank"], got["max_cpu_loras"]) == \
                (e.lora.max_loras, e.lora.max_lora_rank, e.lora.max_cpu_loras), stack
    assert any(bp.engine.lora for bp in planned.values()) and any(bp.engine.enable_prefix_caching
                                                                  for bp in planned.values())
    assert misspelt_result["exit"] == 2 and "unrecognized arguments: --max-num-seqz=4" in misspelt_result["error"]
    assert bad_choice_result["exit"] == 2 and "invalid choice: 'fp9'" in bad_choice_result["error"]
