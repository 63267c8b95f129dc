"""Fetch vLLM's source at the pinned release, for the tests that parse our `vllm serve` and `vllm bench serve` command
lines with vLLM's own parsers (tests/tools/vllm_serve_argv.py and vllm_bench_argv.py read `$VLLM_SOURCE/vllm/...`).

Usage: python tools/vllm_source/fetch.py DIR -> DIR/vllm/ holds the `vllm/` package of the vLLM 0.24.0 sdist from PyPI
(37 MB download, checked against its sha256 before anything is extracted). Only the package's Python files are
extracted; nothing is installed or imported here. Exit 1 with the reason when the download fails or the hash differs.
"""

from __future__ import annotations

import hashlib
import sys
import tarfile
import tempfile
import urllib.request
from pathlib import Path

VERSION = "0.24.0"
#: The sdist's file on PyPI, as its simple index (https://pypi.org/simple/vllm/, PEP 691 JSON) lists it.
URL = ("https://files.pythonhosted.org/packages/d4/17/ea541f9ffb31d438ed6a5a8e1f7b9805410664abf97e326f28416147a5da/"
       f"vllm-{VERSION}.tar.gz")
#: Its sha256, from the same index entry.
SHA256 = "0862453adc1f3339f1a0c9dca1179c34d6ed6e118f87b6e5bddd120af614ac66"


def main(target: Path) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / f"vllm-{VERSION}.tar.gz"
        try:
            with urllib.request.urlopen(URL, timeout=300) as response, archive.open("wb") as out:
                while chunk := response.read(1 << 20):
                    out.write(chunk)
        except OSError as error:
            print(f"fetching {URL}: {error}", file=sys.stderr)
            return 1
        digest = hashlib.sha256(archive.read_bytes()).hexdigest()
        if digest != SHA256:
            print(f"{URL}: sha256 {digest}, expected {SHA256}", file=sys.stderr)
            return 1
        prefix = f"vllm-{VERSION}/"
        with tarfile.open(archive) as tar:
            members = [m for m in tar.getmembers()
                       if m.isfile() and m.name.startswith(prefix + "vllm/") and m.name.endswith(".py")]
            for member in members:
                member.name = member.name.removeprefix(prefix)
            target.mkdir(parents=True, exist_ok=True)
            tar.extractall(target, members=members, filter="data")
    print(f"vLLM {VERSION} source: {len(members)} files in {target / 'vllm'}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(Path(sys.argv[1])))
