"""The images a stack's serving pods run, and whether each is built for the nodes' CPU architecture.

A pod whose image has no build for its node's architecture fails with "exec format error" (or never pulls), so the
planner and the stack-config reader refuse it up front, naming the image and the fix. Architectures per image come
from `blueprints/catalog/images.yaml` (with sources); an image missing there is refused on arm64 (unknown) and
allowed on x86_64 (every catalogued image has an x86_64 build).
"""

from __future__ import annotations

import re

from blueprints.core import defaults
from blueprints.contracts.blueprint import Blueprint
from blueprints.contracts.sections import SageMakerEngine
from blueprints.catalog.images import load_image_catalog


def in_private_ecr(image: str, region: str) -> bool:
    """Whether `image` (`<registry>/<repository>[:tag]`) is in an account's private ECR registry in `region`
    (`<account>.dkr.ecr.<region>.amazonaws.com`), the only registry a VPC without internet egress reaches (through its
    ecr.api, ecr.dkr and S3 endpoints; docs.aws.amazon.com/AmazonECR/latest/userguide/vpc-endpoints.html)."""
    registry = image.split("/", 1)[0]
    return re.fullmatch(rf"[0-9]{{12}}\.dkr\.ecr\.{re.escape(region)}\.amazonaws\.com", registry) is not None


def serving_images(bp: Blueprint) -> list[tuple[str, str]]:
    """(role, image) of every container of the serving pods: the engine, the authenticating proxy and the weights
    download (the AWS CLI from the model store or an `s3://` source, curl for an `https://` source, the Roles
    Anywhere credential helper beside an edge cluster's S3 download). Empty for SageMaker (AWS runs its container)."""
    if isinstance(bp.engine, SageMakerEngine):
        return []
    images = [("engine", bp.engine.image), ("authenticating proxy", defaults.ENVOY_IMAGE)]
    sources = [m.source_uri for m in bp.models]
    if bp.storage is not None or any(s.startswith("s3://") for s in sources):
        images.append(("weights download", defaults.AWS_CLI_IMAGE))
    if bp.roles_anywhere is not None:
        images.append(("IAM Roles Anywhere credential helper", defaults.CREDENTIAL_HELPER_IMAGE))
    if bp.storage is None and any(s.startswith("https://") for s in sources):
        images.append(("https download", defaults.CURL_IMAGE))
    return images


def image_problems(bp: Blueprint) -> list[str]:
    """Each serving image without a build for `compute.cpu_arch`, with the fix. Empty when every image runs there."""
    arch = bp.compute.cpu_arch.value
    catalog = load_image_catalog()
    problems = []
    for role, image in serving_images(bp):
        record = catalog.get(image)
        built = record.architectures if record else ["x86_64"]
        if arch not in built:
            known = "not in blueprints/catalog/images.yaml" if record is None else f"built for {', '.join(built)} only"
            where = ("hardware.edge_nodes.cpu_arch" if bp.compute.owned_nodes is not None else "hardware.cpu_arch")
            problems.append(f"the {role} image {image} is {known}: its pods cannot start on {arch} nodes; use "
                            f"{' or '.join(a for a in ('x86_64', 'arm64') if a in built)} nodes ({where}), or an "
                            f"image built for {arch} (add it to blueprints/catalog/images.yaml with its source)")
    return problems
