"""The program: one component per archetype and one for the platform; every bundled stack builds offline with valid,
secure, tagged resources."""

from __future__ import annotations

import inspect
import json
import re
from functools import lru_cache

import pulumi_aws
import pytest

from blueprints.contracts.sections import Archetype
from blueprints.review.manifests import validate_manifest
from components.archetypes import KUBERNETES_ARCHETYPES
from tests.conftest import ROOT
from tests.bundled import bundled_preview

STACKS = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))
SERVICES = [s for s in STACKS if not s.startswith("platform-")]


@pytest.fixture(scope="module", params=STACKS)
def report(request):
    return bundled_preview(request.param)


@lru_cache(maxsize=None)
def taggable(type_token: str) -> bool:
    """Whether the installed pulumi-aws resource class for `type_token` takes `tags`."""
    _, module_path, cls_name = type_token.split(":")
    module = module_path.split("/")[0]
    module = module if hasattr(pulumi_aws, module) else f"{module}_"  # Python keywords get an underscore: lambda_
    cls = getattr(getattr(pulumi_aws, module), cls_name)
    return "tags" in inspect.signature(cls._internal_init).parameters


def containers(manifest: dict) -> list[dict]:
    spec = manifest.get("spec", {})
    pod = spec.get("template", {}).get("spec", {})
    return pod.get("containers", []) + pod.get("initContainers", [])


def test_there_is_one_component_per_kubernetes_archetype_and_sagemaker_has_its_own():
    assert set(KUBERNETES_ARCHETYPES) == set(Archetype) - {Archetype.SAGEMAKER_ENDPOINT}
    types = {c.TYPE for c in KUBERNETES_ARCHETYPES.values()}
    assert types == {"servingblueprints:index:VllmGpu", "servingblueprints:index:TritonMultiModel",
                     "servingblueprints:index:OnnxCpu"}


def test_no_service_stack_contains_a_cluster_and_every_platform_stack_one(report):
    clusters = [r for r in report.resources if r.type == "aws:eks/cluster:Cluster"]
    if report.is_platform:
        assert len(clusters) == (1 if report.subject.kind.value == "eks" else 0)
    else:
        assert clusters == [] and not [r for r in report.resources if r.type == "aws:eks/nodeGroup:NodeGroup"]


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
    tags = report.subject.tags
    for r in report.resources:
        if r.custom and r.type.startswith("aws:") and taggable(r.type):
            assert tags.items() <= (r.inputs.get("tags") or {}).items(), (report.stack, r.type, r.name)


def test_components_use_the_project_type_token_and_children_are_named_after_their_parent(report):
    components = {r.name: r for r in report.resources if not r.custom}
    for comp in components.values():
        assert re.fullmatch(r"servingblueprints:index:[A-Z][A-Za-z]+", comp.type), comp.type
    for r in report.resources:
        if r.parent in components:
            # A name too long for its AWS type is fitted (components.naming.fit): a prefix of the parent's name, a
            # digest of the whole, the child's own suffix.
            fitted = re.fullmatch(r"(.+)-[0-9a-f]{8}-.+", r.name)
            assert r.name.startswith(f"{r.parent}-") or (fitted and r.parent.startswith(fitted.group(1))), \
                (r.parent, r.name)


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
    if report.is_platform:
        return  # the platform's pods come from Helm charts (their values are tested in test_platform_components)
    gpu = report.blueprint.compute.gpus_per_replica > 0
    for m in report.manifests:
        if m["kind"] != "Deployment" or m["metadata"]["labels"].get("app.kubernetes.io/component") == "router":
            continue  # the prompt-reuse router runs on the system nodes (test_prompt_reuse)
        pod = m["spec"]["template"]["spec"]
        tolerated = any(t.get("key") == "nvidia.com/gpu" for t in pod.get("tolerations", []))
        assert tolerated == gpu, (report.stack, m["metadata"]["name"])


def test_outputs_include_the_endpoint_and_bucket_or_the_platform_contract(report):
    if report.is_platform:
        assert report.outputs["platform"] == report.stack and report.outputs["vpc_id"].startswith("vpc-")
        return
    assert report.outputs["endpoint"].startswith(("http://", "https://"))
    if report.blueprint.platform.kind == "edge-cluster":  # no model store: the pods read their sources
        assert report.outputs["weights_source"] == [m.source_uri for m in report.blueprint.models]
        assert "weights_bucket" not in report.outputs
    else:
        assert report.outputs["weights_bucket"]
    if report.blueprint.platform.kind == "eks":
        assert report.outputs["cluster_name"] == report.outputs["platform"] == report.blueprint.platform.stack


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


def test_an_internal_exposure_is_an_internal_load_balancer_on_the_platforms_private_subnets(chat_prod):
    from blueprints.contracts.platform import planned_outputs
    from tests.blueprint_builders import bundled_platform, manifests, run_program

    run = run_program(chat_prod)
    [svc] = [m for m in manifests(run) if m["kind"] == "Service" and m["spec"]["type"] == "LoadBalancer"]
    annotations = svc["metadata"]["annotations"]
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-scheme"] == "internal"
    private = planned_outputs(bundled_platform("platform-prod-us-east-1")).private_subnet_ids
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-subnets"] == ",".join(private)
    assert run.of_type("aws:eks/cluster:Cluster") == [] and run.of_type("aws:ec2/vpc:Vpc") == []


def test_a_public_exposure_lands_on_the_platforms_public_subnets_and_the_outputs_name_the_client_url(chat_prod):
    from blueprints.contracts.platform import planned_outputs
    from tests.blueprint_builders import bundled_platform, derive, manifests, run_program

    cert = "arn:aws:acm:us-east-1:123456789012:certificate/0b5c7e4a-1d2f-4c3b-9a8e-7f6d5c4b3a21"
    bp = derive(chat_prod, network={"exposure": {"scope": "public", "tls_certificate_arn": cert,
                                                 "allowed_cidrs": ["198.51.100.0/24"], "hostname": "chat.example.com"}})
    run = run_program(bp)
    [svc] = [m for m in manifests(run) if m["kind"] == "Service" and m["spec"]["type"] == "LoadBalancer"]
    public = planned_outputs(bundled_platform("platform-prod-us-east-1")).public_subnet_ids
    assert svc["metadata"]["annotations"]["service.beta.kubernetes.io/aws-load-balancer-subnets"] == ",".join(public)
    assert run.outputs["endpoint"] == "https://chat.example.com/v1"
    assert run.outputs["api_key"] == "[secret]"
    assert run.outputs["exposure"] == "public (TLS; from 198.51.100.0/24); API key required"


def test_the_platform_stack_reference_defaults_to_this_org_and_project_and_can_be_overridden(chat_prod):
    from tests.blueprint_builders import run_program

    [default] = [r for r in run_program(chat_prod).records if r.type == "pulumi:pulumi:StackReference"]
    assert default.name == "organization/servingblueprints/platform-prod-us-east-1"
    run = run_program(chat_prod, extra_config={"servingblueprints:platformStack": "acme/infra/platform-prod-us-east-1"})
    [override] = [r for r in run.records if r.type == "pulumi:pulumi:StackReference"]
    assert override.name == "acme/infra/platform-prod-us-east-1"
