"""Speech recognition (Whisper) and task-aware measured latency: an autoregressive model's measured latency scales
between GPUs with memory bandwidth, a one-pass model's with TFLOPS; a batch of one never waits in the queue."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from blueprints.core import defaults
from blueprints.contracts.sections import TritonModelConfig
from blueprints.catalog import Task
from blueprints.core.errors import RequirementsError, problem_lines
from blueprints.plan.options.search import resolve_models
from blueprints.plan.options.nongen import queue_delay_ms, request_work
from blueprints.review.preview import run_preview
from blueprints.requirements.service import Requirements
from blueprints.capacity.sizing import GIB, gpu_batch_ms
from tests.conftest import ROOT, plan_env, write_stacks

WHISPER = {"id": "whisper-large-v3", "format": "onnx", "precision": "fp16",
           "weights_uri": "s3://voice-models/whisper-large-v3/"}


def _req(model: dict | None = None, *, families=("g6e",), latency_ms: float = 2000, **traffic) -> Requirements:
    return Requirements.model_validate({
        "service": "meeting-transcriber", "owner": "voice", "cost_center": "cc-1234",
        "model": {**WHISPER, **(model or {})},
        "traffic": {"peak_requests_per_s": 4, "mean_output_tokens": 120, "pattern": "steady", **traffic},
        "slo": {"latency_p95_ms": latency_ms, "availability_pct": 99.5},
        "hardware": {"accelerators": ["nvidia-gpu"], "allowed_instance_families": list(families)},
        "operations": {"preference": "self-hosted"}, "compliance": {"regions_allowed": ["us-east-1"]},
        "environments": {"prod": {"region": "us-east-1"}}})


MEASURED = {"measured_latency_ms": 400.0, "measured_instance_type": "g5.xlarge"}


@pytest.mark.parametrize(("model_id", "mel_bins"), [("whisper-large-v3", 128), ("whisper-small", 80)])
def test_whisper_catalog_figures_follow_from_its_config_shapes(catalog, model_id, mel_bins):
    record = catalog.model(model_id)
    arch, d, layers = record.architecture, record.architecture.hidden_size, record.architecture.layers
    assert record.task is Task.SPEECH_RECOGNITION and record.max_context_tokens == 448  # max_target_positions
    # encoder L x 12 d^2 + decoder L x 16 d^2 + the tied token embedding (convolutions, positions, norms: < 2 %)
    assert arch.params_b == pytest.approx((layers * 28 * d**2 + arch.vocab_size * d) / 1e9, rel=0.02)
    assert record.decoder_params_b == pytest.approx((layers * 16 * d**2 + arch.vocab_size * d + 448 * d) / 1e9,
                                                    rel=0.005)
    # One 30 s window: the two convolutions (kernel 3; 3000 mel frames, then 1500), then L layers over 1500 frames.
    convolutions = 2 * mel_bins * d * 3 * 3000 + 2 * d * d * 3 * 1500
    encoder = (convolutions + 2 * layers * 12 * d**2 * 1500 + 4 * layers * d * 1500**2) / 1e9
    assert record.gflops_per_request == pytest.approx(encoder, rel=0.002)


def test_a_measured_speech_latency_scales_its_decode_with_memory_bandwidth(catalog):
    model = resolve_models(_req(MEASURED), catalog)[0]
    work = request_work(model, catalog)
    a10g, l40s = catalog.gpu("a10g"), catalog.gpu("l40s")
    prec = model.spec.precision
    assert gpu_batch_ms(work, batch_size=1, gpu=a10g, precision=prec) == pytest.approx(400.0)  # the measurement

    def forward_ms(gpu):
        flops = gpu.tflops_16bit * 1e12 * defaults.ENCODER_MFU
        bandwidth = gpu.bandwidth_gb_per_s * 1e9 * defaults.MBU_SINGLE_GPU_16BIT
        return max(work.gflops * 1e9 / flops, work.weights_gib * GIB / bandwidth) * 1e3

    decode_a10g = 400.0 - defaults.TRITON_REQUEST_OVERHEAD_MS - forward_ms(a10g)
    expected = (defaults.TRITON_REQUEST_OVERHEAD_MS + forward_ms(l40s)
                + decode_a10g * a10g.bandwidth_gb_per_s / l40s.bandwidth_gb_per_s)
    on_l40s = gpu_batch_ms(work, batch_size=1, gpu=l40s, precision=prec)
    assert on_l40s == pytest.approx(expected)
    # The reproducer: not the ~5x TFLOPS ratio, but close to the 1.44x bandwidth ratio.
    assert 400.0 / on_l40s < 1.25 * l40s.bandwidth_gb_per_s / a10g.bandwidth_gb_per_s
    assert 400.0 / on_l40s < 0.5 * l40s.tflops_16bit / a10g.tflops_16bit


def test_a_measured_encoder_latency_scales_with_tflops(catalog):
    req = _req({"id": "bge-large-en-v1.5", "weights_uri": "s3://models-in/bge/", "measured_latency_ms": 40.0,
                "measured_instance_type": "g5.xlarge"})
    model = resolve_models(req, catalog)[0]
    work = request_work(model, catalog)
    assert work.steps == 0
    a10g, l40s = catalog.gpu("a10g"), catalog.gpu("l40s")
    busy = {g.name: gpu_batch_ms(work, batch_size=1, gpu=g, precision=model.spec.precision)
            - defaults.TRITON_REQUEST_OVERHEAD_MS for g in (a10g, l40s)}
    assert busy["a10g"] / busy["l40s"] == pytest.approx(l40s.tflops_16bit / a10g.tflops_16bit)


def test_queue_delay_is_zero_at_batch_one_and_at_most_one_batch_otherwise():
    assert queue_delay_ms(1, 232.0, 2000.0) == 0.0
    assert queue_delay_ms(4, 300.0, 2000.0) == 300.0  # capped at one batch
    assert queue_delay_ms(4, 300.0, 700.0) == pytest.approx(100.0)  # what the budget leaves after 2 batches
    assert queue_delay_ms(4, 300.0, 500.0) == 0.0


def test_a_plan_at_batch_one_has_no_queue_delay(catalog):
    """The reproducer: a budget that fits only single-request batches used to come with a queue delay."""
    model = resolve_models(_req(MEASURED), catalog)[0]
    work, l40s = request_work(model, catalog), catalog.gpu("l40s")
    one, two = (gpu_batch_ms(work, batch_size=b, gpu=l40s, precision=model.spec.precision) for b in (1, 2))
    budget = defaults.NONGEN_P95_FACTOR * (one + two) / 2  # fits two batches of one, not two batches of two
    bp = plan_env(_req(MEASURED, latency_ms=round(budget, 1)), "prod")
    [cfg] = bp.engine.models
    assert bp.compute.gpu == "l40s" and cfg.max_batch_size == 1
    assert cfg.max_queue_delay_microseconds == 0
    assert bp.predictions.latency_p95_ms == pytest.approx(2 * one, abs=0.1)


def test_a_stack_config_with_a_queue_delay_at_batch_one_is_refused():
    with pytest.raises(ValueError, match="a batch that cannot form"):
        TritonModelConfig(name="asr", backend="onnxruntime", max_batch_size=1, max_queue_delay_microseconds=69000,
                          instance_kind="KIND_GPU", instance_count=2)


def test_whisper_plans_on_triton_and_previews_cleanly(tmp_path):
    bp = plan_env(_req(MEASURED), "prod")
    assert bp.archetype.value == "triton-multi-model" and bp.engine.models[0].backend == "onnxruntime"
    assert any("decode steps" in r and "memory bandwidth" in r for r in bp.rationale)
    write_stacks([bp], tmp_path)
    report = run_preview(bp.stack, stacks_dir=tmp_path, program=ROOT / "__main__.py")
    assert report.manifest_problems == {} and report.deployability == [] and report.signals == []


def test_safetensors_whisper_runs_the_python_backend_from_an_s3_prefix_and_says_what_it_needs():
    bp = plan_env(_req({"format": "safetensors"}), "prod")
    assert bp.engine.models[0].backend == "python"
    assert any("model.py" in r and "EXECUTION_ENV_PATH" in r for r in bp.rationale)
    with pytest.raises(RequirementsError, match="python backend.*without one"):
        plan_env(_req({"format": "safetensors", "weights_uri": "hf://openai/whisper-large-v3"}), "prod")


def test_speech_bounds_and_missing_figures_are_errors(catalog):
    with pytest.raises(ValidationError) as exc:
        _req(mean_output_tokens=500)
    [(where, message, rule)] = problem_lines(exc.value)
    assert (where, rule) == ("traffic.mean_output_tokens", "context-holds-requests")
    assert "500 exceeds the decoder's max_context_tokens=448" in message
    custom = {"id": None, "name": "asr", "task": "speech-recognition",
              "architecture": {"params_b": 0.5, "layers": 12, "hidden_size": 1024, "attention_heads": 16,
                               "kv_heads": 16, "head_dim": 64}}
    with pytest.raises(ValidationError) as exc:
        _req(custom)
    [(where, message, rule)] = problem_lines(exc.value)
    assert (where, rule) == ("model.measured_latency_ms", "vision-needs-measurement")
    assert "speech-recognition model without a FLOPs figure" in message
