"""The LLM serving engines (`engines.yaml`): what each one is, how it starts, what it measures and what it can serve.

`engine_facts(name)` is the one place a component, a scaler, an alert, the capacity model or the planner reads an
engine's facts from; `blueprints.engines` renders its command line. Names: `vllm`, `sglang`, `tensorrt-llm`.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from blueprints.catalog.files import read_catalog_file
from blueprints.core.errors import CatalogError

#: The engines' names as requirements and stack configs spell them (the stack config's `engine.kind`).
EngineName = Literal["vllm", "sglang", "tensorrt-llm"]
#: Signal roles every engine maps to one of its metrics (`EngineFacts.signals`).
SIGNAL_ROLES = ("running", "waiting", "kv_cache_usage", "ttft_seconds", "itl_seconds", "generation_tokens",
                "prompt_tokens")


class _Record(BaseModel):
    """A catalog record: its fields are typed; further keys are provenance (`source`, `note`, `how`, `aliases`...),
    kept with the fact they document and read by no code."""

    model_config = ConfigDict(frozen=True, extra="allow")


class Setting(_Record):
    """One engine setting's command-line flag (`flag: None`: not a flag; `how` says where it goes)."""

    flag: str | None
    values: dict[str, str] | None = Field(default=None, description="our value -> the engine's, where they differ")
    note: str | None = None
    how: str | None = None


class Host(_Record):
    flag: str
    default: str = Field(description="the engine's default listen address ('' : every interface)")
    value: str | None = Field(description="what we pass (None: nothing, the default listens on every interface)")


class ApiKey(_Record):
    env: str | None = None
    flag: str | None = None

    @property
    def checked(self) -> bool:
        """Whether the engine checks a key itself (TensorRT-LLM has no option: the proxy guards every path)."""
        return bool(self.env or self.flag)


class Metrics(_Record):
    enable_flag: str | None = Field(description="the flag that turns Prometheus metrics on (None: always on)")
    enable_config: dict[str, bool] | None = Field(default=None, description="options-file keys that turn them on "
                                                  "(TensorRT-LLM: return_perf_metrics, enable_iter_perf_stats)")
    path: str


class Probes(_Record):
    startup: str
    readiness: str
    liveness: str


class Weights(_Record):
    s3_streaming: bool = Field(description="streams safetensors from s3:// itself (else an init container copies)")
    local_path: bool


class Lora(_Record):
    supported: bool = Field(description="whether the planner serves LoRA adapters on it (vLLM's --lora-modules: "
                            "requests name an adapter in `model`)")


class Features(_Record):
    lora: Lora
    quantizations: list[str] = Field(description="--quantization values the planner may set (checkpoint methods)")
    kv_cache_dtypes: list[Literal["auto", "fp8"]]
    weights: Weights


class Router(_Record):
    production_stack_router: bool = Field(description="verified to work behind the production-stack router")
    reason: str


class EngineFacts(_Record):
    """One engine of `engines.yaml` (see its header for each field)."""

    name: EngineName
    display: str
    version: str
    image: str
    command: list[str] = Field(min_length=1)
    model_flag: str | None
    host: Host
    settings: dict[str, Setting]
    api_key: ApiKey | None
    metrics: Metrics
    probes: Probes
    signals: dict[str, str]
    model_label: str = Field(default="model_name", description="the label its series name the served model by")
    http_requests: str | None = Field(default=None, description="its HTTP request counter labelled by `status` "
                                      "class (5xx), for the error-budget alert; None: it exports none")
    profile: str
    features: Features
    router: Router
    env: dict[str, str] = Field(default_factory=dict)
    source: str

    def flag(self, setting: str) -> str:
        """The flag of `setting` (KeyError naming the engine when it has none on the command line)."""
        s = self.settings.get(setting)
        if s is None or s.flag is None:
            raise KeyError(f"{self.display} {self.version} has no command-line flag for {setting}")
        return s.flag

    def value(self, setting: str, ours: str) -> str:
        """Our value of `setting` in the engine's spelling (e.g. an FP8 KV cache: `fp8` -> `fp8_e4m3`)."""
        s = self.settings.get(setting)
        return (s.values or {}).get(ours, ours) if s is not None else ours

    def extra_flag(self, key: str) -> str:
        """The flag of an engine-specific entry beside `settings` (e.g. TensorRT-LLM's `options_file`)."""
        entry = (self.model_extra or {}).get(key) or {}
        if not isinstance(entry, dict) or not entry.get("flag"):
            raise KeyError(f"{self.display} {self.version}: engines.yaml has no {key}.flag")
        return str(entry["flag"])

    def signal(self, role: str) -> str:
        """The metric the engine exposes for `role` (one of `SIGNAL_ROLES`)."""
        return self.signals[role]


class _EngineFile(_Record):
    schema_version: int
    engines: list[EngineFacts]


@lru_cache(maxsize=1)
def load_engine_catalog() -> dict[str, EngineFacts]:
    """`{name: facts}` from `engines.yaml`, in file order (vLLM first: the default engine).

    Raises:
        CatalogError: the file is malformed, an engine is listed twice or lacks a signal role.
    """
    data = read_catalog_file("engines.yaml", _EngineFile)
    engines: dict[str, EngineFacts] = {}
    for e in data.engines:
        missing = [r for r in SIGNAL_ROLES if r not in e.signals]
        if e.name in engines or missing:
            raise CatalogError(f"engines.yaml: {e.name}: listed twice or missing signals {missing}")
        engines[e.name] = e
    return engines


def engine_facts(name: str) -> EngineFacts:
    """The facts of engine `name` (CatalogError naming the known ones for another)."""
    engines = load_engine_catalog()
    if name not in engines:
        raise CatalogError(f"engine {name!r} is not in blueprints/catalog/engines.yaml; known: {', '.join(engines)}")
    return engines[name]


def engine_of_image(image: str) -> EngineFacts | None:
    """The engine whose pinned image `image` is, or None."""
    return next((e for e in load_engine_catalog().values() if e.image == image), None)


def running_signals() -> frozenset[str]:
    """Every engine's running-requests gauge (what KEDA scales a self-hosted LLM on)."""
    return frozenset(e.signal("running") for e in load_engine_catalog().values())
