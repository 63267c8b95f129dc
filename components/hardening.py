"""Pod hardening, one way for every serving pod and Job: non-root with an explicit UID/GID (the image's documented
user, else `defaults.DEFAULT_NON_ROOT_UID`), no privilege escalation, every capability dropped, seccomp
`RuntimeDefault`, a read-only root filesystem with writable HOME/cache and /tmp directories, and no mounted
service-account token (EKS Pod Identity hands out AWS credentials through its agent, not the Kubernetes token).

Pods built this way are admitted by Pod Security `restricted`
(kubernetes.io/docs/concepts/security/pod-security-standards).
"""

from __future__ import annotations

from blueprints.catalog.processes import process_facts
from blueprints.core import defaults

HOME_VOLUME = "home"
TMP_VOLUME = "tmp"


def image_user(image: str) -> tuple[int, int]:
    """(UID, GID) an image runs as: its documented user (`blueprints/catalog/processes.yaml`, per image and version),
    else the default non-root user (never root: an image without a USER runs as any UID given writable HOME and
    cache directories)."""
    facts = process_facts(image)
    if facts is not None and facts.user is not None:
        return facts.user
    return defaults.DEFAULT_NON_ROOT_UID, defaults.DEFAULT_NON_ROOT_UID


def container_security_context(image: str) -> dict:
    """The container's securityContext: its image's non-root user, read-only root, no escalation, no capabilities."""
    uid, gid = image_user(image)
    return {"runAsNonRoot": True, "runAsUser": uid, "runAsGroup": gid, "allowPrivilegeEscalation": False,
            "privileged": False, "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"}}


def pod_security_context(fs_group: int = defaults.DEFAULT_NON_ROOT_UID) -> dict:
    """The pod's securityContext: non-root, seccomp RuntimeDefault, volumes group-owned by `fs_group`."""
    return {"runAsNonRoot": True, "fsGroup": fs_group, "seccompProfile": {"type": "RuntimeDefault"}}


def writable_env() -> list[dict[str, str]]:
    """HOME and the cache roots on the writable volume (Hugging Face, XDG caches: vLLM, torch, Triton kernels), and
    a user name for libraries that ask for one (`getpass.getuser()` reads USER when the UID has no passwd entry)."""
    return [{"name": "HOME", "value": defaults.HOME_DIR},
            {"name": "XDG_CACHE_HOME", "value": f"{defaults.HOME_DIR}/.cache"},
            {"name": "HF_HOME", "value": f"{defaults.HOME_DIR}/.cache/huggingface"},
            {"name": "USER", "value": "serving"}]


def writable_mounts() -> list[dict]:
    """HOME and /tmp mounts for a container with a read-only root filesystem."""
    return [{"name": HOME_VOLUME, "mountPath": defaults.HOME_DIR}, {"name": TMP_VOLUME, "mountPath": defaults.TMP_DIR}]


def writable_volumes() -> list[dict]:
    """The node-local emptyDirs behind `writable_mounts`, each capped at `defaults.WRITABLE_DIR_GIB`."""
    size = f"{defaults.WRITABLE_DIR_GIB}Gi"
    return [{"name": HOME_VOLUME, "emptyDir": {"sizeLimit": size}},
            {"name": TMP_VOLUME, "emptyDir": {"sizeLimit": size}}]


def harden(container: dict) -> dict:
    """A container spec with the security context of its image, the writable directories mounted and their
    environment set (a variable the container sets itself wins; its own mounts come first)."""
    own = container.get("env", [])
    names = {e["name"] for e in own}
    return {**container, "securityContext": container_security_context(container["image"]),
            "env": [*(e for e in writable_env() if e["name"] not in names), *own],
            "volumeMounts": [*container.get("volumeMounts", []), *writable_mounts()]}


def hardened_pod_spec(spec: dict) -> dict:
    """A pod spec whose containers and init containers are hardened (`harden`), with the pod security context, the
    writable volumes and no service-account token mounted."""
    out = dict(spec)
    for key in ("initContainers", "containers"):
        if key in out:
            out[key] = [harden(c) for c in out[key]]
    out["volumes"] = [*spec.get("volumes", []), *writable_volumes()]
    out["securityContext"] = pod_security_context()
    out["automountServiceAccountToken"] = False
    return out
