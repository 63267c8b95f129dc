"""Logical names whose auto-named physical names fit AWS's limits.

Pulumi auto-names an AWS resource `<logical name>-<7 random hex>` and never truncates it
(`blueprints/catalog/names.yaml`): a child named after a long stack (a 40-character service, a 20-character
environment, `eu-central-1`) would exceed a 64-character IAM role or EventBridge rule name and fail `pulumi up`
before any API call. `fit` keeps such a logical name within the type's limit: unchanged when it fits (so no deployed
resource is renamed), else a prefix of it and a digest of the whole (stable across runs, unique per name).
"""

from __future__ import annotations

import hashlib

from blueprints.catalog.names import load_name_catalog

ROLE = "aws:iam/role:Role"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
POLICY = "aws:iam/policy:Policy"
INSTANCE_PROFILE = "aws:iam/instanceProfile:InstanceProfile"
EVENT_RULE = "aws:cloudwatch/eventRule:EventRule"
EVENT_TARGET = "aws:cloudwatch/eventTarget:EventTarget"
BUCKET = "aws:s3/bucket:Bucket"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
SECURITY_GROUP = "aws:ec2/securityGroup:SecurityGroup"
LAMBDA_FUNCTION = "aws:lambda/function:Function"
SAGEMAKER_MODEL = "aws:sagemaker/model:Model"
ENDPOINT_CONFIGURATION = "aws:sagemaker/endpointConfiguration:EndpointConfiguration"
SAGEMAKER_ENDPOINT = "aws:sagemaker/endpoint:Endpoint"
#: Hex characters of the digest that stands for the cut part of a shortened name.
DIGEST_CHARS = 8


def fit(component: str, suffix: str, resource_type: str) -> str:
    """A child's logical name: `<component>-<suffix>` when its auto-name `<component>-<suffix>-<random>` fits
    `resource_type`'s physical-name limit (so no fitting name ever changes), else `<component prefix>-<8 hex of
    sha256 of the whole>-<suffix>` at the longest logical name that fits: what the child is stays readable, the
    digest keeps it unique and stable across runs.

    Args:
        component: the parent component's name (a stack's, often long).
        suffix: what the child is (`controller-role`, `capacity-reservation`), kept whole unless it alone is too long.
        resource_type: its Pulumi type token, e.g. `ROLE`; a type without a rule in names.yaml keeps the full name.
    """
    name = f"{component}-{suffix}"
    names = load_name_catalog()
    rule = names.aws_rule(resource_type)
    if rule is None:
        return name
    longest = names.longest_logical(rule)
    if len(name) <= longest:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:DIGEST_CHARS]
    room = longest - DIGEST_CHARS - 2  # two separators around the digest
    tail = suffix[-(room // 2):] if len(suffix) > room // 2 else suffix
    head = component[:room - len(tail)].rstrip("-")
    return f"{head}-{digest}-{tail.lstrip('-')}"


def bounded(name: str, resource_type: str) -> str:
    """An explicit physical name within `resource_type`'s limit: `name`, or a prefix of it and a digest of the whole
    (for names that must be known in advance, such as a SageMaker endpoint or a Lambda function's log group)."""
    rule = load_name_catalog().aws_rule(resource_type)
    if rule is None or len(name) <= rule.max:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:DIGEST_CHARS]
    return f"{name[:rule.max - DIGEST_CHARS - 1].rstrip('-')}-{digest}"
