"""Name catalog: the physical names the cloud and Kubernetes accept, per resource type (`names.yaml`, with sources).

`load_name_catalog()` reads it once per process. `blueprints.review.deployability.names` proves every name a stack
registers against it; `components.naming.fit` keeps auto-named children within it.
"""

from __future__ import annotations

import re
from functools import lru_cache

from pydantic import BaseModel, ConfigDict, Field

from blueprints.catalog.files import read_catalog_file
from blueprints.core.errors import CatalogError

SCHEMA_VERSION = 1


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class NameRule(_Record):
    """The longest name (characters) and the characters a name may have."""

    max: int = Field(ge=1, le=2048)
    pattern: str
    source: str

    def problem(self, value: str) -> str | None:
        """Why `value` breaks the rule (its length or characters), or None."""
        if len(value) > self.max:
            return f"{len(value)} characters, above the limit of {self.max}"
        if not re.fullmatch(self.pattern, value):
            return f"characters or shape outside {self.pattern}"
        return None


class AwsNameRule(NameRule):
    """One AWS resource type's physical name: where it comes from and whether Pulumi auto-names it."""

    type: str = Field(pattern=r"^aws:[a-z0-9]+/[A-Za-z0-9]+:[A-Z][A-Za-z0-9]+$", description="Pulumi type token")
    field: str = Field(description="the input holding the physical name (engine name, camelCase)")
    autonamed: bool = Field(default=True, description="Pulumi names it `<logical>-<random>` when the field is unset")
    lowercase: bool = Field(default=False, description="the auto-name is lower-cased (S3 buckets)")


class Autoname(_Record):
    separator: str = Field(min_length=1, max_length=1)
    random_chars: int = Field(ge=1, le=32)
    source: str


class KubernetesNames(_Record):
    default: NameRule
    kinds: dict[str, NameRule]
    label_value: NameRule
    container: NameRule
    helm_release: NameRule

    def rule(self, kind: str) -> NameRule:
        """The rule of a kind's `metadata.name`."""
        return self.kinds.get(kind, self.default)


class NameCatalog(_Record):
    """`names.yaml`: Pulumi's auto-naming, one rule per AWS type, and Kubernetes' names."""

    schema_version: int
    autoname: Autoname
    aws: list[AwsNameRule]
    unnamed: list[str] = Field(description="AWS types without a physical name input")
    kubernetes: KubernetesNames

    def aws_rule(self, type_token: str) -> AwsNameRule | None:
        return next((r for r in self.aws if r.type == type_token), None)

    def autoname_of(self, logical: str, rule: AwsNameRule, *, suffix: str | None = None) -> str:
        """The physical name Pulumi gives `logical`: `<logical>-<random>` (`suffix` stands in for the random part;
        default the longest such suffix), lower-cased where the type says so."""
        random = suffix if suffix is not None else "0" * self.autoname.random_chars
        name = f"{logical}{self.autoname.separator}{random}"
        return name.lower() if rule.lowercase else name

    def longest_logical(self, rule: AwsNameRule) -> int:
        """The longest logical name whose auto-name fits `rule`."""
        return rule.max - len(self.autoname.separator) - self.autoname.random_chars


@lru_cache(maxsize=1)
def load_name_catalog() -> NameCatalog:
    """`names.yaml`, validated.

    Raises:
        CatalogError: the file is malformed, a pattern does not compile or a type is listed twice.
    """
    data = read_catalog_file("names.yaml", NameCatalog, schema_version=SCHEMA_VERSION)
    types = [r.type for r in data.aws] + list(data.unnamed)
    if len(types) != len(set(types)):
        raise CatalogError(f"names.yaml lists a type twice: {sorted(t for t in types if types.count(t) > 1)}")
    rules = [*data.aws, data.kubernetes.default, *data.kubernetes.kinds.values(), data.kubernetes.label_value,
             data.kubernetes.container, data.kubernetes.helm_release]
    for rule in rules:
        try:
            re.compile(rule.pattern)
        except re.error as exc:
            raise CatalogError(f"names.yaml: pattern {rule.pattern!r} does not compile: {exc}") from None
    return data
