"""Process catalog: how each pinned image's process runs, per image and version (`processes.yaml`, with sources): its
user, where its ports listen, what SIGTERM does, where it writes, its HTTP keep-alive, the caches it fills and the
version of each program our containers run in it (`tools`).

`load_process_catalog()` reads it once per process. The components (hardening's user, the drain window, the proxy's
timeouts) and the offline checks of `blueprints.review.deployability.processes` read the same rows.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from blueprints.catalog.files import read_catalog_file
from blueprints.core.errors import CatalogError

SCHEMA_VERSION = 1
LOOPBACK = "127.0.0.1"
#: Addresses that bind the loopback interface only.
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Listener(_Record):
    port: int | None = Field(default=None, ge=1, le=65535, description="its default port (None: from config)")
    flag: str = Field(description="the option that moves it, or `config`")
    address: Literal["all", "127.0.0.1", "config"] = Field(description="where it binds by default")
    address_flag: str | None = Field(default=None, description="the option that sets the address (e.g. SGLang's "
                                     "--host); None: the address is fixed")

    def address_given(self, value: str | None) -> str:
        """Where it binds when `address_flag` is given `value` (None: not given): loopback names are `127.0.0.1`,
        any other address (0.0.0.0, ::, an interface's) is reachable from outside the pod: `all`."""
        if value is None:
            return self.address
        return LOOPBACK if value in LOOPBACK_NAMES else "all"


class Cache(_Record):
    path: str = Field(description="where it lands (`$VAR/...` from the container's environment)")
    env: str = Field(description="the variable that sizes it, in bytes")
    default_bytes: int = Field(ge=0, description="its size when the variable is unset")
    commands: list[str] = Field(min_length=1, description="the commands that fill it (the container's command[0])")


class ServiceCall(_Record):
    """An in-cluster Service the process calls by ClusterIP (`cluster_network.yaml` cluster_services)."""

    service: str = Field(pattern=r"^[a-z0-9-]+$", description="a cluster_services id, e.g. kubernetes-api")
    when_arg: str | None = Field(default=None, description="only when the container's args hold this argument")


class ProxyDefaults(_Record):
    stream_idle_timeout_s: int = Field(ge=0)
    upstream_idle_timeout_s: int = Field(ge=0)
    route_timeout_s: int = Field(ge=0)


class Tool(_Record):
    """A program the image runs for us, at the version the image carries, and how that version is known."""

    command: str = Field(description="the program as a container names it: command[0]'s base name, or a command of "
                                     "its `sh -c` script")
    package: str = Field(description="the distribution the program comes from")
    entrypoint: bool = Field(default=False, description="the image's ENTRYPOINT runs it for a container that names "
                                                         "no command")
    version: str = Field(pattern=r"^[0-9][0-9A-Za-z.+\-]*$", description="its version inside the image")
    parsed_by: str | None = Field(description="the test that parses our argv with the tool's own parser at that "
                                              "version (or the parser it stands in with); None: not parsed")
    source: str = Field(description="how the version was determined, with sources")


class ProcessFacts(_Record):
    """One pinned image's process."""

    image: str = Field(pattern=r"^[a-z0-9.\-/]+:[A-Za-z0-9._\-]+$")
    user: tuple[int, int] | None = Field(description="(uid, gid) of its USER; None: none documented")
    listens: list[Listener]
    sigterm: Literal["aborts", "drains"]
    drain_flag: str | None = None
    drain_default_s: int | None = Field(default=None, ge=0)
    writes: list[str]
    keep_alive_s: int | None = Field(default=None, ge=1, description="idle HTTP/1.1 connections closed after, s")
    keep_alive_env: str | None = None
    caches: list[Cache] = Field(default_factory=list)
    tools: list[Tool] = Field(default_factory=list, description="the programs our containers run in it")
    calls: list[ServiceCall] = Field(default_factory=list, description="in-cluster Services it calls by ClusterIP "
                                     "(besides cluster DNS, which every pod with dnsPolicy ClusterFirst resolves "
                                     "names through)")
    proxy_defaults: ProxyDefaults | None = None
    fp8_kv_default_attention_from: float | None = Field(default=None, ge=5.0, le=12.0, description="compute "
                                                        "capability from which an FP8 KV cache keeps the engine's "
                                                        "default attention backend")
    source: str

    @property
    def loopback_only(self) -> bool:
        """Every port listens on 127.0.0.1 by default (no address option given): nothing outside the pod's network
        namespace (no kubelet probe) reaches it."""
        return bool(self.listens) and all(listener.address == LOOPBACK for listener in self.listens)


class _ProcessFile(_Record):
    schema_version: int
    images: list[ProcessFacts]


@lru_cache(maxsize=1)
def load_process_catalog() -> dict[str, ProcessFacts]:
    """`{image: facts}` from `processes.yaml`.

    Raises:
        CatalogError: the file is malformed, an image is listed twice, or a draining image names no drain flag.
    """
    data = read_catalog_file("processes.yaml", _ProcessFile, schema_version=SCHEMA_VERSION)
    found: dict[str, ProcessFacts] = {}
    for facts in data.images:
        if facts.image in found or (facts.sigterm == "drains") != (facts.drain_flag is not None):
            raise CatalogError(f"processes.yaml: {facts.image}: listed twice, or `drains` without a drain_flag (or "
                               "a drain_flag without `drains`)")
        found[facts.image] = facts
    return found


def process_facts(image: str) -> ProcessFacts | None:
    """The facts of `image` (repository:tag), or None for an image the catalog does not know."""
    return load_process_catalog().get(image)


def tool_facts(image: str, command: str) -> Tool | None:
    """The version facts of program `command` (a base name: `hf`, `aws`) inside `image`, or None when the catalog
    does not say which version that image carries."""
    facts = process_facts(image)
    return next((t for t in facts.tools if t.command == command), None) if facts else None
