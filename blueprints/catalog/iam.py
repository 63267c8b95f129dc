"""IAM policy templates of the platform's add-on controllers (`iam.yaml`), filled per cluster.

`${Name}` placeholders (partition, region, account, cluster name, role and queue ARNs) may sit in resources,
condition keys and condition values, so a document is rendered from plain values (inside an `Output.apply` when
they come from other resources).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from blueprints.core.errors import CatalogError, format_validation_error

_PLACEHOLDER = re.compile(r"\$\{([A-Za-z]+)\}")


class Statement(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    sid: str = Field(pattern=r"^[A-Za-z0-9]+$")
    actions: list[str] = Field(min_length=1)
    resources: list[str] = Field(min_length=1)
    condition: dict[str, dict[str, Any]] | None = None


class PolicyTemplate(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    version: str
    source: str
    statements: list[Statement] = Field(min_length=1)

    def placeholders(self) -> set[str]:
        """The `${Name}` placeholders the template uses."""
        return set(_PLACEHOLDER.findall(json.dumps(self.model_dump())))


class _IamFile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int
    policies: list[PolicyTemplate]


@lru_cache(maxsize=1)
def policy_templates() -> dict[str, PolicyTemplate]:
    """The templates in `iam.yaml` by name. Raises `CatalogError` when the file is malformed."""
    text = resources.files("blueprints.catalog").joinpath("iam.yaml").read_text(encoding="utf-8")
    try:
        data = _IamFile.model_validate(yaml.safe_load(text))
    except ValidationError as exc:
        raise CatalogError(f"catalog file iam.yaml is malformed: {format_validation_error(exc, source='iam.yaml')}") \
            from None
    return {p.name: p for p in data.policies}


def _fill(value: Any, values: dict[str, str]) -> Any:
    if isinstance(value, str):
        return _PLACEHOLDER.sub(lambda m: values[m.group(1)], value)
    if isinstance(value, dict):
        return {_fill(k, values): _fill(v, values) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, values) for v in value]
    return value


def policy_document(name: str, values: dict[str, str], *, extra: list[dict[str, Any]] | None = None) -> str:
    """The IAM policy JSON of template `name` with every placeholder filled.

    Args:
        name: `aws-load-balancer-controller` or `karpenter-controller`.
        values: placeholder -> value, e.g. `{"Partition": "aws", "ClusterName": "platform-prod-us-east-1"}`.
        extra: statements appended as they are (IAM JSON shape).

    Raises:
        KeyError: a placeholder of the template has no value (a programming error, not user input).
    """
    template = policy_templates()[name]
    missing = template.placeholders() - set(values)
    if missing:
        raise KeyError(f"policy {name} needs values for {sorted(missing)}")
    statements = []
    for st in template.statements:
        doc: dict[str, Any] = {"Sid": st.sid, "Effect": "Allow", "Action": st.actions,
                               "Resource": _fill(st.resources, values)}
        if st.condition:
            doc["Condition"] = _fill(st.condition, values)
        statements.append(doc)
    return json.dumps({"Version": "2012-10-17", "Statement": statements + list(extra or [])}, sort_keys=True)
