"""platform.yaml and the planned platform checked where they enter: Graviton system nodes, landings a platform cannot
take (names, production, regions, public subnets, unused entries), `PlatformConfig` validators, the Kubernetes
version's upgrade path and plan date, and the messages that name the key to change. Each bad input names the file,
the field and the fix."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
import yaml

from blueprints.catalog import load_catalog
from blueprints.catalog.addons import load_platform_catalog
from blueprints.core.errors import RequirementsError, StackConfigError
from blueprints.contracts.platform import PlatformConfig, kubernetes_upgrade_problem, planned_outputs
from blueprints.requirements.platform_file import PlatformRequirements, load_platform_requirements
from blueprints.plan.platforms import ServiceFile, choose_kubernetes_version, plan_platforms
from blueprints.requirements.service import Requirements
from blueprints.contracts.stackconfig import PLATFORM_KEY, write_stack_configs
from tests.blueprint_builders import bundled_platform, run_platform
from tests.conftest import EXAMPLES, PLAN_DATE, example_data, requirements_with

BUNDLED = load_platform_requirements(EXAMPLES / "platform.yaml")
#: An existing VPC of us-east-1 (the ids follow the AWS patterns; nothing is looked up).
EAST_VPC = {"vpc_id": "vpc-0123456789abcdef0",
            "private_subnet_ids": ["subnet-0123456789abcdef1", "subnet-0123456789abcdef2"]}


def plan(*reqs: Requirements, preq: PlatformRequirements = BUNDLED, complete: bool = False,
         as_of: dt.date = PLAN_DATE) -> dict:
    files = [ServiceFile(Path(f"{r.service}.yaml"), r) for r in reqs]
    return {p.name: p for p in plan_platforms(files, preq, catalog=load_catalog(), pcat=load_platform_catalog(),
                                              as_of=as_of, platform_file="platform.yaml", complete=complete)}


def preq_with(**changes) -> PlatformRequirements:
    return PlatformRequirements.model_validate({**BUNDLED.model_dump(mode="json"), **changes})


def with_env(base: str = "chat-assistant", **env_changes) -> Requirements:
    """A bundled example with its environments' settings changed (`prod={"platform": ...}`)."""
    data = example_data(base)
    for env, changes in env_changes.items():
        data["environments"][env].update(changes)
    return Requirements.model_validate(data)


def load_platform_file(tmp_path: Path, data: dict) -> PlatformRequirements:
    path = tmp_path / "platform.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_platform_requirements(path)


def platform_dict(stack: str = "platform-prod-us-east-1") -> dict:
    return bundled_platform(stack).model_dump(mode="json")


# --- Graviton system nodes ------------------------------------------------------------------------------------------


def test_graviton_system_nodes_get_the_arm64_ami_type_and_arm64_node_labels():
    search = requirements_with("search-relevance")  # s3:// models only: its sync Jobs run aws-cli (multi-arch)
    platform = plan(search, preq=preq_with(system_nodes={"instance_type": "c7g.xlarge", "count": 2}))[
        "prod-us-east-1"]
    assert platform.system_nodes.cpu_arch.value == load_catalog().instance("c7g.xlarge").cpu_arch == "arm64"
    groups = run_platform(platform).of_type("aws:eks/nodeGroup:NodeGroup")
    assert groups and {g.inputs["amiType"] for g in groups} == {"AL2023_ARM_64_STANDARD"}
    assert planned_outputs(platform).system_node_labels["kubernetes.io/arch"] == "arm64"


def test_x86_system_nodes_keep_the_x86_ami_type():
    platform = plan(requirements_with("search-relevance"))["prod-us-east-1"]
    groups = run_platform(platform).of_type("aws:eks/nodeGroup:NodeGroup")
    assert groups and {g.inputs["amiType"] for g in groups} == {"AL2023_x86_64_STANDARD"}
    assert planned_outputs(platform).system_node_labels["kubernetes.io/arch"] == "amd64"


