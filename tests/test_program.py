"""The program: one builder per archetype; every bundled stack builds offline with valid, secure, tagged resources."""

from __future__ import annotations

import inspect
import json
import re
from functools import lru_cache

import pulumi_aws
import pytest

from blueprints.blueprint import Archetype
from blueprints.manifests import validate_manifest
from blueprints.preview import run_preview
from components.program import BUILDERS
from tests.conftest import ROOT

STACKS = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))


@pytest.fixture(scope="module", params=STACKS)
def report(request):
    return run_preview(request.param, stacks_dir=ROOT / "stacks", program=ROOT / "__main__.py")


@lru_cache(maxsize=None)
def taggable(type_token: str) -> bool:
    """Whether the installed pulumi-aws resource class for `type_token` takes `tags`."""
    _, module_path, cls_name = type_token.split(":")
    module = module_path.split("/")[0]
    cls = getattr(getattr(pulumi_aws, module), cls_name)
    return "tags" in inspect.signature(cls._internal_init).parameters


def containers(manifest: dict) -> list[dict]:
    spec = manifest.get("spec", {})
    pod = spec.get("template", {}).get("spec", {})
    return pod.get("containers", []) + pod.get("initContainers", [])


def test_there_is_one_builder_per_archetype():
    assert set(BUILDERS) == set(Archetype)


def test_every_archetype_builds_with_valid_manifests_from_fixture_blueprints(chat_prod):
    from tests.blueprint_builders import manifests, onnx_blueprint, run_program, sagemaker_blueprint, triton_blueprint

    built = {}
    for bp in (chat_prod, triton_blueprint(chat_prod), onnx_blueprint(chat_prod), sagemaker_blueprint(chat_prod)):
        run = run_program(bp)
        built[bp.archetype] = run.outputs["endpoint"]
        for m in manifests(run):
            assert validate_manifest(m) == [], (bp.archetype.value, m["kind"])
    assert set(built) == set(Archetype)


def test_every_kubernetes_manifest_validates_strictly(report):
    for m in report.manifests:
        assert validate_manifest(m) == [], (report.stack, m["kind"], m["metadata"].get("name"))


def test_no_static_aws_keys_anywhere(report):
    text = json.dumps(report.to_json())
    assert "AWS_SECRET_ACCESS_KEY" not in text and "AWS_ACCESS_KEY_ID" not in text


def test_every_taggable_aws_resource_carries_the_blueprint_tags(report):
    tags = report.blueprint.tags
    for r in report.resources:
        if r.custom and r.type.startswith("aws:") and taggable(r.type):
            assert tags.items() <= (r.inputs.get("tags") or {}).items(), (report.stack, r.type, r.name)


def test_components_use_the_project_type_token_and_children_are_named_after_their_parent(report):
    components = {r.name: r for r in report.resources if not r.custom}
    for comp in components.values():
        assert re.fullmatch(r"servingblueprints:index:[A-Z][A-Za-z]+", comp.type), comp.type
    for r in report.resources:
        if r.parent in components:
            assert r.name.startswith(f"{r.parent}-"), (r.parent, r.name)


def test_containers_are_unprivileged_and_images_are_pinned(report):
    for m in report.manifests:
        for c in containers(m):
            ctx = c.get("securityContext", {})
            assert ctx.get("privileged") is False and ctx.get("allowPrivilegeEscalation") is False, c["name"]
            image = c["image"]
            assert re.search(r":[\w][\w.-]*$", image.rsplit("/", 1)[-1]) and not image.endswith(":latest"), image


def test_kubernetes_objects_carry_the_recommended_labels(report):
    keys = {"app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/component",
            "app.kubernetes.io/part-of", "app.kubernetes.io/managed-by"}
    for m in report.manifests:
        assert keys <= set(m["metadata"].get("labels", {})), (m["kind"], m["metadata"].get("name"))


def test_gpu_pods_tolerate_the_gpu_taint_and_cpu_pods_do_not_need_it(report):
    gpu = report.blueprint.compute.gpus_per_replica > 0
    for m in report.manifests:
        if m["kind"] != "Deployment":
            continue
        pod = m["spec"]["template"]["spec"]
        tolerated = any(t.get("key") == "nvidia.com/gpu" for t in pod.get("tolerations", []))
        assert tolerated == gpu, (report.stack, m["metadata"]["name"])


def test_outputs_include_the_endpoint_and_bucket(report):
    assert report.outputs["endpoint"].startswith(("http://", "https://"))
    assert report.outputs["weights_bucket"]
    if report.blueprint.platform.kind == "eks":
        assert report.outputs["cluster_name"] and "eks" in report.outputs["dashboards"]


def _deps(record) -> set[str]:
    return {urn.rsplit("::", 1)[-1] for urn in record.dependencies}


def test_pods_are_created_only_after_their_pod_identity_association(chat_prod):
    from tests.blueprint_builders import run_program

    run = run_program(chat_prod)
    assocs = {r.inputs["serviceAccount"]: r.name
              for r in run.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")}
    deployment = run.one("kubernetes:apps/v1:Deployment")
    assert assocs[deployment.inputs["spec"]["template"]["spec"]["serviceAccountName"]] in _deps(deployment)
    job = run.one("kubernetes:batch/v1:Job")
    assert assocs[job.inputs["spec"]["template"]["spec"]["serviceAccountName"]] in _deps(job)


def test_serving_pods_wait_for_the_weights_sync_job(chat_prod):
    from tests.blueprint_builders import run_program

    run = run_program(chat_prod)
    assert run.one("kubernetes:batch/v1:Job").name in _deps(run.one("kubernetes:apps/v1:Deployment"))


def test_private_only_gives_an_internal_load_balancer_a_private_eks_endpoint_and_vpc_endpoints(chat_prod):
    from tests.blueprint_builders import derive, manifests, run_program

    run = run_program(derive(chat_prod, network={"private_only": True}))
    assert run.one("aws:eks/cluster:Cluster").inputs["vpcConfig"]["endpointPublicAccess"] is False
    [svc] = [m for m in manifests(run) if m["kind"] == "Service"]
    assert svc["metadata"]["annotations"]["service.beta.kubernetes.io/aws-load-balancer-scheme"] == "internal"
    assert len(run.of_type("aws:ec2/vpcEndpoint:VpcEndpoint")) == 5
