"""LoRA catalog: the ranks, flags and defaults of LoRA serving on the pinned vLLM (`lora.yaml`, with sources).

`load_lora_catalog()` reads it once per process; `blueprints.contracts.lora` plans and renders the flags from it and
`blueprints.contracts.memory` counts the GPU memory they take.
"""

from __future__ import annotations

from functools import lru_cache

from pydantic import BaseModel, ConfigDict, Field, field_validator

from blueprints.catalog.files import read_catalog_file


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class LoraFlag(_Record):
    flag: str = Field(pattern=r"^--[a-z][a-z-]+$")
    source: str = Field(min_length=10)


class LoraCatalog(_Record):
    """What vLLM 0.24.0 accepts for LoRA (`supported_ranks`, `flags`) and the planner's defaults within it."""

    schema_version: int
    engine: str
    supported_ranks: tuple[int, ...] = Field(min_length=1, description="--max-lora-rank values, ascending")
    flags: tuple[LoraFlag, ...] = Field(min_length=1)
    routing_source: str
    default_max_loras: int = Field(ge=1, le=64, description="GPU slots per replica at most (--max-loras)")
    cuda_graph_extra_gib_per_gpu: float = Field(ge=0, le=16, description="CUDA graph memory LoRA adds per GPU, GiB")
    cuda_graph_source: str
    adapter_file_bytes_per_element: int = Field(ge=1, le=8, description="bytes per element of a saved adapter")

    @field_validator("supported_ranks")
    @classmethod
    def _ascending(cls, ranks: tuple[int, ...]) -> tuple[int, ...]:
        if list(ranks) != sorted(set(ranks)):
            raise ValueError("supported_ranks must be ascending and distinct")
        return ranks

    @property
    def max_rank(self) -> int:
        return self.supported_ranks[-1]

    def slot_rank(self, rank: int) -> int | None:
        """The smallest supported `--max-lora-rank` holding an adapter of `rank` (None above the largest)."""
        return next((r for r in self.supported_ranks if r >= rank), None)


@lru_cache(maxsize=1)
def load_lora_catalog() -> LoraCatalog:
    """`blueprints/catalog/lora.yaml`. Raises `CatalogError` when the file is malformed."""
    return read_catalog_file("lora.yaml", LoraCatalog)
