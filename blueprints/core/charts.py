"""Charts the CLI writes (a simulated day's fleet, a choice's finalists): matplotlib without a display, and the same
bytes for the same figure (SVG ids salted with a constant, no date in the file)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from blueprints.core.errors import BlueprintError


def pyplot() -> Any:
    """`matplotlib.pyplot` on the Agg backend (no display needed), its SVG ids salted with a constant."""
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "servingblueprints"
    import matplotlib.pyplot as plt

    return plt


def save(fig: Any, path: Path, *, what: str, error: type[BlueprintError] = BlueprintError) -> None:
    """Write `fig` to `path` (SVG or PNG by its suffix; an SVG without its date) and close it.

    Raises:
        `error`: the file cannot be written, naming it and `what` it holds.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, metadata={"Date": None} if path.suffix == ".svg" else None)
    except OSError as exc:
        raise error(f"{path}: cannot write the {what} ({exc.strerror})") from None
    finally:
        pyplot().close(fig)
