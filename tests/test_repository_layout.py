"""The file Triton loads is where the copy puts it: a model prefix copied whole into `<name>/1/` from a Hugging Face
layout keeps `onnx/model.onnx`, which the onnxruntime backend never finds, so the serving pods' copy moves it (with
its external data) into the version folder; a flat prefix is left as it is. The init containers' scripts run here
against a fake `aws` that copies local folders."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from components.weights_delivery import StoreDelivery, loaded_file
from tests.blueprint_builders import onnx_blueprint, triton_blueprint

FAKE_AWS = """#!/bin/sh
# `aws s3 sync SRC DST ...`: SRC is a local folder standing in for s3://; `configure export-credentials`: ok.
if [ "$1" = configure ]; then exit 0; fi
mkdir -p "$4" && cp -R "$3/." "$4/"
"""


@pytest.fixture
def fake_aws(tmp_path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "aws").write_text(FAKE_AWS)
    (bin_dir / "aws").chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def _store(tmp_path: Path, name: str, files: list[str]) -> Path:
    """A model's store prefix (`models/<name>/`) with `config.pbtxt` and the weights under `1/`."""
    root = tmp_path / "store" / name
    for f in ["config.pbtxt", *(f"1/{p}" for p in files)]:
        (root / f).parent.mkdir(parents=True, exist_ok=True)
        (root / f).write_text(f)
    return root


def _run_fetch(container: dict, sources: dict[str, Path], models_dir: Path, env: dict) -> None:
    args = []
    for src, dest, file in zip(container["args"][0::3], container["args"][1::3], container["args"][2::3]):
        name = dest.rsplit("/", 1)[-1]
        args += [str(sources[name]), str(models_dir / name), file]
    subprocess.run([*container["command"], *args], env=env, check=True, capture_output=True, timeout=60)


def test_a_hugging_face_layout_is_moved_into_the_version_folder(chat_prod, tmp_path, fake_aws):
    bp = onnx_blueprint(chat_prod)
    model = bp.models[0]
    assert loaded_file(bp, model) == "model.onnx"
    container = StoreDelivery(bucket_name="store").init_containers(bp, [model])[0]
    container = {**container, "args": [a if isinstance(a, str) else "" for a in container["args"]]}
    hf = _store(tmp_path, model.name, ["onnx/model.onnx", "onnx/model.onnx_data", "tokenizer.json", "config.json"])
    _run_fetch(container, {model.name: hf}, tmp_path / "models", fake_aws)
    version = tmp_path / "models" / model.name / "1"
    assert (version / "model.onnx").exists() and (version / "model.onnx_data").exists()
    assert (tmp_path / "models" / model.name / "config.pbtxt").exists()


def test_a_flat_prefix_and_a_non_repository_engine_are_left_as_they_are(chat_prod, tmp_path, fake_aws):
    bp = triton_blueprint(chat_prod, gpu=True)
    model = bp.models[0]
    container = StoreDelivery(bucket_name="store").init_containers(bp, [model])[0]
    container = {**container, "args": [a if isinstance(a, str) else "" for a in container["args"]]}
    flat = _store(tmp_path, model.name, ["model.onnx", "onnx/other.onnx"])
    _run_fetch(container, {model.name: flat}, tmp_path / "models", fake_aws)
    version = tmp_path / "models" / model.name / "1"
    assert (version / "model.onnx").read_text() == "1/model.onnx" and (version / "onnx" / "other.onnx").exists()
    assert loaded_file(chat_prod, chat_prod.models[0]) == ""  # vLLM reads its whole folder


def test_an_edge_clusters_copy_moves_a_hugging_face_layout_too(tmp_path, fake_aws):
    from components.edge_weights import EdgeDelivery
    from tests.test_edge_planning import planned
    from tests.test_edge_requirements import edge

    bp = planned(edge())
    model = bp.models[0]
    delivery = EdgeDelivery(trust_anchor_arn="ta", profile_arn="p", role_arn="r")
    fetch = next(c for c in delivery.init_containers(bp, [model]) if c["name"].startswith("fetch-"))
    source = _store(tmp_path, model.name, ["onnx/model.onnx"]) / "1"
    command = [*fetch["command"][:4], str(source), str(tmp_path / "models" / model.name / "1")]
    subprocess.run(command, env=fake_aws, check=True, capture_output=True, timeout=60)
    assert (tmp_path / "models" / model.name / "1" / "model.onnx").exists()
