"""Strict validation of rendered Kubernetes manifests against the Kubernetes OpenAPI schemas (kubernetes-validate)."""

from __future__ import annotations

from typing import Any

import kubernetes_validate

#: Kubernetes minor version whose schemas the manifests are validated against by default.
DEFAULT_KUBERNETES_VERSION = "1.31"


def validate_manifest(obj: dict[str, Any], *, kubernetes_version: str = DEFAULT_KUBERNETES_VERSION) -> list[str]:
    """Problems with one manifest under strict validation (unknown fields are errors); empty when valid.

    Custom resources whose schema kubernetes-validate does not ship are reported as such, not silently passed.
    """
    try:
        kubernetes_validate.validate(obj, kubernetes_version, strict=True)
    except kubernetes_validate.ValidationError as exc:
        path = ".".join(str(p) for p in exc.path) or "(root)"
        return [f"{path}: {exc.message}"]
    except kubernetes_validate.SchemaNotFoundError:
        return [f"no schema for {obj.get('apiVersion')}/{obj.get('kind')} in Kubernetes {kubernetes_version}"]
    return []


def manifest_id(obj: dict[str, Any]) -> str:
    """`Kind/namespace/name` (namespace omitted for cluster-scoped objects)."""
    meta = obj.get("metadata", {})
    parts = [obj.get("kind", "?"), meta.get("namespace"), meta.get("name", "?")]
    return "/".join(p for p in parts if p)
