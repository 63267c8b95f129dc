"""Replace-on-change catalog: which property changes replace a resource on `pulumi up`, or make it replace what it
manages (Karpenter drift, a SageMaker blue/green update, a Deployment rollout); `replacements.yaml` beside this
module, each rule with its source. The review (`blueprints.review.changes`) matches changes against it.
"""

from __future__ import annotations

import fnmatch
from enum import Enum
from functools import lru_cache

from pydantic import BaseModel, ConfigDict, Field

from blueprints.catalog.addons import _read


class Effect(str, Enum):
    """What `pulumi up` does when a rule matches."""

    REPLACE = "replace"
    DRIFT = "drift"
    BLUE_GREEN = "blue-green"
    ROLLOUT = "rollout"


class ReplaceRule(BaseModel):
    """One rule: changing any of `paths` (not `except`) of a resource of `type` has `effect`, with `consequence`."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    type: str = Field(min_length=3, description="Pulumi type token; `*` matches any text")
    what: str = Field(min_length=1, description="the noun the review uses, e.g. `NodePool`")
    change: str = Field(min_length=1, description="what changed, in words")
    paths: list[str] = Field(min_length=1, description="input paths (camelCase); `*` any input")
    except_: list[str] = Field(default_factory=list, alias="except", description="paths never counted")
    effect: Effect
    consequence: str = Field(min_length=1)
    brief: str = Field(min_length=1, description="the consequence in a few words, for the terminal")
    planned_by: list[str] = Field(default_factory=list, description="Blueprint fields feeding `paths` (fnmatch)")
    archetypes: list[str] = Field(default_factory=list, description="archetypes creating the resource (plan time)")
    platforms: list[str] = Field(default_factory=list, description="Blueprint.platform.kind values (plan time); "
                                 "empty: any")
    source: str = Field(min_length=10)

    def applies_to(self, resource_type: str) -> bool:
        return fnmatch.fnmatchcase(resource_type, self.type)

    def matches(self, path: str) -> bool:
        """Whether a flattened input path (`spec.template.spec.requirements[0].values[0]`) is one of this rule's."""
        if any(_under(path, p) for p in self.except_):
            return False
        return any(p == "*" or _under(path, p) for p in self.paths)

    def planned_for(self, archetype: str, platform_kind: str) -> bool:
        """Whether a stack of `archetype` on a `platform_kind` platform has this resource (for plan-time warnings)."""
        return bool(self.planned_by) and archetype in self.archetypes and (
            not self.platforms or platform_kind in self.platforms)


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith((f"{prefix}.", f"{prefix}["))


class _ReplacementsFile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int
    rules: list[ReplaceRule] = Field(min_length=1)


@lru_cache(maxsize=1)
def load_replace_rules() -> tuple[ReplaceRule, ...]:
    """The rules of `replacements.yaml`, in file order. Raises `CatalogError` when the file is malformed."""
    return tuple(_read("replacements.yaml", _ReplacementsFile).rules)
