"""Image catalog: the CPU architectures each pinned container image is built for (`images.yaml`, with sources).

`load_image_catalog()` reads it once per process. The planner (`blueprints.contracts.images`) refuses a stack whose node
architecture an image it runs has no build for, naming the image and the fix.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from blueprints.core.errors import CatalogError, format_validation_error

SCHEMA_VERSION = 1


class ImageRecord(BaseModel):
    """One pinned image (`repository:tag`) and the architectures its tag is built for."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    image: str = Field(pattern=r"^[a-z0-9.\-/]+:[A-Za-z0-9._\-]+$", description="repository:tag, never `latest`")
    architectures: list[str] = Field(min_length=1, description="x86_64 and/or arm64")
    source: str


class _ImageFile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int
    images: list[ImageRecord]


@lru_cache(maxsize=1)
def load_image_catalog() -> dict[str, ImageRecord]:
    """`{image: record}` from `images.yaml`.

    Raises:
        CatalogError: the file is malformed, a tag is `latest`, an architecture is unknown or an image is listed
            twice.
    """
    text = resources.files("blueprints.catalog").joinpath("images.yaml").read_text(encoding="utf-8")
    try:
        data = _ImageFile.model_validate(yaml.safe_load(text))
    except (yaml.YAMLError, ValidationError) as exc:
        detail = format_validation_error(exc, source="images.yaml") if isinstance(exc, ValidationError) else str(exc)
        raise CatalogError(f"catalog file images.yaml is malformed: {detail}") from None
    if data.schema_version != SCHEMA_VERSION:
        raise CatalogError(f"images.yaml has schema_version {data.schema_version}, expected {SCHEMA_VERSION}")
    records: dict[str, ImageRecord] = {}
    for record in data.images:
        bad = [a for a in record.architectures if a not in ("x86_64", "arm64")]
        if bad or record.image.endswith(":latest") or record.image in records:
            raise CatalogError(f"images.yaml: {record.image}: unknown architecture(s) {bad}, a `latest` tag, or "
                               "listed twice")
        records[record.image] = record
    return records
