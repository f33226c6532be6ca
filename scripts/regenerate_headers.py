"""Regenerate the shipped kernels' selector headers in ``generated/`` (or check them).

For each shipped kernel (``matsum``, ``lu``, ``gemm``) the optima are computed exhaustively on an
input grid from the analytic cost model of ``scripts/kernel_models.py`` (a documented, cheap,
machine-independent stand-in for a tuning campaign: see that module), a joint tree is fitted at
the depth a sweep chooses (``max_depth="auto"``, tolerance 0.01), and the header is written with
its provenance. The headers are deterministic: ``tests/trees/test_generated_headers.py`` checks
that the checked-in files are exactly what this script produces.

    python scripts/regenerate_headers.py            # rewrite generated/*.h
    python scripts/regenerate_headers.py --check    # exit 1 if a file differs
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kernel_models import CORES, GRID_SIZES, KernelModel, kernel_model  # noqa: E402

from mlkaps_gpu.codegen import render_header
from mlkaps_gpu.trees import DepthSweep, Selector, fit_selector  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "generated"
KERNELS = ("matsum", "lu", "gemm")
MODE = "joint"
TOLERANCE = 0.01
SEED = 0


@dataclass(frozen=True)
class Generated:
    """One kernel's fitted selector, its depth sweep and header."""

    model: KernelModel
    selector: Selector
    sweep: DepthSweep
    header: str

    @property
    def filename(self) -> str:
        return f"{self.model.name}_selector.h"


def generate(name: str) -> Generated:
    """Fit and render one kernel's header (deterministic)."""
    model = kernel_model(name)
    fitted = fit_selector(
        model.optima,
        model.space,
        model.cost,
        mode=MODE,
        max_depth="auto",
        depth_tolerance=TOLERANCE,
        random_state=SEED,
    )
    chosen = fitted.sweep.table.set_index("depth").loc[fitted.sweep.chosen]
    size = GRID_SIZES[name]
    provenance = {
        "source": (
            "NOT MEASURED: the trees are fitted to the analytic cost model of scripts/"
            "kernel_models.py (a cheap, machine-independent stand-in for a tuning campaign); "
            "regenerate with scripts/regenerate_headers.py, or run a campaign for real trees"
        ),
        "optima": (
            f"exhaustive over the valid designs on a {size}-per-input grid "
            f"({len(model.optima)} points); thread parameter fixed to 1..{CORES}"
        ),
        "depth": (
            f"{fitted.sweep.chosen}, the smallest of 1..{int(fitted.sweep.table['depth'].max())}"
            f" within {TOLERANCE} of the best mean predicted regret; mean predicted regret "
            f"{100 * chosen['mean_regret']:.2f}% at the optima points, {int(chosen['leaves'])}"
            " leaves"
        ),
    }
    header = render_header(fitted.selector, name, provenance=provenance)
    return Generated(model, fitted.selector, fitted.sweep, header)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    parser.add_argument("--out", type=Path, default=OUT, help="output folder (generated/)")
    parser.add_argument("--kernels", nargs="+", default=list(KERNELS), choices=KERNELS)
    args = parser.parse_args(argv)
    differs = []
    for name in args.kernels:
        result = generate(name)
        path = args.out / result.filename
        print(f"== {name}: depth sweep ({MODE} mode, tolerance {TOLERANCE})")
        print(result.sweep)
        if args.check:
            current = path.read_text(encoding="utf-8") if path.exists() else None
            if current != result.header:
                differs.append(str(path))
        else:
            args.out.mkdir(parents=True, exist_ok=True)
            path.write_text(result.header, encoding="utf-8")
            print(f"wrote {path}")
    if differs:
        print("out of date (run scripts/regenerate_headers.py): " + ", ".join(differs))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
