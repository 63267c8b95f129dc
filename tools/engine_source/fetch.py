"""Fetch an engine's Python source at its pinned release, for the tests that parse our engine command lines with the
engine's own parser (tests/tools/vllm_serve_argv.py and vllm_bench_argv.py read `$VLLM_SOURCE/vllm/...`,
tests/tools/sglang_argv.py reads `$SGLANG_SOURCE/sglang/...`).

Usage: python tools/engine_source/fetch.py ENGINE DIR -> DIR/ENGINE/ holds the package's Python files from the
release's archive on PyPI (RELEASES: vLLM 0.24.0's sdist, 37 MB; SGLang 0.5.14's wheel, 12 MB), checked against its
sha256 before anything is extracted. Only the package's `.py` files are extracted; nothing is installed or imported
here. Exit 1 with the reason when the download fails or the hash differs; 2 for an unknown engine.
"""

from __future__ import annotations

import hashlib
import sys
import tarfile
import tempfile
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Release:
    """An engine's release archive on PyPI, as the engine's simple index (https://pypi.org/simple/<engine>/, PEP 691
    JSON) lists it: the file's `url` and `hashes.sha256`; `prefix`, the folder above the package in the archive."""

    version: str
    url: str
    sha256: str
    prefix: str


RELEASES = {
    # The sdist (a tar.gz): vllm-0.24.0/vllm/...
    "vllm": Release(
        version="0.24.0",
        url="https://files.pythonhosted.org/packages/d4/17/"
            "ea541f9ffb31d438ed6a5a8e1f7b9805410664abf97e326f28416147a5da/vllm-0.24.0.tar.gz",
        sha256="0862453adc1f3339f1a0c9dca1179c34d6ed6e118f87b6e5bddd120af614ac66", prefix="vllm-0.24.0/"),
    # SGLang 0.5.14 has no sdist and no pure-Python wheel on PyPI, only CPython-specific manylinux wheels (a zip:
    # sglang/...); their Python files are the package's source (the cp311 and cp312 x86_64 wheels' are identical).
    # This one is the CPython 3.11 x86_64 wheel, the one blueprints/catalog/engines.yaml cites.
    "sglang": Release(
        version="0.5.14",
        url="https://files.pythonhosted.org/packages/87/80/"
            "d112720508f73afb1684fe66ba1ba0fe9aa0c46de4e115452d7058d109bd/"
            "sglang-0.5.14-cp311-cp311-manylinux_2_34_x86_64.whl",
        sha256="4fe16056b45c8aca00f5f90ceb174dc3a62a3f5dccf159c791370795cd00fc99", prefix=""),
}


def extract(archive: Path, release: Release, package: str, target: Path) -> int:
    """Extract `archive`'s `<prefix><package>/**.py` into `target/<package>/`; the number of files."""
    keep = release.prefix + package + "/"
    target.mkdir(parents=True, exist_ok=True)
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as whl:
            names = [n for n in whl.namelist() if n.startswith(keep) and n.endswith(".py")]
            for name in names:  # zip names are checked like tarfile's "data" filter: inside `target`, no links
                out = (target / name.removeprefix(release.prefix)).resolve()
                if not out.is_relative_to(target.resolve()):
                    raise OSError(f"{name}: outside {target}")
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(whl.read(name))
            return len(names)
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if m.isfile() and m.name.startswith(keep) and m.name.endswith(".py")]
        for member in members:
            member.name = member.name.removeprefix(release.prefix)
        tar.extractall(target, members=members, filter="data")
        return len(members)


def main(engine: str, target: Path) -> int:
    release = RELEASES.get(engine)
    if release is None:
        print(f"unknown engine {engine!r}: one of {', '.join(RELEASES)}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / release.url.rsplit("/", 1)[1]
        try:
            with urllib.request.urlopen(release.url, timeout=300) as response, archive.open("wb") as out:
                while chunk := response.read(1 << 20):
                    out.write(chunk)
        except OSError as error:
            print(f"fetching {release.url}: {error}", file=sys.stderr)
            return 1
        digest = hashlib.sha256(archive.read_bytes()).hexdigest()
        if digest != release.sha256:
            print(f"{release.url}: sha256 {digest}, expected {release.sha256}", file=sys.stderr)
            return 1
        count = extract(archive, release, engine, target)
    print(f"{engine} {release.version} source: {count} files in {target / engine}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], Path(sys.argv[2])))