def test_graviton_system_nodes_are_refused_where_a_sync_job_runs_the_amd64_only_download_image():
    preq = preq_with(system_nodes={"instance_type": "c7g.xlarge", "count": 2})
    with pytest.raises(RequirementsError) as exc:
        plan(requirements_with(), preq=preq)  # chat-assistant downloads hf://meta-llama/...
    message = str(exc.value)
    assert message.startswith("platform.yaml: system_nodes.instance_type c7g.xlarge is arm64")
    assert "chat-assistant (chat-assistant.yaml: an hf:// model)" in message
    assert "choose an x86_64 type such as m7i.xlarge" in message


@pytest.mark.parametrize(("instance_type", "message"), [
    ("m7.xlarge", "unknown instance type 'm7.xlarge'"),
    ("g6e.xlarge", "g6e.xlarge has GPUs; controllers run on a CPU type such as m7i.xlarge"),
    ("ml.m5.xlarge", "unknown instance type 'ml.m5.xlarge'"),
])
def test_a_system_node_type_that_is_no_catalogued_cpu_type_names_the_file_and_field(tmp_path, instance_type, message):
    with pytest.raises(RequirementsError) as exc:
        load_platform_file(tmp_path, {"system_nodes": {"instance_type": instance_type}})
    text = str(exc.value)
    assert text.startswith(f"{tmp_path / 'platform.yaml'}: 1 problem(s)")
    assert f"system_nodes.instance_type: {message}" in text


# --- where services land --------------------------------------------------------------------------------------------


def test_a_public_service_on_an_existing_vpc_without_public_subnets_is_refused_naming_both_files():
    preq = preq_with(platforms={**BUNDLED.model_dump(mode="json")["platforms"], "prod-us-east-1": {
        "existing_vpc": EAST_VPC, "audit_logging": True}})
    with pytest.raises(RequirementsError) as exc:
        plan(requirements_with("partner-api"), preq=preq)
    message = str(exc.value)
    assert message.startswith("partner-api.yaml: exposure.scope public needs an internet-facing load balancer")
    assert "platform.yaml platforms.prod-us-east-1.existing_vpc (vpc-0123456789abcdef0) lists no public_subnet_ids" \
        in message
    assert "add the VPC's public subnets there, or use exposure.scope: internal" in message
    with_public = {**EAST_VPC, "public_subnet_ids": ["subnet-0123456789abcdef3", "subnet-0123456789abcdef4"]}
    preq = preq_with(platforms={"prod-us-east-1": {"existing_vpc": with_public, "audit_logging": True}})
    assert plan(requirements_with("partner-api"), preq=preq)["prod-us-east-1"].network.existing_vpc.public_subnet_ids


def test_an_eks_platform_in_a_vpc_without_internet_egress_is_refused_naming_every_image_and_chart():
    from blueprints.catalog.images import load_image_catalog

    dark = {**EAST_VPC, "internet_egress": False}
    preq = preq_with(platforms={"prod-us-east-1": {"existing_vpc": dark, "audit_logging": True}})
    with pytest.raises(RequirementsError) as exc:
        plan(requirements_with(), preq=preq)
    message = str(exc.value)
    assert exc.value.rule == "images-pull-in-vpc"
    assert message.startswith("platform.yaml: platforms.prod-us-east-1.existing_vpc.internet_egress is false")
    pcat = load_platform_catalog()
    planned = plan(requirements_with())["prod-us-east-1"]  # the same platform with egress: what it would install
    for addon in planned.addons:
        assert pcat.addon(addon.id).images, addon.id  # every add-on it installs records its images
        for image in pcat.addon(addon.id).images:
            assert image in message, image
        assert f"{pcat.addon(addon.id).chart} {addon.version} ({pcat.addon(addon.id).repository})" in message
    assert all(image in message for image in load_image_catalog())
    assert "set internet_egress: true" in message
    # The default keeps the egress every existing VPC was assumed to have.
    assert plan(requirements_with(), preq=preq_with(platforms={"prod-us-east-1": {
        "existing_vpc": EAST_VPC, "audit_logging": True}}))["prod-us-east-1"].network.existing_vpc.internet_egress


