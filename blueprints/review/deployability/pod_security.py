"""The `pod-security` check of `blueprint preview` (`blueprints.review.deployability.checks`): every pod is admitted by its
namespace's Pod Security level, as pod-security-admission checks the baseline and restricted Pod Security
Standards.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from blueprints.review.preview import DeployabilityFinding
from blueprints.review.deployability.context import (
    CheckContext, NAMESPACE, containers_of, named, get_in, list_of, pod_spec,
)


#: Pod Security Standards (kubernetes.io/docs/concepts/security/pod-security-standards): capabilities baseline
#: allows to add, and volume types restricted allows.
BASELINE_CAPABILITIES = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                         "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}


RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                      "projected", "secret"}


def pod_security_violations(spec: Mapping[str, Any], level: str) -> list[str]:
    """What the Pod Security Standards' `level` (baseline or restricted) rejects in a pod spec (empty: admitted)."""
    if level == "privileged":
        return []
    found = []
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(key):
            found.append(f"{key}: true")
    for volume in list_of(spec.get("volumes")):
        if "hostPath" in volume:
            found.append(f"hostPath volume {volume.get('name')!r}")
        elif level == "restricted" and not (set(volume) - {"name"}) <= RESTRICTED_VOLUMES:
            found.append(f"volume {volume.get('name')!r} of type {sorted(set(volume) - {'name'})}")
    # The pod-level fields are checked on their own: a container's value does not excuse a bad pod-level one
    # (pod-security-admission policy/check_runAsUser.go, check_runAsNonRoot.go, check_seccompProfile_*.go).
    pod_sc = spec.get("securityContext") or {}
    pod_seccomp = get_in(pod_sc, "seccompProfile", "type")
    if pod_seccomp == "Unconfined":
        found.append("pod runs seccomp Unconfined")
    if level == "restricted":
        if pod_sc.get("runAsNonRoot") is False:
            found.append("pod sets runAsNonRoot: false")
        if pod_sc.get("runAsUser") == 0:
            found.append("pod runs as UID 0")
    for c in containers_of(spec):
        sc = c.get("securityContext") or {}
        name = c.get("name", "?")
        if sc.get("privileged"):
            found.append(f"container {name!r} is privileged")
        added = set(get_in(sc, "capabilities", "add") or [])
        allowed_add = {"NET_BIND_SERVICE"} if level == "restricted" else BASELINE_CAPABILITIES
        if added - allowed_add:
            found.append(f"container {name!r} adds capabilities {sorted(added - allowed_add)}")
        if any(p.get("hostPort") for p in list_of(c.get("ports"))):
            found.append(f"container {name!r} uses a hostPort")
        own_seccomp = get_in(sc, "seccompProfile", "type")
        if own_seccomp == "Unconfined":
            found.append(f"container {name!r} runs seccomp Unconfined")
        if level != "restricted":
            continue
        if sc.get("allowPrivilegeEscalation") is not False:
            found.append(f"container {name!r} does not set allowPrivilegeEscalation: false")
        non_root = sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot"))
        if non_root is not True:
            found.append(f"container {name!r} does not set runAsNonRoot: true")
        if sc.get("runAsUser") == 0:
            found.append(f"container {name!r} runs as UID 0")
        seccomp = own_seccomp or pod_seccomp
        if seccomp not in ("RuntimeDefault", "Localhost"):
            found.append(f"container {name!r} has no seccompProfile RuntimeDefault")
        if "ALL" not in (get_in(sc, "capabilities", "drop") or []):
            found.append(f"container {name!r} does not drop ALL capabilities")
    return found


def _namespace_levels(ctx: CheckContext) -> dict[str, str]:
    levels = {}
    for r in ctx.report.resources:
        if r.type == NAMESPACE:
            labels = get_in(r.inputs, "metadata", "labels") or {}
            levels[get_in(r.inputs, "metadata", "name")] = labels.get("pod-security.kubernetes.io/enforce",
                                                                    "privileged")
    return levels


def check_pod_security(ctx: CheckContext) -> list[DeployabilityFinding]:
    findings = []
    levels = _namespace_levels(ctx)
    for record in ctx.report.resources:
        spec = pod_spec(record)
        namespace = get_in(record.inputs, "metadata", "namespace")
        level = levels.get(namespace, "privileged")
        if spec is None or level == "privileged":
            continue
        problems = pod_security_violations(spec, level)
        if problems:
            findings.append(DeployabilityFinding(
                "pod-security", record.urn, f"{named(record)}: namespace {namespace!r} enforces Pod Security "
                f"{level!r}, which rejects its pods ({'; '.join(problems)}); fix the pod's securityContext or lower "
                "the namespace's level with a reason"))
    return findings
