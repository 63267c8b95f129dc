"""Network: the VPC a stack's cluster (or private SageMaker endpoint) runs in, or an existing one.

A new network spans up to `NETWORK_AZ_COUNT` availability zones from the region's AZ lookup (never fewer than 2),
chosen by zone ID (the same physical zone in every account; names map per account in older regions) and never one
where EKS refuses cluster subnets (`excluded_zone_ids`, blueprints/catalog/kubernetes.yaml):
one public and one private subnet per zone, an internet gateway, NAT (one gateway outside production, one per zone in
production so a zone outage does not cut egress), one route table per private subnet, and two security groups
(workloads; interface endpoints). A private network reaches AWS APIs through VPC endpoints (the planned
`interface_endpoints`, each with private DNS, and S3's gateway endpoint in a new VPC), so weights, images and
credentials never cross the internet: which APIs each part of a platform calls is `blueprints/catalog/endpoints.yaml`.

An existing VPC (`blueprints.requirements.platform_file.ExistingVpc`, from the platform team's platform.yaml) is used instead when given.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws
from blueprints.contracts.platform import vpc_zone_ids
from blueprints.core import defaults
from blueprints.requirements.platform_file import ExistingVpc

#: Subnet tags the AWS Load Balancer Controller uses to discover subnets (kubernetes-sigs.github.io/
#: aws-load-balancer-controller/latest/deploy/subnet_discovery/).
PUBLIC_ELB_TAG = "kubernetes.io/role/elb"
INTERNAL_ELB_TAG = "kubernetes.io/role/internal-elb"


@dataclass
class NetworkArgs:
    """Inputs of `Network`.

    Args:
        region: AWS region, e.g. `us-east-1` (names the VPC endpoint services).
        tags: AWS tags for every taggable child.
        interface_endpoints: AWS services reached through interface VPC endpoints (`com.amazonaws.<region>.<name>`,
            private DNS on; `s3` in an existing VPC, whose route tables are its owner's). Non-empty makes the
            network private: a new VPC also gets S3's gateway endpoint. Defaults to none (AWS APIs through NAT).
        nat_per_az: one NAT gateway per zone (production); otherwise one shared NAT gateway. Defaults to True.
        existing: use this VPC and its subnets; only the security groups are created. Defaults to a new VPC.
        cidr_block: address space of a new VPC. Defaults to `defaults.VPC_CIDR`.
        az_count: zones a new VPC spans (2 or more, capped by the region). Defaults to `defaults.NETWORK_AZ_COUNT`.
        cluster_name: EKS cluster name for the `kubernetes.io/cluster/<name>` subnet tag. Defaults to no tag.
        excluded_zone_ids: Availability Zone IDs a new VPC must not use (EKS refuses cluster subnets there, e.g.
            `use1-az3`). Defaults to none.
    """

    region: str
    tags: dict[str, str]
    interface_endpoints: list[str] = field(default_factory=list)
    nat_per_az: bool = True
    existing: ExistingVpc | None = None
    cidr_block: str = defaults.VPC_CIDR
    az_count: int = defaults.NETWORK_AZ_COUNT
    cluster_name: str | None = None
    excluded_zone_ids: list[str] = field(default_factory=list)


def subnet_cidrs(cidr_block: str, zones: int) -> tuple[list[str], list[str]]:
    """(public, private) subnet CIDRs for `zones` zones: a /18 private subnet per zone (pods get VPC addresses),
    and a small public subnet per zone carved out of the fourth /18 (load balancers and NAT gateways only)."""
    vpc = ipaddress.ip_network(cidr_block)
    quarters = list(vpc.subnets(prefixlen_diff=2))
    private = [str(n) for n in quarters[:zones]]
    public = [str(n) for n in list(quarters[3].subnets(prefixlen_diff=4))[:zones]]
    return public, private


class Network(pulumi.ComponentResource):
    """A VPC over >= 2 zones with NAT, route tables, security groups and (when private) VPC endpoints.

    Outputs: `vpc_id`, `vpc_cidr`, `private_subnet_ids`, `public_subnet_ids`, `workload_security_group_id`.

    Example:
        net = Network("chat-prod-network", NetworkArgs(region="us-east-1", tags=tags, interface_endpoints=["ec2"]))
    """

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("servingblueprints:index:Network", name, None, opts)
        if args.az_count < 2:
            raise ValueError(f"NetworkArgs.az_count={args.az_count}: EKS needs subnets in at least 2 zones")
        child = pulumi.ResourceOptions(parent=self)
        self.endpoints: list[aws.ec2.VpcEndpoint] = []
        self.nat_gateways: list[aws.ec2.NatGateway] = []
        #: What the VPC's egress rests on: NAT gateways, routes, route table associations (a subnet losing its own
        #: falls back to the main route table, which has no NAT route) and VPC endpoints. Whatever runs in the VPC
        #: and needs egress until it is gone (the cluster, and through it the nodes, Karpenter and its node classes'
        #: finalizers) depends on them, so `pulumi destroy` deletes them last.
        self.egress: list[pulumi.Resource] = []
        if args.existing:
            self.vpc = None
            vpc_id: pulumi.Input[str] = args.existing.vpc_id
            vpc_cidr: pulumi.Input[str] = aws.ec2.get_vpc_output(id=args.existing.vpc_id,
                                                                 opts=pulumi.InvokeOutputOptions(parent=self)
                                                                 ).cidr_block
            self.private_subnet_ids: pulumi.Output[list[str]] = pulumi.Output.from_input(
                list(args.existing.private_subnet_ids))
            self.public_subnet_ids: pulumi.Output[list[str]] = pulumi.Output.from_input(
                list(args.existing.public_subnet_ids))
            private_route_table_ids: list[pulumi.Input[str]] = []
        else:
            zones = self._zones(args)
            self.vpc = aws.ec2.Vpc(f"{name}-vpc", cidr_block=args.cidr_block, enable_dns_hostnames=True,
                                   enable_dns_support=True, tags={**args.tags, "Name": f"{name}-vpc"}, opts=child)
            vpc_id, vpc_cidr = self.vpc.id, self.vpc.cidr_block
            private_route_table_ids = self._subnets_and_routes(name, args, zones, child)
        self.workload_security_group = self._security_groups(name, args, vpc_id, vpc_cidr, child)
        if args.interface_endpoints:
            self._endpoints(name, args, vpc_id, private_route_table_ids, child)
        self.egress += [*self.nat_gateways, *self.endpoints]
        self.vpc_id = pulumi.Output.from_input(vpc_id)
        self.vpc_cidr = pulumi.Output.from_input(vpc_cidr)
        self.workload_security_group_id = self.workload_security_group.id
        self.register_outputs({"vpc_id": self.vpc_id, "private_subnet_ids": self.private_subnet_ids,
                               "public_subnet_ids": self.public_subnet_ids,
                               "workload_security_group_id": self.workload_security_group_id})

    def _zones(self, args: NetworkArgs) -> list[str]:
        """Up to `az_count` available zone IDs, in ID order, none of `excluded_zone_ids`."""
        found = aws.get_availability_zones(state="available", opts=pulumi.InvokeOptions(parent=self)).zone_ids
        chosen = vpc_zone_ids(found, args.excluded_zone_ids, args.az_count)
        if len(chosen) < 2:  # az_count is at least 2: fewer means fewer usable
            raise pulumi.ResourceError(f"region {args.region} reports {len(chosen)} available zone(s) EKS accepts "
                                       f"({', '.join(chosen) or 'none'}; refused: "
                                       f"{', '.join(args.excluded_zone_ids) or 'none'}); EKS needs at least 2", self)
        return chosen

    def _subnets_and_routes(self, name: str, args: NetworkArgs, zones: list[str],
                            child: pulumi.ResourceOptions) -> list[pulumi.Output[str]]:
        assert self.vpc is not None
        cluster_tag = {f"kubernetes.io/cluster/{args.cluster_name}": "shared"} if args.cluster_name else {}
        public_cidrs, private_cidrs = subnet_cidrs(args.cidr_block, len(zones))
        igw = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=self.vpc.id, tags={**args.tags, "Name": f"{name}-igw"},
                                      opts=child)
        public_rt = aws.ec2.RouteTable(f"{name}-public-rt", vpc_id=self.vpc.id,
                                       tags={**args.tags, "Name": f"{name}-public"}, opts=child)
        self.egress.append(aws.ec2.Route(f"{name}-public-default", route_table_id=public_rt.id,
                                         destination_cidr_block="0.0.0.0/0", gateway_id=igw.id, opts=child))
        public, private, private_rts = [], [], []
        for i, (zone, pub_cidr, priv_cidr) in enumerate(zip(zones, public_cidrs, private_cidrs)):
            pub = aws.ec2.Subnet(f"{name}-public-{i}", vpc_id=self.vpc.id, cidr_block=pub_cidr, availability_zone_id=zone,
                                 map_public_ip_on_launch=False,
                                 tags={**args.tags, **cluster_tag, "Name": f"{name}-public-{zone}",
                                       PUBLIC_ELB_TAG: "1"},
                                 opts=child)
            self.egress.append(aws.ec2.RouteTableAssociation(f"{name}-public-{i}", subnet_id=pub.id,
                                                             route_table_id=public_rt.id, opts=child))
            priv = aws.ec2.Subnet(f"{name}-private-{i}", vpc_id=self.vpc.id, cidr_block=priv_cidr,
                                  availability_zone_id=zone,
                                  tags={**args.tags, **cluster_tag, "Name": f"{name}-private-{zone}",
                                        INTERNAL_ELB_TAG: "1"},
                                  opts=child)
            public.append(pub)
            private.append(priv)
        nat_count = len(zones) if args.nat_per_az else 1
        for i in range(nat_count):
            eip = aws.ec2.Eip(f"{name}-nat-{i}", domain="vpc", tags={**args.tags, "Name": f"{name}-nat-{i}"},
                              opts=child)
            self.nat_gateways.append(aws.ec2.NatGateway(
                f"{name}-nat-{i}", allocation_id=eip.id, subnet_id=public[i].id,
                tags={**args.tags, "Name": f"{name}-nat-{zones[i]}"},
                opts=pulumi.ResourceOptions(parent=self, depends_on=[igw])))
        for i, priv in enumerate(private):
            nat = self.nat_gateways[i if args.nat_per_az else 0]
            rt = aws.ec2.RouteTable(f"{name}-private-rt-{i}", vpc_id=self.vpc.id,
                                    tags={**args.tags, "Name": f"{name}-private-{zones[i]}"}, opts=child)
            self.egress += [
                aws.ec2.Route(f"{name}-private-default-{i}", route_table_id=rt.id, destination_cidr_block="0.0.0.0/0",
                              nat_gateway_id=nat.id, opts=child),
                aws.ec2.RouteTableAssociation(f"{name}-private-{i}", subnet_id=priv.id, route_table_id=rt.id,
                                              opts=child)]
            private_rts.append(rt.id)
        self.private_subnet_ids = pulumi.Output.all(*[s.id for s in private])
        self.public_subnet_ids = pulumi.Output.all(*[s.id for s in public])
        return private_rts

    def _security_groups(self, name: str, args: NetworkArgs, vpc_id: pulumi.Input[str],
                         vpc_cidr: pulumi.Input[str], child: pulumi.ResourceOptions) -> aws.ec2.SecurityGroup:
        workload = aws.ec2.SecurityGroup(f"{name}-workload-sg", vpc_id=vpc_id,
                                         description="Serving workloads: traffic between members, all egress",
                                         tags={**args.tags, "Name": f"{name}-workload"}, opts=child)
        aws.vpc.SecurityGroupIngressRule(f"{name}-workload-self", security_group_id=workload.id,
                                         referenced_security_group_id=workload.id, ip_protocol="-1",
                                         description="members of the serving security group", tags=args.tags,
                                         opts=child)
        aws.vpc.SecurityGroupEgressRule(f"{name}-workload-egress", security_group_id=workload.id,
                                        cidr_ipv4="0.0.0.0/0", ip_protocol="-1",
                                        description="image pulls, S3, AWS APIs", tags=args.tags, opts=child)
        self.endpoint_security_group = None
        if args.interface_endpoints:
            self.endpoint_security_group = aws.ec2.SecurityGroup(
                f"{name}-endpoints-sg", vpc_id=vpc_id, description="VPC interface endpoints: HTTPS from the VPC",
                tags={**args.tags, "Name": f"{name}-endpoints"}, opts=child)
            aws.vpc.SecurityGroupIngressRule(f"{name}-endpoints-https",
                                             security_group_id=self.endpoint_security_group.id,
                                             cidr_ipv4=vpc_cidr, ip_protocol="tcp", from_port=443, to_port=443,
                                             description="HTTPS from the VPC", tags=args.tags, opts=child)
        return workload

    def _endpoints(self, name: str, args: NetworkArgs, vpc_id: pulumi.Input[str],
                   route_table_ids: list[pulumi.Input[str]], child: pulumi.ResourceOptions) -> None:
        if route_table_ids:  # an existing VPC's route tables are its owner's: no gateway endpoint added there
            self.endpoints.append(aws.ec2.VpcEndpoint(
                f"{name}-s3", vpc_id=vpc_id, service_name=f"com.amazonaws.{args.region}.s3",
                vpc_endpoint_type="Gateway", route_table_ids=route_table_ids, tags={**args.tags, "Name": f"{name}-s3"},
                opts=child))
        assert self.endpoint_security_group is not None
        for service in args.interface_endpoints:
            suffix = service.replace(".", "-")
            # S3's interface endpoint resolves the regional name for every resolver: no gateway endpoint needed
            # (`private_dns_only_for_inbound_resolver_endpoint` true would require one; pulumi_aws 7.51 ec2
            # VpcEndpointDnsOptions).
            dns = {"private_dns_only_for_inbound_resolver_endpoint": False} if service == "s3" else None
            self.endpoints.append(aws.ec2.VpcEndpoint(
                f"{name}-{suffix}", vpc_id=vpc_id, service_name=f"com.amazonaws.{args.region}.{service}",
                vpc_endpoint_type="Interface", private_dns_enabled=True, dns_options=dns,
                subnet_ids=self.private_subnet_ids, security_group_ids=[self.endpoint_security_group.id],
                tags={**args.tags, "Name": f"{name}-{suffix}"}, opts=child))