def test_only_the_regions_private_ecr_counts_as_reachable_without_egress():
    from blueprints.contracts.images import in_private_ecr

    assert in_private_ecr("123456789012.dkr.ecr.us-east-1.amazonaws.com/vllm/vllm-openai:v0.24.0", "us-east-1")
    assert not in_private_ecr("123456789012.dkr.ecr.eu-west-1.amazonaws.com/vllm/vllm-openai:v0.24.0", "us-east-1")
    for public in ("public.ecr.aws/karpenter/controller", "vllm/vllm-openai:v0.24.0", "quay.io/prometheus/prometheus",
                   "ghcr.io/kedacore/keda", "nvcr.io/nvidia/k8s-device-plugin"):
        assert not in_private_ecr(public, "us-east-1"), public


@pytest.mark.parametrize(("platform", "message"), [
    ("platform-prod-us-east-1", "'platform-prod-us-east-1' is a stack name; name the platform without the platform- "
                                "prefix ('prod-us-east-1' is stack platform-prod-us-east-1)"),
    ("shared-gpu", "'shared-gpu' is a custom platform name, but platform.yaml declares no platforms.shared-gpu; "
                   "declare it there (with environment and region), or use <env>-<region> such as prod-us-east-1"),
])
def test_an_environment_naming_a_stack_or_an_undeclared_platform_is_refused(platform, message):
    with pytest.raises(RequirementsError) as exc:
        plan(with_env(prod={"platform": platform}))
    assert str(exc.value) == f"chat-assistant.yaml: environments.prod.platform: {message}"


def test_a_declared_custom_platform_name_is_accepted():
    preq = preq_with(platforms={"shared-gpu": {"environment": "prod", "region": "us-east-1", "audit_logging": True}})
    found = plan(with_env(prod={"platform": "shared-gpu"}), preq=preq)
    assert found["shared-gpu"].services == ["chat-assistant-prod"] and found["shared-gpu"].region == "us-east-1"


@pytest.mark.parametrize(("service", "kind"), [("support-sentiment", "existing-cluster"),
                                               ("edge-classifier", "edge-cluster")])
def test_an_existing_or_edge_cluster_service_naming_a_platform_is_refused(service, kind):
    with pytest.raises(RequirementsError) as exc:
        plan(with_env(service, prod={"platform": "prod-us-east-1"}))
    assert str(exc.value).startswith(f"{service}.yaml: environments.prod.platform is set but the service lands "
                                     f"on no platform: operations.platform is {kind}")
    assert str(exc.value).endswith("remove environments.prod.platform")


def test_production_and_non_production_services_may_not_share_a_platform():
    # chat-assistant's dev environment lands on dev-us-west-2; a second service's prod environment is sent there.
    other = with_env("search-relevance", prod={"platform": "dev-us-west-2", "region": "us-west-2"})
    with pytest.raises(RequirementsError) as exc:
        plan(requirements_with(), other)
    message = str(exc.value)
    assert "search-relevance.yaml: environments.prod (production) and chat-assistant.yaml: environments.dev (not " \
           "production) both land on platform-dev-us-west-2" in message
    assert "production and non-production services never share a platform" in message


def test_the_same_existing_vpc_in_two_regions_is_refused(tmp_path):
    data = yaml.safe_load((EXAMPLES / "platform.yaml").read_text())
    data["platforms"]["prod-eu-central-1"]["existing_vpc"]["vpc_id"] = \
        data["platforms"]["staging-eu-west-1"]["existing_vpc"]["vpc_id"]
    with pytest.raises(RequirementsError) as exc:
        load_platform_file(tmp_path, data)
    assert ("platforms: platforms.staging-eu-west-1.existing_vpc.vpc_id vpc-0a1b2c3d4e5f60718 is also "
            "platforms.prod-eu-central-1's VPC, in eu-central-1; a VPC lives in one region: give the eu-west-1 "
            "platform a VPC of eu-west-1") in str(exc.value)


