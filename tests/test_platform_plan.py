"""Planning the shared platforms: a pure function of platform.yaml and every requirements file landing on them, their
posture platform.yaml's (a service never changes it), the Kubernetes version chosen from the plan date, and clear
errors on conflicts."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from blueprints.catalog import load_catalog
from blueprints.catalog.addons import load_platform_catalog
from blueprints.core.errors import RequirementsError
from blueprints.requirements.platform_file import PlatformRequirements, load_platform_requirements
from blueprints.plan.platforms import ServiceFile, choose_kubernetes_version, plan_platforms
from blueprints.requirements.service import Requirements
from blueprints.workspace import plan_platform_set, plan_requirements_file
from tests.conftest import GPU_SERVICE_ADDONS, EXAMPLES, PLAN_DATE, ROOT, example_data, requirements_with

BUNDLED_PLATFORM = load_platform_requirements(EXAMPLES / "platform.yaml")


def platforms(*reqs: Requirements, preq: PlatformRequirements = BUNDLED_PLATFORM, as_of: dt.date = PLAN_DATE,
              planning: Requirements | None = None) -> dict:
    files = [ServiceFile(Path(f"{r.service}.yaml"), r) for r in reqs]
    return {p.name: p for p in plan_platforms(files, preq, catalog=load_catalog(), pcat=load_platform_catalog(),
                                              as_of=as_of, platform_file="platform.yaml",
                                              planning=Path(f"{planning.service}.yaml") if planning else None)}


def bundled(**changes) -> PlatformRequirements:
    """The bundled platform.yaml with top-level keys replaced; `platforms` entries merge into the bundled ones."""
    data = BUNDLED_PLATFORM.model_dump(exclude_defaults=True)
    entries = changes.pop("platforms", {})
    data["platforms"] = {**data.get("platforms", {}), **{name: {**data.get("platforms", {}).get(name, {}), **entry}
                                                         for name, entry in entries.items()}}
    return PlatformRequirements.model_validate({**data, **changes})


def prod_only(**changes) -> Requirements:
    """The chat assistant with only its prod environment (us-east-1), with section changes."""
    data = example_data()
    data["environments"] = {"prod": data["environments"]["prod"]}
    for key, value in changes.items():
        data[key] = {**data[key], **value} if isinstance(value, dict) and isinstance(data.get(key), dict) else value
    return Requirements.model_validate(data)


def test_environments_land_on_the_platform_of_their_environment_and_region():
    found = platforms(requirements_with(), requirements_with("search-relevance"))
    assert sorted(found) == ["dev-us-west-2", "prod-us-east-1", "staging-us-west-2"]
    assert found["prod-us-east-1"].services == ["chat-assistant-prod", "search-relevance-prod"]
    assert found["prod-us-east-1"].production is True and found["dev-us-west-2"].production is False


def test_planning_any_service_writes_the_same_platform_bytes():
    from blueprints.contracts.stackconfig import render_stack_config

    texts = set()
    for name in ("chat-assistant", "search-relevance"):
        planned = plan_requirements_file(EXAMPLES / f"{name}.yaml", as_of=PLAN_DATE,
                                         policy_dir=ROOT / "policies" / "config")
        [prod] = [p for p in planned.platforms if p.name == "prod-us-east-1"]
        texts.add(render_stack_config(prod, source="any"))
    assert len(texts) == 1


def test_a_platform_takes_its_posture_from_platform_yaml_and_a_service_never_changes_it():
    strict = requirements_with(service="strict-svc", compliance={"customer_managed_kms": True, "audit_logging": True})
    lax = requirements_with(compliance={"customer_managed_kms": False, "audit_logging": False})
    alone = platforms(lax)["prod-us-east-1"]
    assert alone.audit_logging is True and alone.secrets_kms is False  # platform.yaml: audit_logging: true
    shared = platforms(lax, strict)["prod-us-east-1"]
    assert shared == alone  # the strict service does not land (its own plan is refused) and changes nothing
    assert "strict-svc-prod" not in shared.services
    opted = platforms(lax, strict, preq=bundled(platforms={"prod-us-east-1": {"strictest_service_wins": True}}))
    assert opted["prod-us-east-1"].secrets_kms is True and "strict-svc-prod" in opted["prod-us-east-1"].services
    assert any("strictest_service_wins" in r for r in opted["prod-us-east-1"].rationale)


def test_a_service_whose_compliance_its_platform_does_not_meet_is_refused_naming_platform_yaml_and_both_fixes():
    private = prod_only(compliance={"private_only": True})
    with pytest.raises(RequirementsError) as exc:
        platforms(private, planning=private)
    message = str(exc.value)
    assert message.startswith("chat-assistant.yaml: environments.prod lands on platform-prod-us-east-1, whose "
                              "posture (platform.yaml) lacks a private Kubernetes API endpoint")
    assert "set platforms.prod-us-east-1.private_endpoint: true in platform.yaml" in message
    assert "declare a dedicated platform for such services under platforms: in platform.yaml" in message
    assert exc.value.rule == "platform-posture-meets-service"


def test_a_platform_made_private_needs_a_runner_inside_its_vpc():
    private = prod_only(compliance={"private_only": True})
    with pytest.raises(RequirementsError, match=r"platforms.prod-us-east-1.existing_vpc .* and "
                                                r"platforms.prod-us-east-1.runner_label"):
        platforms(private, preq=bundled(platforms={"prod-us-east-1": {"private_endpoint": True}}))
    preq = bundled(platforms={"prod-us-east-1": {
        "vpc_cidr": None, "private_endpoint": True, "runner_label": "runner-use1",
        "existing_vpc": {"vpc_id": "vpc-0123456789abcdef0",
                         "private_subnet_ids": ["subnet-0123456789abcdef1", "subnet-0123456789abcdef2"]}}})
    platform = platforms(private, preq=preq)["prod-us-east-1"]
    assert platform.network.private_endpoint is True and platform.runner_label == "runner-use1"
    # Every AWS API its nodes, add-ons and pods call (blueprints/catalog/endpoints.yaml), S3 as an interface endpoint
    # in the existing VPC; none relies on NAT (IAM and the Price List, which have none, are never called).
    assert platform.network.interface_endpoints == ["s3", "ec2", "ecr.api", "ecr.dkr", "eks", "eks-auth",
                                                    "elasticloadbalancing", "sqs", "ssm"]
    assert platform.network.public_access_cidrs == []


def test_an_environment_naming_a_platform_in_another_region_is_refused_naming_both_files():
    data = example_data()
    data["environments"]["prod"]["platform"] = "shared-east"
    preq = bundled(platforms={"shared-east": {"environment": "prod", "region": "us-east-2"}})
    with pytest.raises(RequirementsError) as exc:
        platforms(Requirements.model_validate(data), preq=preq)
    message = str(exc.value)
    assert message.startswith("chat-assistant.yaml: environments.prod.region is us-east-1 but it lands on "
                              "platform-shared-east in us-east-2 (platform.yaml")


def test_the_default_kubernetes_version_is_the_newest_in_standard_support_the_add_ons_support():
    pcat = load_platform_catalog()
    version, why, warnings = choose_kubernetes_version(pcat, ["karpenter", "keda"], PLAN_DATE, wanted=None,
                                                       source="platform.yaml")
    assert version == "1.35" and pcat.version(version).phase(PLAN_DATE) == "standard"
    assert "standard support until 2027-03-27; upgrade policy EXTENDED" in why[0]
    assert [w.split(":")[0] for w in warnings] == ["Kubernetes 1.35 leaves EKS standard support on 2027-03-27 "
                                                   "(116 days after 2026-12-01)"]
    # KEDA 2.20 is tested up to 1.35, and 1.36's EKS dates are unknown: never the default.
    assert pcat.addon("keda").kubernetes_max == "1.35"


def test_the_plan_warns_from_180_days_before_the_extended_price_starts_and_names_that_day():
    pcat = load_platform_catalog()
    assert pcat.warn_days_before_end == 180
    _, _, warnings = choose_kubernetes_version(pcat, ["keda"], dt.date(2027, 2, 1), wanted=None,
                                               source="platform.yaml")
    # (0.60 - 0.10) $/h x 730 h/month = $365/month.
    assert warnings == ["Kubernetes 1.35 leaves EKS standard support on 2027-03-27 (54 days after 2027-02-01): with "
                        "upgrade policy EXTENDED the cluster enters extended support that day and its control plane "
                        "costs $0.60/hour instead of $0.10 (+$365/month): upgrade before then (set kubernetes_version "
                        "in platform.yaml, one minor version per deploy)"]
    _, _, early = choose_kubernetes_version(pcat, ["keda"], dt.date(2026, 9, 27), wanted=None, source="platform.yaml")
    assert early == []  # 181 days before
    _, _, edge = choose_kubernetes_version(pcat, ["keda"], dt.date(2026, 9, 28), wanted=None, source="platform.yaml")
    assert len(edge) == 1 and "(180 days after 2026-09-28)" in edge[0]


def test_a_version_in_extended_support_is_priced_as_such_and_an_unsupported_one_is_refused():
    preq = bundled(kubernetes_version="1.33")
    prod = platforms(requirements_with(), preq=preq)["prod-us-east-1"]
    [control_plane] = [line for line in prod.cost_lines if line.item.startswith("EKS control plane")]
    assert control_plane.usd_per_hour == 0.60 and control_plane.monthly_usd == 438.0
    assert any("extended support" in w for w in prod.warnings)
    with pytest.raises(RequirementsError, match=r"kubernetes_version 1.31 left EKS extended support on 2026-11-26; "
                                                r"choose 1.35"):
        platforms(requirements_with(), preq=bundled(kubernetes_version="1.31"))


def test_platform_file_typos_name_the_known_add_ons_and_versions():
    with pytest.raises(RequirementsError, match=r"addon_versions: unknown add-on\(s\) kedda; known: "):
        platforms(requirements_with(), preq=BUNDLED_PLATFORM.model_validate({"addon_versions": {"kedda": "2.20.2"}}))
    with pytest.raises(RequirementsError, match=r"addon_versions.keda: unknown chart version '9.9.9'; the catalog "
                                                r"knows 2.20.2"):
        platforms(requirements_with(), preq=BUNDLED_PLATFORM.model_validate({"addon_versions": {"keda": "9.9.9"}}))


def test_service_names_are_unique_and_platform_is_reserved():
    with pytest.raises(RequirementsError, match="both declare service 'chat-assistant'"):
        platforms(requirements_with(), requirements_with())
    with pytest.raises(ValueError, match="'platform' is reserved for platform stacks"):
        requirements_with(service="platform")  # refused where the file is read, before any platform is planned


def test_spot_forbidden_by_the_platform_team_refuses_a_spot_environment():
    with pytest.raises(RequirementsError, match=r"chat-assistant.dev \(chat-assistant.yaml\): asks for spot capacity "
                                                r"but platform.yaml sets spot: forbidden"):
        platforms(requirements_with(), preq=bundled(spot="forbidden"))


def test_a_service_setting_another_kubernetes_version_than_its_platform_is_refused():
    req = prod_only(operations={"kubernetes_version": "1.34"})
    with pytest.raises(RequirementsError, match=r"operations.kubernetes_version 1.34 differs from "
                                                r"platform-prod-us-east-1's 1.35"):
        platforms(req)


def test_gpu_and_scale_to_zero_add_ons_follow_the_services():
    found = platforms(requirements_with(), requirements_with("search-relevance"))
    ids = {name: [a.id for a in p.addons] for name, p in found.items()}
    assert "keda-http-add-on" in ids["dev-us-west-2"]  # chat-assistant dev scales to zero
    assert "keda-http-add-on" not in ids["prod-us-east-1"]
    assert {"nvidia-device-plugin", "dcgm-exporter"} <= set(ids["prod-us-east-1"])
    cpu_only = requirements_with("search-relevance", service="cpu-svc", hardware={"accelerators": ["cpu"]})
    assert "nvidia-device-plugin" not in [a.id for a in platforms(cpu_only)["prod-us-east-1"].addons]


def test_a_private_sagemaker_service_alone_gets_a_network_only_platform():
    req = requirements_with("prototype-summarizer", compliance={"private_only": True, "regions_allowed": ["us-east-1"]})
    assert platforms(req) == {}  # a public platform offers it no private VPC: it lands nowhere (and is refused)
    [platform] = platforms(req, preq=bundled(platforms={"pilot-us-east-1": {"private_endpoint": True}})).values()
    assert platform.kind.value == "network" and platform.addons == [] and platform.node_classes == []
    assert [line.item for line in platform.cost_lines] == ["NAT gateways", "interface VPC endpoints (4 services x 3 "
                                                                           "zones)"]


def test_platform_costs_are_its_own_fixed_lines():
    prod = platforms(requirements_with())["prod-us-east-1"]
    assert [(line.item, line.quantity) for line in prod.cost_lines] == [
        ("EKS control plane (Kubernetes 1.35)", 1), ("system nodes (m7i.xlarge)", 2), ("NAT gateways", 3)]
    assert prod.monthly_cost_usd == pytest.approx(73.0 + 2 * 0.2016 * 730 + 3 * 0.045 * 730, abs=0.01)


def test_the_bundled_workspace_plans_one_platform_per_environment_and_region():
    assert sorted(p.stack for p in plan_platform_set(EXAMPLES, as_of=PLAN_DATE)) == [
        "platform-dev-us-west-2", "platform-prod-eu-central-1", "platform-prod-us-east-1",
        "platform-staging-eu-west-1", "platform-staging-us-west-2"]


def test_a_private_service_planned_onto_its_existing_cluster_names_no_platform_stack():
    # preference any + private_only: it would land on a platform's VPC only as a SageMaker endpoint; planned
    # self-hosted (the SageMaker image is missing in the region), it stays on its existing cluster.
    from tests.conftest import plan_env

    req = requirements_with(operations={"preference": "any", "platform": "existing-cluster",
                                        "cluster_addons": GPU_SERVICE_ADDONS},
                            compliance={"private_only": True, "regions_allowed": ["us-west-2", "ap-east-1"]},
                            environments={"prod": {"region": "ap-east-1"}}, budget={"max_monthly_usd": None})
    bp = plan_env(req, "prod")
    assert bp.archetype.value == "vllm-gpu"
    assert bp.platform.kind == "existing-cluster" and bp.platform.stack is None


MINIMAL = """service: mini
owner: team-mini
cost_center: cc-1
model:
  id: llama-3.1-8b
  weights_uri: hf://meta-llama/Llama-3.1-8B-Instruct
traffic:
  peak_requests_per_s: 1
slo:
  ttft_p95_ms: 2000
  itl_p95_ms: 80
environments:
  dev:
    region: eu-west-1
"""


def test_a_minimal_requirements_file_in_a_new_region_plans_its_platform_with_the_postures_it_asks_for(project):
    """The defaults agree: compliance.audit_logging defaults to true, and a platform platform.yaml does not declare
    takes the strictest compliance of its services (it was refused for a setting it never wrote)."""
    (project / "stacks" / "requirements" / "mini.yaml").write_text(MINIMAL)
    planned = plan_requirements_file(project / "stacks" / "requirements" / "mini.yaml", as_of=PLAN_DATE,
                                     requirements_dir=project / "stacks" / "requirements",
                                     stacks_dir=project / "stacks", policy_dir=project / "policies" / "config")
    [platform] = planned.platforms
    assert platform.stack == "platform-dev-eu-west-1" and platform.audit_logging is True
    assert any("the strictest compliance of its services (" in r and "has no platforms.dev-eu-west-1 entry" in r
               for r in platform.rationale)
