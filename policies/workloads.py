"""Workload rules: no static AWS credentials or plain-text secrets in pod specs, pinned images, unprivileged
containers (and, below, the service workloads' security rules)."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

from policies.resources import UNKNOWN, Res, container_label, env_vars, get, items, mapping, pod_template

_AWS_KEY_ENV_NAMES: Final = frozenset({"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"})
_AWS_ACCESS_KEY_ID = re.compile(r"\b(AKIA|ASIA)[A-Z0-9]{16}\b")


def _secret_entries(props: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """A Secret's visible (key, decoded value) pairs. Offline, the SDK-marked data is one opaque placeholder."""
    for key, value in mapping(props.get("stringData")).items():
        yield key, value if isinstance(value, str) else ""
    for key, value in mapping(props.get("data")).items():
        yield key, _b64_text(value) if isinstance(value, str) else ""


def _b64_text(value: str) -> str:
    try:
        return base64.b64decode(value, validate=True).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return value


def check_no_static_aws_credentials(res: Res, config: Mapping[str, Any]) -> list[str]:
    """No AWS access keys in pod env (by name or by AKIA/ASIA value), in Secrets, or in an AWS provider."""
    fix = "use the pod's IAM identity (EKS Pod Identity or IRSA) instead of access keys"
    pod = pod_template(res)
    if pod is not None:
        return [f"{container_label(res, c)} sets {e.get('name')!r}"
                + (" to an AWS access key id" if e.get("name") not in _AWS_KEY_ENV_NAMES else "")
                + f", a static AWS credential; {fix}"
                for c, e in env_vars(pod)
                if e.get("name") in _AWS_KEY_ENV_NAMES
                or (isinstance(e.get("value"), str) and _AWS_ACCESS_KEY_ID.search(e["value"]))]
    if res.type == "kubernetes:core/v1:Secret":
        return [f"{res.label} holds {key!r}, a static AWS credential; {fix}"
                for key, value in _secret_entries(res.props)
                if key.upper() in _AWS_KEY_ENV_NAMES or _AWS_ACCESS_KEY_ID.search(value)]
    if res.type == "pulumi:providers:aws" and (res.props.get("accessKey") or res.props.get("secretKey")):
        return [f"{res.label} is configured with an access key (aws:accessKey/aws:secretKey); use an IAM role "
                "(environment credentials, SSO or OIDC) for the deployment instead"]
    return []


_SECRET_ENV_NAME = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|PRIVATE_?KEY|CREDENTIAL)", re.IGNORECASE)


def check_no_plaintext_secrets(res: Res, config: Mapping[str, Any]) -> list[str]:
    """Pod env vars named like credentials take their value from a Secret (valueFrom), never a literal `value`."""
    pod = pod_template(res)
    if pod is None:
        return []
    return [f"{container_label(res, c)} sets {e['name']!r} as a literal value, readable by anyone who can read the "
            f"{res.label.split(' ')[0]}; store it in a Kubernetes Secret (from a Pulumi secret) and use "
            "env.valueFrom.secretKeyRef"
            for c, e in env_vars(pod)
            if isinstance(e.get("name"), str) and e["name"] not in _AWS_KEY_ENV_NAMES
            and _SECRET_ENV_NAME.search(e["name"]) and e.get("value") not in (None, "", UNKNOWN)]


def image_tag_problem(image: str) -> str | None:
    """Why an image reference is not pinned (`latest` or no tag), or None when it has a version tag or a digest."""
    if "@sha256:" in image:
        return None
    last = image.rsplit("/", 1)[-1]
    if ":" not in last:
        return "has no tag (pulls :latest)"
    if last.rsplit(":", 1)[1] == "latest":
        return "uses the mutable tag :latest"
    return None


def check_images_pinned(res: Res, config: Mapping[str, Any]) -> list[str]:
    """Container images (pods and SageMaker models) carry a version tag or digest, never `latest` or nothing."""
    pod = pod_template(res)
    if pod is not None:
        images = [(container_label(res, c), c.get("image")) for c in pod.containers()]
    elif res.type == "aws:sagemaker/model:Model":
        containers = [res.props.get("primaryContainer")] + items(res.props.get("containers"))
        images = [(f"a container of {res.label}", get(c, "image")) for c in containers if c]
    else:
        return []
    return [f"{where}: image {image!r} {problem}; pin a version tag (e.g. vllm/vllm-openai:v0.11.0) or a digest"
            for where, image in images if isinstance(image, str) and (problem := image_tag_problem(image))]

def check_no_privileged_containers(res: Res, config: Mapping[str, Any]) -> list[str]:
    """Containers are not privileged and set securityContext.allowPrivilegeEscalation: false."""
    pod = pod_template(res)
    if pod is None:
        return []
    found = []
    for c in pod.containers():
        privileged = get(c, "securityContext", "privileged")
        escalation = get(c, "securityContext", "allowPrivilegeEscalation")
        if privileged is True:
            found.append(f"{container_label(res, c)} is privileged (full access to the node); remove "
                         "securityContext.privileged (the NVIDIA device plugin hands out GPUs without it)")
        if escalation is not False and escalation is not UNKNOWN:
            found.append(f"{container_label(res, c)} allows privilege escalation "
                         f"(allowPrivilegeEscalation is {'unset' if escalation is None else escalation}); set "
                         "securityContext.allowPrivilegeEscalation: false")
    return found