def test_a_platform_entry_whose_region_contradicts_its_name_is_refused(tmp_path):
    with pytest.raises(RequirementsError, match=r"platforms.prod-us-east-1.region is us-west-2 but the name ends in "
                                                r"region us-east-1"):
        load_platform_file(tmp_path, {"platforms": {"prod-us-east-1": {"region": "us-west-2"}}})


def test_a_platform_entry_named_like_a_stack_is_refused(tmp_path):
    with pytest.raises(RequirementsError, match=r"platforms.platform-prod-us-east-1: 'platform-prod-us-east-1' is a "
                                                r"stack name"):
        load_platform_file(tmp_path, {"platforms": {"platform-prod-us-east-1": {}}})


def test_a_platform_entry_no_service_lands_on_is_refused_when_planning_the_whole_project():
    preq = preq_with(platforms={**BUNDLED.model_dump(mode="json")["platforms"],
                                "prod-us-east-2": {"runner_label": "east-2-runner"}})
    every_file = [requirements_with(name) for name in ("chat-assistant", "regulated-assistant")]
    with pytest.raises(RequirementsError) as exc:
        plan(*every_file, preq=preq, complete=True)
    assert str(exc.value).startswith("platform.yaml: platforms.prod-us-east-2: no service lands on platform "
                                     "prod-us-east-2 (services land on dev-us-west-2, prod-eu-central-1, "
                                     "prod-us-east-1, staging-eu-west-1)")
    assert set(plan(*every_file, preq=preq)) == {"dev-us-west-2", "prod-eu-central-1", "prod-us-east-1",
                                                 "staging-eu-west-1"}  # a subset of the project: no verdict


# --- PlatformConfig validators (a hand-edited platform stack config) ------------------------------------------------


def _invalid(data: dict) -> str:
    with pytest.raises(ValueError) as exc:
        PlatformConfig.model_validate(data)
    return str(exc.value)


def test_a_kubernetes_version_newer_than_a_pinned_add_on_supports_is_refused():
    data = platform_dict()
    assert load_platform_catalog().addon("keda").kubernetes_max == "1.35"
    data["kubernetes_version"] = "1.36"
    assert ("kubernetes_version 1.36 is newer than add-on keda supports (<= 1.35); set platform.yaml's "
            "kubernetes_version to a supported version") in _invalid(data)


def test_a_private_endpoint_without_a_runner_label_is_refused():
    data = platform_dict("platform-prod-eu-central-1")
    assert data["network"]["private_endpoint"] is True
    data["runner_label"] = None
    assert "give network.existing_vpc (where the deploy runner lives) and runner_label" in _invalid(data)


@pytest.mark.parametrize(("change", "message"), [
    ({"count": 1}, "system_nodes.count\n  Input should be greater than or equal to 2"),
    ({"instance_type": "m7.xlarge"}, "system_nodes.instance_type: unknown instance type 'm7.xlarge'"),
    ({"instance_type": "g6e.xlarge"}, "system_nodes.instance_type: g6e.xlarge has GPUs"),
    ({"instance_type": "c7g.xlarge"}, "system_nodes.cpu_arch is x86_64 but c7g.xlarge is arm64; re-plan it"),
])
def test_system_nodes_are_two_or_more_of_a_catalogued_cpu_type_of_their_architecture(change, message):
    data = platform_dict()
    data["system_nodes"].update(change)
    assert message in _invalid(data)


def test_a_platform_named_for_a_region_must_be_in_that_region():
    data = platform_dict()
    data["region"] = "us-west-2"
    assert "name prod-us-east-1 ends in region us-east-1 but region is us-west-2" in _invalid(data)


# --- Kubernetes versions: the plan date and the upgrade path --------------------------------------------------------


