"""Strict validation of rendered Kubernetes manifests.

Built-in kinds: the Kubernetes OpenAPI schemas bundled with kubernetes-validate (unknown fields are errors).
Custom resources (KEDA ScaledObject, prometheus-operator ServiceMonitor/PodMonitor/PrometheusRule): the structural
JSON Schemas shipped in `blueprints/review/crds/` (required fields and types, with their sources).
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

import jsonschema
import kubernetes_validate
import kubernetes_validate.utils

# kubernetes-validate re-reads and re-parses its schema files (a 1.5 MB `_definitions.json` among them) on every
# call. Caching its loader's parsed results keeps the library's validation logic as it is and makes a 100-model
# estate's preview several times faster. The cached documents are only read, never mutated, by jsonschema.
kubernetes_validate.utils.schema_contents = lru_cache(maxsize=None)(kubernetes_validate.utils.schema_contents)

#: Kubernetes minor version whose schemas the manifests are validated against by default.
DEFAULT_KUBERNETES_VERSION = "1.31"


def validate_manifest(obj: dict[str, Any], *, kubernetes_version: str = DEFAULT_KUBERNETES_VERSION) -> list[str]:
    """Problems with one manifest under strict validation (unknown fields are errors); empty when valid.

    Custom resources without a shipped schema are reported as such, not silently passed.
    """
    crd = _crd_schema(obj.get("kind", ""), str(obj.get("apiVersion", "")).split("/")[0])
    if crd is not None:
        errors = sorted(jsonschema.Draft202012Validator(crd).iter_errors(obj), key=lambda e: list(e.path))
        return [f"{'.'.join(str(p) for p in e.path) or '(root)'}: {e.message}" for e in errors]
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


@lru_cache(maxsize=None)
def _crd_schema(kind: str, group: str) -> dict[str, Any] | None:
    name = f"{kind.lower()}.{group}.json"
    path = resources.files("blueprints.review.crds").joinpath(name)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
