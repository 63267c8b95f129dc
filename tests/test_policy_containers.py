"""Policies on containers: pinned images, no privileged containers or privilege escalation."""

from __future__ import annotations

import pytest

from test_policy_support import gpu_deployment, main_container, resource_violations

DEPLOYMENT = "kubernetes:apps/v1:Deployment"
MODEL = "aws:sagemaker/model:Model"


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.11.0", "localhost:5000/vllm:0.11",
                                   "nvcr.io/nvidia/tritonserver@sha256:" + "a" * 64])
def test_an_image_with_a_version_tag_or_digest_passes(image):
    d = gpu_deployment()
    main_container(d)["image"] = image
    assert resource_violations("images-pinned", DEPLOYMENT, d) == []


@pytest.mark.parametrize("image, problem", [("vllm/vllm-openai:latest", "uses the mutable tag :latest"),
                                            ("vllm/vllm-openai", "has no tag (pulls :latest)"),
                                            ("localhost:5000/vllm", "has no tag (pulls :latest)")])
def test_an_image_on_latest_or_without_a_tag_is_flagged(image, problem):
    d = gpu_deployment()
    main_container(d)["image"] = image
    assert resource_violations("images-pinned", DEPLOYMENT, d, name="vllm") == [
        f"container 'vllm' of Deployment 'vllm': image {image!r} {problem}; pin a version tag (e.g. "
        "vllm/vllm-openai:v0.11.0) or a digest"]


def test_init_containers_are_checked_too():
    d = gpu_deployment(initContainers=[{"name": "fetch", "image": "amazon/aws-cli",
                                        "securityContext": {"allowPrivilegeEscalation": False}}])
    assert [m.split(":")[0] for m in resource_violations("images-pinned", DEPLOYMENT, d, name="vllm")] == [
        "container 'fetch' of Deployment 'vllm'"]


def test_a_sagemaker_model_image_must_be_pinned():
    image = "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference"
    pinned = {"primaryContainer": {"image": f"{image}:0.33.0-lmi15.0.0"}}
    assert resource_violations("images-pinned", MODEL, pinned) == []
    assert resource_violations("images-pinned", MODEL, {"primaryContainer": {"image": image}}, name="llm") == [
        f"a container of Model 'llm': image {image!r} has no tag (pulls :latest); pin a version tag (e.g. "
        "vllm/vllm-openai:v0.11.0) or a digest"]


def test_a_container_without_privilege_escalation_passes():
    assert resource_violations("no-privileged-containers", DEPLOYMENT, gpu_deployment()) == []


def test_a_privileged_container_is_flagged():
    d = gpu_deployment()
    main_container(d)["securityContext"]["privileged"] = True
    assert resource_violations("no-privileged-containers", DEPLOYMENT, d, name="vllm") == [
        "container 'vllm' of Deployment 'vllm' is privileged (full access to the node); remove "
        "securityContext.privileged (the NVIDIA device plugin hands out GPUs without it)"]


def test_a_container_that_leaves_privilege_escalation_unset_is_flagged():
    d = gpu_deployment()
    del main_container(d)["securityContext"]["allowPrivilegeEscalation"]
    assert resource_violations("no-privileged-containers", DEPLOYMENT, d, name="vllm") == [
        "container 'vllm' of Deployment 'vllm' allows privilege escalation (allowPrivilegeEscalation is unset); set "
        "securityContext.allowPrivilegeEscalation: false"]