def test_after_standard_support_ends_the_plan_falls_back_to_the_newest_extended_version_with_a_warning():
    pcat = load_platform_catalog()
    as_of = dt.date(2027, 4, 1)  # 1.35 left standard support on 2027-03-27; 1.36's dates are unpublished
    assert pcat.version("1.35").phase(as_of) == "extended" and pcat.version("1.36").released is None
    version, why, warnings = choose_kubernetes_version(pcat, ["karpenter", "keda"], as_of, wanted=None,
                                                       source="platform.yaml")
    assert version == "1.35"
    assert "no catalogued version every pinned add-on supports is in EKS standard support on 2027-04-01" in why[0]
    assert warnings[0].startswith("no Kubernetes version in the catalog is both in EKS standard support on 2027-04-01 "
                                  "and supported by every pinned add-on: falling back to 1.35 (extended support)")
    assert "control plane costs $0.60/hour" in warnings[1]
    prod = plan(requirements_with(), as_of=as_of)["prod-us-east-1"]
    assert prod.kubernetes_version == "1.35"
    [control_plane] = [line for line in prod.cost_lines if line.item.startswith("EKS control plane")]
    assert control_plane.usd_per_hour == pcat.extended_usd_per_hour


def test_the_default_is_never_a_version_eks_had_not_released_on_the_plan_date():
    pcat = load_platform_catalog()
    as_of = dt.date(2025, 12, 1)  # 1.35 is released on 2026-01-28, though its standard support "covers" the date
    assert pcat.version("1.35").released > as_of and pcat.version("1.35").phase(as_of) == "standard"
    version, _, _ = choose_kubernetes_version(pcat, ["keda"], as_of, wanted=None, source="platform.yaml")
    assert version == "1.34"
    with pytest.raises(RequirementsError, match=r"platform.yaml: kubernetes_version 1.35 is released in EKS on "
                                                r"2026-01-28, after the plan date 2025-12-01; choose 1.34"):
        choose_kubernetes_version(pcat, ["keda"], as_of, wanted="1.35", source="platform.yaml")


def test_a_version_newer_than_the_add_ons_support_names_the_key_to_set():
    with pytest.raises(RequirementsError) as exc:
        choose_kubernetes_version(load_platform_catalog(), ["keda"], PLAN_DATE, wanted="1.36", source="platform.yaml")
    assert str(exc.value) == ("platform.yaml: kubernetes_version 1.36 is newer than the pinned add-ons support: keda "
                              "(<= 1.35); set kubernetes_version: \"1.35\" (the newest they all support) in the "
                              "platform file, or remove it for the default")


@pytest.mark.parametrize(("current", "planned", "fix"), [
    ("1.35", "1.34", "EKS cannot downgrade a cluster; keep kubernetes_version '1.35' in platform.yaml"),
    ("1.33", "1.35", "skips a minor version: EKS upgrades one minor version at a time; set kubernetes_version: "
                     "\"1.34\" in platform.yaml"),
])
def test_a_downgrade_or_a_skipped_minor_version_is_refused_and_one_step_up_is_not(current, planned, fix):
    assert fix in kubernetes_upgrade_problem(current, planned)
    assert kubernetes_upgrade_problem("1.34", "1.35") is None and kubernetes_upgrade_problem("1.35", "1.35") is None


def test_planning_over_a_platform_config_a_cluster_cannot_move_from_exits_naming_the_file_field_and_fix(tmp_path):
    platform = bundled_platform("platform-prod-us-east-1")  # 1.35
    [path] = write_stack_configs([platform], tmp_path, source="req.yaml")
    data = yaml.safe_load(path.read_text())
    data["config"][PLATFORM_KEY]["kubernetes_version"] = "1.33"  # what the cluster runs today
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    before = path.read_text()
    with pytest.raises(StackConfigError) as exc:
        write_stack_configs([platform], tmp_path, source="req.yaml")
    assert str(exc.value).startswith(f"{path}: servingblueprints:platform.kubernetes_version: Kubernetes 1.33 -> "
                                     "1.35 skips a minor version")
    assert 'set kubernetes_version: "1.34" in platform.yaml' in str(exc.value)
    assert path.read_text() == before  # nothing written


