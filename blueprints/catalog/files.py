"""Reading one bundled catalog file: the YAML parsed, validated against its model, its schema version checked."""

from __future__ import annotations

from importlib import resources
from typing import TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from blueprints.core.errors import CatalogError, format_validation_error

M = TypeVar("M", bound=BaseModel)


def read_catalog_file(name: str, model: type[M], *, schema_version: int = 1) -> M:
    """`blueprints/catalog/<name>` validated as `model` (which has a `schema_version` field).

    Raises:
        CatalogError: the file is not YAML, does not validate (naming the field), or has another schema version.
    """
    text = resources.files("blueprints.catalog").joinpath(name).read_text(encoding="utf-8")
    try:
        data = model.model_validate(yaml.safe_load(text))
    except (yaml.YAMLError, ValidationError) as exc:
        detail = format_validation_error(exc, source=name) if isinstance(exc, ValidationError) else str(exc)
        raise CatalogError(f"catalog file {name} is malformed: {detail}") from None
    if data.schema_version != schema_version:  # type: ignore[attr-defined]
        raise CatalogError(f"catalog file {name} has schema_version {data.schema_version}, "  # type: ignore[attr-defined]
                           f"expected {schema_version}")
    return data
