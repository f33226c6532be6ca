"""A synthetic AutoHeuristic file to check the many-input case away from the two real tables.

The real tables (``mixedmm_a100``, ``flexattention_a100``) are what the project was developed
on. This writes a third one, in their format (a JSON line of metadata, then ``features, choice,
feedback`` rows with three repeats per cell), of a kernel whose times are *made up*, not
measured: a Triton matrix product on a modelled GPU, over the shapes (m, n, k) and the dtype.

- Shapes: m, n and k log-uniform in [16, 8192], most of them multiples of 16; dtype
  ``torch.float16`` or ``torch.float32``.
- Choices: Inductor's list of matmul configurations (block sizes, stages, warps), each block
  size capped at ``max(16, next power of two of its dimension)`` as Inductor does, duplicates
  removed, so a small shape lists fewer and other configurations; and ``extern_mm`` (the vendor
  library), listed at every shape.
- Times: a tile model. The output is cut into ``ceil(m / BM) * ceil(n / BN)`` tiles that run in
  waves over 108 multiprocessors, as many per multiprocessor at once as the shared memory
  (``stages * (BM * BK + BK * BN) * bytes``) and the warps allow; a tile takes ``ceil(k / BK)``
  steps, each the larger of its arithmetic and its loads, with latency that more stages hide;
  float32 runs the arithmetic 4 times slower. A configuration whose shared memory exceeds the
  limit fails (``inf``). ``extern_mm`` runs near peak on large aligned shapes, with a larger
  fixed cost and a penalty where m, n or k is not a multiple of 8.
- Noise: each of the three repeats is the model's time times ``exp(N(0, 0.02))``, and one
  repeat in 20 is 1.1 - 1.3 times slower (interference only adds time).

It is a landscape with other structure than the real tables (wave quantisation, padding waste,
a dtype that moves the optimum, failures set by the configuration alone), not a model of a real
GPU: figures from it say whether the method generalises, never what a GPU does.

    python experiments/synthetic_autoheuristic.py --out DIR
    python experiments/bench_inputs.py --data DIR/synthetic_mm.txt.gz --shares 2,5 --seeds 0-4

Two options change one thing each, to probe structures the real tables do not have:
``--alignment`` adds each size modulo 8 as an input (as PyTorch's pad_mm records alignment;
``synthetic_mm_align.txt.gz``), ``--listed-share P`` lists at each shape a random share P of
Inductor's configurations for it, a list no function of the shape predicts
(``synthetic_mm_listed<100 P>.txt.gz``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

import numpy as np

#: Inductor's matmul configurations (BLOCK-M, BLOCK-N, BLOCK-K, stages, warps).
CONFIGS: list[tuple[int, int, int, int, int]] = [
    (32, 32, 16, 1, 2),
    (32, 32, 128, 2, 4),
    (32, 64, 32, 5, 8),
    (64, 32, 32, 5, 8),
    (64, 32, 128, 5, 4),
    (64, 64, 16, 2, 4),
    (64, 64, 32, 2, 4),
    (64, 64, 64, 3, 8),
    (64, 64, 128, 5, 4),
    (64, 128, 32, 3, 4),
    (64, 128, 32, 4, 8),
    (64, 128, 64, 3, 4),
    (64, 128, 128, 4, 4),
    (128, 64, 32, 3, 4),
    (128, 64, 32, 4, 8),
    (128, 128, 32, 2, 8),
    (128, 128, 32, 3, 4),
    (128, 128, 64, 3, 4),
    (128, 128, 64, 5, 8),
]
EXTERN = "extern_mm"
DTYPES = {"torch.float16": 2, "torch.float32": 4}
#: The modelled GPU: multiprocessors, shared memory per block (bytes), warps per multiprocessor.
SMS, SHARED_MEMORY, WARPS = 108, 166912, 64
#: Arithmetic (multiply-adds per microsecond and warp) and loads (bytes per microsecond and
#: multiprocessor) of the model, and the latency of one step that stages hide (microseconds).
FLOPS_PER_WARP, BYTES_PER_SM, STEP_LATENCY, LAUNCH = 2.0e5, 1.4e4, 0.35, 4.0


def _next_power_of_two(value: int) -> int:
    return 1 << max(0, int(value - 1).bit_length())


def listed(m: int, n: int, k: int) -> list[tuple[int, int, int, int, int]]:
    """The Triton configurations Inductor lists for a shape: block sizes capped, deduplicated."""
    out: list[tuple[int, int, int, int, int]] = []
    for bm, bn, bk, stages, warps in CONFIGS:
        capped = (
            min(bm, max(16, _next_power_of_two(m))),
            min(bn, max(16, _next_power_of_two(n))),
            min(bk, max(16, _next_power_of_two(k))),
            stages,
            warps,
        )
        if capped not in out:
            out.append(capped)
    return out


def choice_string(config: tuple[int, ...]) -> str:
    """AutoHeuristic's choice string of a Triton configuration."""
    bm, bn, bk, stages, warps = config
    return f"type=triton_BLOCK-M={bm}_BLOCK-K={bk}_BLOCK-N={bn}_numstages={stages}_numwarps={warps}"


