"""The shared platform as the program builds it: EKS with its add-ons in a deployable order, Karpenter's AWS side and
node classes, the Helm add-ons with explicit names and pinned versions, and the outputs contract."""

from __future__ import annotations

import json
import math

import pytest

from blueprints.contracts.memory import weights_gib
from blueprints.catalog import load_catalog
from blueprints.catalog.addons import load_platform_catalog
from blueprints.requirements.model import Precision
from blueprints.contracts.platform import PlatformOutputs
from tests.blueprint_builders import bundled_platform, manifests, run_platform

RELEASE = "kubernetes:helm.sh/v3:Release"


@pytest.fixture(scope="module")
def prod():
    return bundled_platform("platform-prod-us-east-1")


@pytest.fixture(scope="module")
def prod_run(prod):
    return run_platform(prod)


@pytest.fixture(scope="module")
def dev_run():
    return run_platform(bundled_platform("platform-dev-us-west-2"))


def releases(run) -> dict:
    return {r.inputs["name"]: r for r in run.of_type(RELEASE)}


def names(run, record) -> set[str]:
    by_urn = {r.urn: r.name for r in run.records}
    return {by_urn.get(u, u) for u in record.dependencies}


def test_the_cluster_is_named_after_the_platform_stack_at_the_planned_version(prod_run, prod):
    cluster = prod_run.one("aws:eks/cluster:Cluster").inputs
    assert cluster["name"] == "platform-prod-us-east-1" == prod.cluster_name
    assert cluster["version"] == prod.kubernetes_version == "1.35"
    assert cluster["accessConfig"] == {"authenticationMode": "API", "bootstrapClusterCreatorAdminPermissions": True}
    assert cluster["bootstrapSelfManagedAddons"] is False
    assert cluster["enabledClusterLogTypes"] == ["api", "audit", "authenticator", "controllerManager", "scheduler"]
    # Explicit, never AWS's default by omission: no automatic control-plane upgrade past the pinned add-ons.
    assert cluster["upgradePolicy"] == {"supportType": "EXTENDED"}


def test_vpc_cni_enforces_network_policy_and_comes_before_any_node(prod_run):
    addons = {r.inputs["addonName"]: r for r in prod_run.of_type("aws:eks/addon:Addon")}
    assert json.loads(addons["vpc-cni"].inputs["configurationValues"]) == {"enableNetworkPolicy": "true"}
    groups = prod_run.of_type("aws:eks/nodeGroup:NodeGroup")
    for system in groups:
        assert {addons["vpc-cni"].name, addons["eks-pod-identity-agent"].name} <= names(prod_run, system)
        for late in ("kube-proxy", "coredns", "aws-ebs-csi-driver"):
            assert system.name in names(prod_run, addons[late]), late
    assert addons["aws-ebs-csi-driver"].inputs["podIdentityAssociations"][0]["serviceAccount"] == \
        "ebs-csi-controller-sa"


def test_the_system_node_groups_are_the_only_node_groups_and_have_room_for_the_largest_download(prod_run, prod):
    groups = prod_run.of_type("aws:eks/nodeGroup:NodeGroup")
    # One group per zone holding a system node, each never below one node (Prometheus's zonal volume, below).
    assert len(groups) == min(prod.system_nodes.count, prod.network.az_count) == 2
    assert sum(g.inputs["scalingConfig"]["minSize"] for g in groups) == prod.system_nodes.count == 2
    [group, _] = groups
    assert group.inputs["labels"] == {"servingblueprints.io/pool": "system"}
    assert group.inputs["instanceTypes"] == ["m7i.xlarge"] and group.inputs["scalingConfig"]["minSize"] == 1
    # Llama-3.1-8B is the largest hf:// model landing here: its download (weights + 10 % + 2 GiB) plus kube-reserved
    # (1 GiB), the OS, the controllers' and the download's images (10 + 10 + 30 GiB) fit below the kubelet's 10 %
    # eviction threshold.
    weights = weights_gib(load_catalog().model("llama-3.1-8b").architecture, Precision.BF16)
    assert group.inputs["diskSize"] == prod.system_nodes.disk_gib == math.ceil((weights * 1.1 + 2 + 1 + 50) / 0.9)
    assert group.inputs["amiType"] == "AL2023_x86_64_STANDARD"


