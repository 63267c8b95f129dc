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




# --- Service workloads' security: non-root, no model control, allowed registries, own namespaces -----------------


def check_containers_non_root(res: Res, config: Mapping[str, Any]) -> list[str]:
    """Containers run as non-root (`runAsNonRoot: true`, never UID 0, from the container or the pod) and drop every
    Linux capability, adding none."""
    pod = pod_template(res)
    if pod is None or pod.spec.get("securityContext") is UNKNOWN:
        return []
    pod_sc = mapping(pod.spec.get("securityContext"))
    found = []
    for c in pod.containers():
        sc = c.get("securityContext")
        if sc is UNKNOWN:
            continue
        sc = mapping(sc)
        non_root = sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot"))
        uid = sc.get("runAsUser", pod_sc.get("runAsUser"))
        where = container_label(res, c)
        if UNKNOWN in (non_root, uid):
            continue
        if uid == 0:
            found.append(f"{where} runs as UID 0 (root); set securityContext.runAsUser to the image's non-root UID")
        elif non_root is not True:
            found.append(f"{where} may run as root (runAsNonRoot is {'unset' if non_root is None else non_root}, so "
                         "the image's default user, often root, applies); set securityContext.runAsNonRoot: true and "
                         "runAsUser/runAsGroup to the image's documented non-root user")
        drop, add = get(sc, "capabilities", "drop"), get(sc, "capabilities", "add")
        if drop is not UNKNOWN and "ALL" not in items(drop):
            found.append(f"{where} keeps the runtime's default Linux capabilities; set securityContext.capabilities"
                         ".drop: [ALL]")
        if add not in (None, UNKNOWN) and items(add):
            found.append(f"{where} adds capabilities {items(add)}; a model server needs none: remove "
                         "securityContext.capabilities.add")
    return found


#: Triton model control modes that let a client load or unload models (server command_line_parser.cc, v2.62.0:
#: none | poll | explicit; "Allowing dynamic updates to the model repository can lead to arbitrary code execution",
#: docs/customization_guide/deploy.md).
_MODEL_CONTROL_MODES: Final = ("explicit", "poll")
#: vLLM's runtime LoRA loading (`/v1/load_lora_adapter`), enabled by this variable (vllm/envs.py).
_VLLM_RUNTIME_LORA: Final = "VLLM_ALLOW_RUNTIME_LORA_UPDATING"


def _flag_values(words: list[str], flag: str) -> list[str]:
    """Values of `--flag=value` and `--flag value` in an argument list."""
    values = [w.split("=", 1)[1] for w in words if w.startswith(f"{flag}=")]
    values += [b for a, b in zip(words, words[1:]) if a == flag]
    return values


def check_model_control_disabled(res: Res, config: Mapping[str, Any]) -> list[str]:
    """No model server lets clients load or unload models: Triton's `--model-control-mode` is none (its default) with
    no `--load-model`, and vLLM's runtime LoRA updating is off."""
    pod = pod_template(res)
    if pod is None:
        return []
    found = []
    for c in pod.containers():
        words = [w for w in items(c.get("command")) + items(c.get("args")) if isinstance(w, str)]
        modes = [m for m in _flag_values(words, "--model-control-mode") if m in _MODEL_CONTROL_MODES]
        loads = [w for w in words if w.startswith("--load-model")]
        where = container_label(res, c)
        if modes or loads:
            flags = [*(f"--model-control-mode={m}" for m in modes), *loads[:1]]
            found.append(f"{where} enables model control ({', '.join(flags)}): anyone who reaches the server can "
                         "load or unload models, which can run arbitrary code; use --model-control-mode=none (every model in the repository loads at start) and drop "
                         "--load-model")
        for e in (e for e in items(c.get("env")) if isinstance(e, Mapping)):
            if e.get("name") == _VLLM_RUNTIME_LORA and str(e.get("value", "")).lower() in ("1", "true"):
                found.append(f"{where} sets {_VLLM_RUNTIME_LORA}, so clients can load LoRA adapters at run time; "
                             "remove it and bake adapters into the deployment")
    return found


def image_registry(image: str) -> str:
    """`docker.io/vllm/vllm-openai` for `vllm/vllm-openai:v0.11.0` (Docker's implicit registry and `library/`):
    the image's registry and repository, without tag or digest."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        name = name[: -len(last)] + last.split(":", 1)[0]
    first = name.split("/", 1)[0]
    if "/" not in name:
        return f"docker.io/library/{name}"
    if "." in first or ":" in first or first == "localhost":
        return name
    return f"docker.io/{name}"


_ECR = re.compile(r"^([0-9]{12})\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com(\.cn)?/")


def registry_allowed(image: str, config: Mapping[str, Any]) -> bool:
    """Whether an image comes from an allowed registry prefix or the ECR of an allowed account."""
    full = image_registry(image)
    if any(full.startswith(prefix) for prefix in config["allowedRegistries"]):
        return True
    match = _ECR.match(full)
    return bool(match and match.group(1) in config["ecrAccountIds"])


def check_images_from_allowed_registries(res: Res, config: Mapping[str, Any]) -> list[str]:
    """Container images (pods and SageMaker models) come from the allowed registries (`allowedRegistries` prefixes,
    default the catalog's) or the ECR of an allowed account (`ecrAccountIds`)."""
    pod = pod_template(res)
    if pod is not None:
        images = [(container_label(res, c), c.get("image")) for c in pod.containers()]
    elif res.type == "aws:sagemaker/model:Model":
        containers = [res.props.get("primaryContainer")] + items(res.props.get("containers"))
        images = [(f"a container of {res.label}", get(c, "image")) for c in containers if c]
    else:
        return []
    return [f"{where}: image {image!r} comes from {image_registry(image).rsplit('/', 1)[0]!r}, outside the allowed "
            "registries; use an image from an allowed registry (mirror it into your ECR) or add the registry to "
            "allowedRegistries (an ECR account to ecrAccountIds) in the policy config"
            for where, image in images if isinstance(image, str) and not registry_allowed(image, config)]


def check_not_in_system_namespaces(res: Res, config: Mapping[str, Any]) -> list[str]:
    """Service workloads run in their own namespace, never in `kube-system` or `default` (or none, which is
    `default`)."""
    if pod_template(res) is None:
        return []
    namespace = get(res.props, "metadata", "namespace")
    if namespace is UNKNOWN:
        return []
    if namespace in (None, "") or namespace in config["forbiddenNamespaces"]:
        shown = namespace or "default (none set)"
        return [f"{res.label} runs in namespace {shown!r}, shared with the cluster's own components; put it in the "
                "service's own namespace (components.serving.service_namespace)"]
    return []