# --- messages -------------------------------------------------------------------------------------------------------


def test_an_unquoted_kubernetes_version_gets_a_hint_to_quote_it(tmp_path):
    path = tmp_path / "platform.yaml"
    path.write_text("kubernetes_version: 1.30\n")  # YAML: the number 1.3
    with pytest.raises(RequirementsError) as exc:
        load_platform_requirements(path)
    assert ("kubernetes_version: expected a string or null, got a number 1.3; YAML reads an unquoted number as a "
            'number (1.30 becomes 1.3): quote the value as written, e.g. "1.30"') in str(exc.value)


def test_the_platform_file_schema_validates_the_bundled_platform_yaml_and_refuses_a_typo():
    import jsonschema

    from blueprints.requirements.platform_file import platform_json_schema

    schema = platform_json_schema()
    data = yaml.safe_load((EXAMPLES / "platform.yaml").read_text())
    jsonschema.validate(data, schema)
    with pytest.raises(jsonschema.ValidationError, match="sytem_nodes"):
        jsonschema.validate({**data, "sytem_nodes": {}}, schema)


def _field_paths(model: type, prefix: str = "") -> list[str]:
    """Every key path of a platform.yaml model: `system_nodes.count`, `platforms.<name>.existing_vpc.vpc_id`, ..."""
    from pydantic import BaseModel

    from blueprints.requirements.platform_file import PlatformOverride

    paths = []
    for name, field in model.model_fields.items():
        path = f"{prefix}{name}"
        paths.append(path)
        nested = [t for t in (field.annotation, *getattr(field.annotation, "__args__", ())) if isinstance(t, type)
                  and issubclass(t, BaseModel)]
        if name == "platforms":
            paths += _field_paths(PlatformOverride, "platforms.<name>.")
        elif nested:
            paths += _field_paths(nested[0], f"{path}.")
    return paths


def test_the_platforms_page_documents_every_platform_yaml_key():
    """The concepts page explains every key (the generated reference lists them; this is the prose that says why)."""
    from tests.conftest import ROOT

    page = (ROOT / "docs" / "concepts" / "platforms.md").read_text()
    section = page.split("## platform.yaml: what the platform team decides", 1)[1].split("\n## ", 1)[0]
    missing = []
    for path in _field_paths(PlatformRequirements):
        leaf = path.rsplit(".", 1)[-1]
        if f"`{path}" not in section and f"`.{leaf}`" not in section and f"`{leaf}`" not in section:
            missing.append(path)
    assert missing == []
    assert "`environments.<env>.platform`" in section


@pytest.mark.parametrize("cidr, says", [
    ("10.30.5.0/16", "host bits set): write its network address, 10.30.0.0/16"),  # ipaddress refuses it in the subnets
    ("10.30.0.0/8", "should be an IPv4 CIDR of /16 to /20 such as 10.0.0.0/16"),
    ("300.1.0.0/16", "should be an IPv4 CIDR of /16 to /20 such as 10.0.0.0/16"),
])
def test_a_vpc_cidr_that_no_vpc_can_take_is_refused_naming_the_field_and_the_fix(tmp_path, cidr, says):
    """A new VPC's CIDR: a network address (host bits zero: the subnets are cut from it with `ipaddress`, which
    refuses 10.30.5.0/16) of /16 to /20; refused where it enters, with what to write."""
    with pytest.raises(RequirementsError) as exc:
        load_platform_file(tmp_path, {"platforms": {"prod-us-east-1": {"vpc_cidr": cidr}}})
    assert "platforms.prod-us-east-1.vpc_cidr" in str(exc.value) and says in str(exc.value), str(exc.value)