def triton_time(m: int, n: int, k: int, size: int, config: tuple[int, ...]) -> float:
    """Modelled time (microseconds) of a Triton configuration; ``inf`` where it fails."""
    bm, bn, bk, stages, warps = config
    shared = stages * (bm * bk + bk * bn) * size
    if shared > SHARED_MEMORY:
        return float("inf")
    resident = max(1, min(SHARED_MEMORY // max(shared, 1), WARPS // warps, 8))
    tiles = -(-m // bm) * -(-n // bn)
    waves = -(-tiles // (SMS * resident))
    steps = -(-k // bk)
    arithmetic = bm * bn * bk / (FLOPS_PER_WARP * warps) * (4.0 if size == 4 else 1.0)
    # warps beyond what a tile can keep busy only add overhead
    arithmetic *= 1.0 + 0.15 * max(0.0, warps * 512 / (bm * bn) - 1.0)
    loads = (bm * bk + bk * bn) * size / BYTES_PER_SM * resident
    step = max(arithmetic * resident, loads) + STEP_LATENCY / stages
    return LAUNCH + waves * steps * step


def extern_time(m: int, n: int, k: int, size: int) -> float:
    """Modelled time (microseconds) of the vendor library."""
    peak = SMS * 4 * FLOPS_PER_WARP / (4.0 if size == 4 else 1.0)
    work = m * n * k / peak
    aligned = all(d % 8 == 0 for d in (m, n, k))
    efficiency = 0.6 * (1.0 if aligned else 0.6) * min(1.0, (m * n) / (256.0 * 256.0)) ** 0.25
    return 12.0 + work / efficiency


def shapes(count: int, rng: np.random.Generator) -> list[tuple[int, int, int, str]]:
    """``count`` distinct shapes (m, n, k, dtype)."""
    out: set[tuple[int, int, int, str]] = set()
    names = list(DTYPES)
    while len(out) < count:
        dims = np.exp(rng.uniform(np.log(16), np.log(8192), 3)).astype(int)
        if rng.random() < 0.7:
            dims = np.maximum(16, dims // 16 * 16)
        out.add((int(dims[0]), int(dims[1]), int(dims[2]), names[int(rng.integers(2))]))
    return sorted(out)


def rows(
    count: int, seed: int = 1, listed_share: float = 1.0
) -> list[tuple[int, int, int, str, str, float]]:
    """(m, n, k, dtype, choice, feedback) rows: three repeats of every listed cell. With
    ``listed_share`` below 1, each shape lists that share of Inductor's configurations for it
    (at least one), drawn at random: a list no function of the shape predicts."""
    rng = np.random.default_rng(seed)
    drop = np.random.default_rng([seed, 1])
    out = []
    for m, n, k, dtype in shapes(count, rng):
        size = DTYPES[dtype]
        configs = listed(m, n, k)
        if listed_share < 1.0:
            keep = max(1, round(listed_share * len(configs)))
            chosen = np.sort(drop.choice(len(configs), size=keep, replace=False))
            configs = [configs[i] for i in chosen]
        cells = [(choice_string(c), triton_time(m, n, k, size, c)) for c in configs]
        cells.append((EXTERN, extern_time(m, n, k, size)))
        for choice, time in cells:
            for _ in range(3):
                if not np.isfinite(time):
                    out.append((m, n, k, dtype, choice, float("inf")))
                    continue
                slow = rng.uniform(1.1, 1.3) if rng.random() < 0.05 else 1.0
                noisy = time * float(np.exp(rng.normal(0.0, 0.02))) * slow
                out.append((m, n, k, dtype, choice, noisy / 1000.0))  # milliseconds
    return out


def write(
    folder: Path,
    count: int = 3000,
    seed: int = 1,
    *,
    alignment: bool = False,
    listed_share: float = 1.0,
) -> Path:
    """Write ``synthetic_mm.txt.gz`` into ``folder``; its path. ``alignment`` adds the inputs
    ``m_align``, ``n_align`` and ``k_align`` (each size modulo 8, as PyTorch's pad_mm records
    its alignment: 0 at most shapes) and names the file ``synthetic_mm_align``;
    ``listed_share`` below 1 (:func:`rows`) names it ``synthetic_mm_listed<percent>``."""
    folder.mkdir(parents=True, exist_ok=True)
    name = "synthetic_mm" + ("_align" if alignment else "")
    if listed_share < 1.0:
        name += f"_listed{round(100 * listed_share)}"
    path = folder / f"{name}.txt.gz"
    numeric = ["m", "n", "k"] + (["m_align", "n_align", "k_align"] if alignment else [])
    metadata = {
        "name": name,
        "shared_memory": SHARED_MEMORY,
        "device_capa": [8, 0],
        "numerical_features": numeric,
        "categorical_features": ["dtype"],
    }
    lines = [json.dumps(metadata), ",".join([*numeric, "dtype", "choice", "feedback"])]
    for m, n, k, d, c, t in rows(count, seed, listed_share):
        aligned = f"{m % 8},{n % 8},{k % 8}," if alignment else ""
        lines.append(f"{m},{n},{k},{aligned}{d},{c},{t!r}")
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder of the file")
    parser.add_argument("--shapes", type=int, default=3000, help="distinct shapes")
    parser.add_argument("--seed", type=int, default=1, help="seed of the shapes and noise")
    parser.add_argument(
        "--alignment",
        action="store_true",
        help="also the inputs m_align, n_align, k_align (each size modulo 8, as pad_mm records)",
    )
    parser.add_argument(
        "--listed-share",
        type=float,
        default=1.0,
        help="share of Inductor's configurations each shape lists, drawn at random (default 1)",
    )
    args = parser.parse_args(argv)
    if args.shapes < 1:
        parser.error("--shapes must be at least 1")
    if not 0.0 < args.listed_share <= 1.0:
        parser.error(f"--listed-share must be in (0, 1], got {args.listed_share}")
    path = write(
        args.out,
        args.shapes,
        args.seed,
        alignment=args.alignment,
        listed_share=args.listed_share,
    )
    print(f"wrote {path.name} into the folder given by --out ({args.shapes} shapes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
