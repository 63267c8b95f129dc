"""Hugging Face catalog: the gated repositories (`huggingface.yaml`, with sources), whose downloads need the token of
an account that accepted their conditions (`servingblueprints:hfToken`)."""

from __future__ import annotations

import fnmatch
from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from blueprints.catalog.files import read_catalog_file

SCHEMA_VERSION = 1
HF_SCHEME = "hf://"


class GatedRepository(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    repo: str = Field(pattern=r"^[A-Za-z0-9][\w.-]*/[\w.*-]+$", description="org/name, or a prefix ending in `*`")
    access: Literal["manual", "auto"]
    source: str


class _File(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int
    gated: list[GatedRepository]


@lru_cache(maxsize=1)
def load_gated_repositories() -> tuple[GatedRepository, ...]:
    """The gated repositories of `huggingface.yaml`. Raises `CatalogError` when the file is malformed."""
    data = read_catalog_file("huggingface.yaml", _File, schema_version=SCHEMA_VERSION)
    return tuple(data.gated)


def gated(source_uri: str) -> GatedRepository | None:
    """The gate of an `hf://org/name` source (its catalog row), or None: not gated, or not a Hugging Face source."""
    if not source_uri.startswith(HF_SCHEME):
        return None
    repo = source_uri.removeprefix(HF_SCHEME).strip("/")
    return next((g for g in load_gated_repositories() if fnmatch.fnmatchcase(repo, g.repo)), None)