def test_every_add_on_is_a_named_release_at_its_catalog_version(prod_run, prod):
    pcat = load_platform_catalog()
    found = releases(prod_run)
    for addon in prod.addons:
        record = found[pcat.addon(addon.id).release]
        assert record.inputs["version"] == addon.version
        assert record.inputs["namespace"] == pcat.addon(addon.id).namespace
    assert "karpenter-crd" in found  # the CRD chart, installed first


def test_karpenter_installs_its_crds_first_and_runs_with_its_queue_and_identity(prod_run):
    found = releases(prod_run)
    main = found["karpenter"]
    assert main.inputs["skipCrds"] is True and main.inputs["chart"] == "oci://public.ecr.aws/karpenter/karpenter"
    assert main.inputs["values"]["settings"] == {"clusterName": "platform-prod-us-east-1",
                                                  "interruptionQueue": "platform-prod-us-east-1",
                                                  "isolatedVPC": False}  # a public platform: NAT reaches pricing
    waits = names(prod_run, main)
    assert found["karpenter-crd"].name in waits
    assert {"platform-prod-us-east-1-addons-karpenter-controller-identity",
            "platform-prod-us-east-1-addons-karpenter-node-access"} <= waits
    queue = prod_run.one("aws:sqs/queue:Queue").inputs
    assert queue["name"] == "platform-prod-us-east-1" and queue["messageRetentionSeconds"] == 300
    rules = [json.loads(r.inputs["eventPattern"]) for r in prod_run.of_type("aws:cloudwatch/eventRule:EventRule")]
    assert sorted(r["detail-type"][0] for r in rules) == [
        "AWS Health Event", "EC2 Capacity Reservation Instance Interruption Warning",
        "EC2 Instance Rebalance Recommendation", "EC2 Instance State-change Notification",
        "EC2 Spot Instance Interruption Warning"]


def test_the_karpenter_controller_policy_is_filled_for_this_cluster_and_spot_only_where_allowed(prod_run, dev_run):
    def policy(run):
        [p] = [r for r in run.of_type("aws:iam/rolePolicy:RolePolicy") if "karpenter" in r.name]
        return json.loads(p.inputs["policy"])

    prod_policy, dev_policy = policy(prod_run), policy(dev_run)
    assert "${" not in json.dumps(prod_policy)
    assert len(prod_policy["Statement"]) == 18
    describe = next(s for s in prod_policy["Statement"] if s["Sid"] == "AllowAPIServerEndpointDiscovery")
    assert describe["Resource"] == ["arn:aws:eks:us-east-1:123456789012:cluster/platform-prod-us-east-1"]
    spot = "AllowSpotServiceLinkedRoleCreation"
    assert spot not in {s["Sid"] for s in prod_policy["Statement"]}  # production: no spot anywhere
    assert spot in {s["Sid"] for s in dev_policy["Statement"]}  # chat-assistant-dev runs on spot


def test_the_load_balancer_controller_gets_its_region_vpc_policy_and_no_service_webhook(prod_run):
    values = releases(prod_run)["aws-load-balancer-controller"].inputs["values"]
    assert values["clusterName"] == "platform-prod-us-east-1" and values["region"] == "us-east-1"
    assert values["vpcId"].startswith("vpc-")
    assert values["keepTLSSecret"] is True and values["enableServiceMutatorWebhook"] is False
    [policy] = [r for r in prod_run.of_type("aws:iam/policy:Policy") if "lbc" in r.name]
    statements = json.loads(policy.inputs["policy"])["Statement"]
    assert len(statements) == 16 and len({a for s in statements for a in s["Action"]}) == 80
    assert "${" not in policy.inputs["policy"]


def test_prometheus_picks_up_every_servicemonitor_and_rule_and_keeps_its_data(prod_run):
    values = releases(prod_run)["kube-prometheus-stack"].inputs["values"]
    spec = values["prometheus"]["prometheusSpec"]
    for kind in ("serviceMonitor", "podMonitor", "rule", "probe", "scrapeConfig"):
        assert spec[f"{kind}SelectorNilUsesHelmValues"] is False
    assert spec["storageSpec"]["volumeClaimTemplate"]["spec"]["storageClassName"] == "gp3"
    assert values["grafana"]["admin"]["existingSecret"] == "grafana-admin"
    assert values["grafana"]["sidecar"]["dashboards"]["label"] == "grafana_dashboard"


def test_dcgm_exporter_runs_on_gpu_nodes_after_prometheus_with_honoured_pod_labels(prod_run):
    found = releases(prod_run)
    dcgm = found["dcgm-exporter"]
    assert dcgm.inputs["values"]["serviceMonitor"]["honorLabels"] is True
    assert {"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Exists"} in dcgm.inputs["values"]["tolerations"]
    assert dcgm.inputs["values"]["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert found["kube-prometheus-stack"].name in names(prod_run, dcgm)


def test_add_on_namespaces_carry_the_pod_security_level_their_add_ons_need(prod_run):
    levels = {m["metadata"]["name"]: m["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]
              for m in manifests(prod_run) if m["kind"] == "Namespace"}
    assert levels == {"dcgm-exporter": "privileged", "keda": "restricted", "monitoring": "privileged"}


def test_the_http_add_on_comes_only_with_a_scale_to_zero_service_and_after_keda(prod_run, dev_run):
    assert "keda-add-ons-http" not in releases(prod_run)
    found = releases(dev_run)
    assert found["keda"].name in names(dev_run, found["keda-add-ons-http"])


def test_node_classes_pin_the_ami_and_take_subnets_and_security_group_by_id(prod_run):
    classes = {m["metadata"]["name"]: m["spec"] for m in manifests(prod_run) if m["kind"] == "EC2NodeClass"}
    assert set(classes) == {"gpu", "cpu"}
    gpu = classes["gpu"]
    assert gpu["amiSelectorTerms"] == [{"alias": "al2023@v20260714"}]
    assert gpu["instanceStorePolicy"] == "RAID0" and "instanceStorePolicy" not in classes["cpu"]
    assert all(t["id"].startswith("subnet-") for t in gpu["subnetSelectorTerms"]) and len(gpu["subnetSelectorTerms"]) == 3
    assert gpu["securityGroupSelectorTerms"][0]["id"].startswith("sg-")
    assert gpu["metadataOptions"]["httpPutResponseHopLimit"] == 1 and gpu["metadataOptions"]["httpTokens"] == "required"


def test_gpu_node_classes_turn_on_soci_parallel_pull_through_nodeadm_and_cpu_classes_do_not(prod_run, prod):
    import yaml

    classes = {m["metadata"]["name"]: m["spec"] for m in manifests(prod_run) if m["kind"] == "EC2NodeClass"}
    planned = {nc.name: nc.fast_image_pull for nc in prod.node_classes}
    assert planned == {"gpu": True, "cpu": False}
    node_config = yaml.safe_load(classes["gpu"]["userData"])
    assert node_config == {"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig",
                           "spec": {"featureGates": {"FastImagePull": True}}}
    assert "userData" not in classes["cpu"]


def test_fast_image_pull_is_refused_on_a_node_class_that_is_not_al2023():
    from pydantic import ValidationError

    from blueprints.contracts.platform import NodeClass

    with pytest.raises(ValidationError, match="fast_image_pull is a nodeadm"):
        NodeClass(name="gpu", ami_alias="bottlerocket@v1.53.0", root_volume_gib=100, instance_store_raid0=True,
                  fast_image_pull=True)


def test_outputs_are_the_contract_and_the_kubeconfig_stays_secret(prod_run):
    assert set(PlatformOutputs.model_fields) <= set(prod_run.outputs)
    assert prod_run.outputs["kubeconfig"] == "[secret]"
    assert prod_run.outputs["prometheus_url"] == "http://kube-prometheus-stack-prometheus.monitoring.svc:9090"
    assert prod_run.outputs["node_classes"] == {"cpu": "cpu", "gpu": "gpu"}


def test_a_private_platform_uses_its_existing_vpc_a_private_api_and_vpc_endpoints():
    platform = bundled_platform("platform-prod-eu-central-1")
    run = run_platform(platform)
    cluster = run.one("aws:eks/cluster:Cluster").inputs
    assert cluster["vpcConfig"]["endpointPublicAccess"] is False
    assert run.of_type("aws:ec2/vpc:Vpc") == [] and run.of_type("aws:ec2/natGateway:NatGateway") == []
    assert cluster["vpcConfig"]["subnetIds"] == ["subnet-0b1c2d3e4f5a60711", "subnet-0b1c2d3e4f5a60712",
                                                 "subnet-0b1c2d3e4f5a60713"]
    endpoints = sorted(r.inputs["serviceName"] for r in run.of_type("aws:ec2/vpcEndpoint:VpcEndpoint"))
    assert endpoints == sorted(f"com.amazonaws.eu-central-1.{s}" for s in platform.network.interface_endpoints)
    assert len(endpoints) == 9  # test_reachability: every API its nodes, add-ons and pods call
    key = run.one("aws:kms/key:Key").inputs
    assert key["enableKeyRotation"] is True and cluster["encryptionConfig"]["resources"] == ["secrets"]


def test_a_deployer_role_gets_an_access_entry_instead_of_the_creator_bootstrap(prod):
    access = prod.access.model_copy(update={"deployer_role_arn": "arn:aws:iam::123456789012:role/ci-deployer",
                                            "admin_role_arns": ["arn:aws:iam::123456789012:role/platform-admins"],
                                            "account_id": "123456789012"})
    run = run_platform(prod.model_copy(update={"access": access}))
    assert run.one("aws:eks/cluster:Cluster").inputs["accessConfig"]["bootstrapClusterCreatorAdminPermissions"] is False
    entries = {r.inputs["principalArn"]: r.inputs for r in run.of_type("aws:eks/accessEntry:AccessEntry")}
    assert entries["arn:aws:iam::123456789012:role/ci-deployer"]["type"] == "STANDARD"
    assert "arn:aws:iam::123456789012:role/platform-admins" in entries
    assert sum(1 for e in entries.values() if e["type"] == "EC2_LINUX") == 1  # Karpenter's node role
    policies = {r.inputs["principalArn"]: r.inputs["policyArn"]
                for r in run.of_type("aws:eks/accessPolicyAssociation:AccessPolicyAssociation")}
    assert set(policies.values()) == {"arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"}


def test_alertmanager_pages_the_platforms_receiver_with_its_url_from_a_secret():
    """The chart's default routes every alert to the 'null' receiver: nobody was paged."""
    from components.addons import ALERT_RECEIVER_FILE, ALERT_RECEIVER_SECRET
    from tests.blueprint_builders import bundled_platform, run_platform

    platform = bundled_platform("platform-prod-us-east-1")
    assert platform.alerting.receiver.value == "slack"
    run = run_platform(platform)
    [kps] = [r for r in run.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "kube-prometheus-stack"]
    alertmanager = kps.inputs["values"]["alertmanager"]
    config = alertmanager["config"]
    assert config["route"]["receiver"] == "slack"
    [slack] = [r for r in config["receivers"] if r["name"] == "slack"]
    assert slack["slack_configs"] == [{"api_url_file": ALERT_RECEIVER_FILE, "channel": "#ml-serving-alerts",
                                       "send_resolved": True}]
    assert alertmanager["alertmanagerSpec"]["secrets"] == [ALERT_RECEIVER_SECRET]
    [secret] = [r for r in run.of_type("kubernetes:core/v1:Secret")
                if r.inputs["metadata"]["name"] == ALERT_RECEIVER_SECRET]
    assert secret.inputs["stringData"] == {"url": "[secret]"}  # the URL stays a Pulumi secret
    assert secret.urn in kps.dependencies
    assert "hooks.slack.com" not in str(kps.inputs)


def test_a_platform_without_a_receiver_says_so_and_a_production_one_is_refused():
    from blueprints.core.errors import RequirementsError
    from blueprints.requirements.platform_file import PlatformRequirements
    from blueprints.plan.platforms import ServiceFile, plan_platforms
    from blueprints.requirements.service import Requirements
    from tests.conftest import PLAN_DATE, example_data, requirements_with

    def plan(req):
        return plan_platforms([ServiceFile(None, req)], PlatformRequirements(), catalog=load_catalog(),
                              pcat=load_platform_catalog(), as_of=PLAN_DATE)

    dev_only = example_data()
    dev_only["environments"] = {"dev": dev_only["environments"]["dev"]}
    dev_only["compliance"]["audit_logging"] = False
    [platform] = plan(Requirements.model_validate(dev_only))
    assert platform.alerting.receiver is None
    assert any("no Alertmanager receiver" in w for w in platform.warnings)
    with pytest.raises(RequirementsError, match=r"production platform platform-prod-us-east-1 has no "
                                                r"alerting.receiver: every alert of its services would fire into "
                                                r"nothing"):
        plan(requirements_with(compliance={"audit_logging": False}))


@pytest.mark.parametrize("kind,key", [("pagerduty", "routing_key_file"), ("webhook", "url_file")])
def test_every_receiver_kind_reads_its_secret_from_the_mounted_file(kind, key):
    from blueprints.contracts.platform import PlatformAlerting
    from blueprints.requirements.platform_file import ReceiverKind
    from components.addons import ALERT_RECEIVER_FILE, alertmanager_config

    config = alertmanager_config(PlatformAlerting(receiver=ReceiverKind(kind)))
    [receiver] = [r for r in config["receivers"] if r["name"] == kind]
    [entry] = next(v for k, v in receiver.items() if k.endswith("_configs"))
    assert entry[key] == ALERT_RECEIVER_FILE


EGRESS = ("aws:ec2/route:Route", "aws:ec2/routeTableAssociation:RouteTableAssociation",
          "aws:ec2/natGateway:NatGateway", "aws:ec2/vpcEndpoint:VpcEndpoint")
#: What needs egress until it is gone: nodes (the system node group), Karpenter and its node classes (the finalizer
#: terminates instances through the EC2 API), every other Helm release and Kubernetes object on the cluster.
NEEDS_EGRESS = ("aws:eks/cluster:Cluster", "aws:eks/nodeGroup:NodeGroup", "aws:eks/addon:Addon", RELEASE,
                "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass")


@pytest.mark.parametrize("stack", ["platform-prod-us-east-1", "platform-prod-eu-central-1"])
def test_destroy_keeps_egress_until_the_nodes_karpenter_and_node_classes_are_gone(stack, prod_run):
    """Pulumi destroys a resource only after everything that depends on it: with every NAT route, route table
    association, NAT gateway and VPC endpoint in the dependencies (transitive, providers included) of the cluster,
    nodes, add-ons and node classes, `pulumi destroy` deletes egress last."""
    from blueprints.review.deployability.context import DependencyGraph

    run = prod_run if stack == "platform-prod-us-east-1" else run_platform(bundled_platform(stack))
    egress = {r.urn for r in run.records if r.type in EGRESS}
    # A new VPC's egress is its NAT path; an existing VPC's (its routes are its owner's) is its endpoints.
    expected = EGRESS[:3] if stack == "platform-prod-us-east-1" else EGRESS[3:]
    assert {r.type for r in run.records if r.urn in egress} == set(expected)
    graph = DependencyGraph(run.records)
    dependents = [r for r in run.records if r.type in NEEDS_EGRESS]
    assert {r.type for r in dependents} == set(NEEDS_EGRESS)
    for record in dependents:
        assert egress <= graph.closure(record), (record.name, sorted(egress - graph.closure(record)))


@pytest.mark.parametrize("stack", ["platform-prod-us-east-1", "platform-prod-eu-central-1"])
def test_prometheus_s_zonal_volume_always_has_a_system_node_in_its_zone(stack, prod_run):
    """The volume (WaitForFirstConsumer) is bound in the zone of the system node Prometheus first lands on; every
    system node group is pinned to one private subnet and never shrinks below one node, so that zone keeps one."""
    run = prod_run if stack == "platform-prod-us-east-1" else run_platform(bundled_platform(stack))
    [storage_class] = run.of_type("kubernetes:storage.k8s.io/v1:StorageClass")
    assert storage_class.inputs["volumeBindingMode"] == "WaitForFirstConsumer"
    groups = run.of_type("aws:eks/nodeGroup:NodeGroup")
    subnets = [g.inputs["subnetIds"] for g in groups]
    assert all(len(s) == 1 for s in subnets) and len({s[0] for s in subnets}) == len(groups)
    assert all(g.inputs["scalingConfig"]["minSize"] >= 1 for g in groups)
    prometheus = releases(run)["kube-prometheus-stack"].inputs["values"]["prometheus"]["prometheusSpec"]
    assert prometheus["nodeSelector"] == {"servingblueprints.io/pool": "system"}
    assert "volumeClaimTemplate" in prometheus["storageSpec"]


def test_system_nodes_spread_over_zone_groups_as_evenly_as_they_go():
    from components.cluster import system_group_sizes

    assert system_group_sizes(2, 3) == [1, 1]
    assert system_group_sizes(3, 3) == [1, 1, 1]
    assert system_group_sizes(4, 3) == [2, 1, 1]
    assert system_group_sizes(10, 2) == [5, 5]
