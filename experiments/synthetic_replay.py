"""A synthetic replay to check the tuner away from the two real ones: a GEMM-like space.

The two real replays (convolution, 7 design parameters; syr2k, 6) are small spaces. This writes
Kernel Tuner caches of a larger one: the 13 varying parameters of CLBlast's GEMM (the
``gemm_milo`` space of the public benchmark hub: MWG, NWG, KWG, MDIMC, NDIMC, MDIMA, NDIMB,
VWM, VWN, STRM, STRN, SA, SB) under its divisibility restrictions (``//`` where the original
divides; 120,800 of the 663,552 configurations of the product are valid), with the GPU as the
input, and a config that replays them. The times are *made up*, not measured: per GPU, log time
is a separable bowl over the scaled log2 of every parameter (a shared centre and weights, each
GPU perturbed), eight pairwise interactions, an occupancy cliff (``MDIMC * NDIMC`` at or above a
threshold that moves with the GPU) and 2 % noise. It is a landscape with more parameters, more
separable structure and fewer good configurations per value than the real ones, not a model
of a real GPU: figures from it say whether the method generalises, never what a GPU does.

``--no-constraints`` writes the config without the restrictions: the data then hold only a
fifth of the product, as a replay of one's own data can, and a tuner must not spend its budget
on configurations the data lack.

``--failures`` makes the fastest region border failures, as register and shared-memory limits
do on a GPU: log time falls with a per-thread resource use (the per-thread tile
``MWG * NWG / (MDIMC * NDIMC)`` in log2, plus ``KWG / 16`` per operand cached in local memory,
``SA`` and ``SB``) and the configurations whose use lies above a per-GPU limit (the 64th - 76th
percentile) fail at run time (``RuntimeFailedConfig``), about 30 % of them; the optimum is
among the rest.

    python experiments/synthetic_replay.py --out synthetic
    python experiments/bench_peers.py --config synthetic/synthetic_gemm.toml --budgets 25 50 100
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import sys
from pathlib import Path

import numpy as np

PARAMETERS: dict[str, list[int]] = {
    "MWG": [16, 32, 64, 128],
    "NWG": [16, 32, 64, 128],
    "KWG": [16, 32],
    "MDIMC": [8, 16, 32],
    "NDIMC": [8, 16, 32],
    "MDIMA": [8, 16, 32],
    "NDIMB": [8, 16, 32],
    "VWM": [1, 2, 4, 8],
    "VWN": [1, 2, 4, 8],
    "STRM": [0, 1],
    "STRN": [0, 1],
    "SA": [0, 1],
    "SB": [0, 1],
}
CONSTRAINTS = [
    "MWG % (MDIMC * VWM) == 0",
    "NWG % (NDIMC * VWN) == 0",
    "MWG % (MDIMA * VWM) == 0",
    "NWG % (NDIMB * VWN) == 0",
    "KWG % ((MDIMC * NDIMC) // MDIMA) == 0",
    "KWG % ((MDIMC * NDIMC) // NDIMB) == 0",
]
GPUS = ("G1", "G2", "G3", "G4")


def valid_configurations(parameters: dict[str, list[int]] = PARAMETERS) -> np.ndarray:
    """Every configuration of the product that satisfies ``CONSTRAINTS`` (rows, columns in
    ``parameters`` order)."""
    names = list(parameters)
    rows = []
    for values in itertools.product(*parameters.values()):
        p = dict(zip(names, values, strict=True))
        if (
            p["MWG"] % (p["MDIMC"] * p["VWM"]) == 0
            and p["NWG"] % (p["NDIMC"] * p["VWN"]) == 0
            and p["MWG"] % (p["MDIMA"] * p["VWM"]) == 0
            and p["NWG"] % (p["NDIMB"] * p["VWN"]) == 0
            and p["KWG"] % ((p["MDIMC"] * p["NDIMC"]) // p["MDIMA"]) == 0
            and p["KWG"] % ((p["MDIMC"] * p["NDIMC"]) // p["NDIMB"]) == 0
        ):
            rows.append(values)
    return np.array(rows, dtype=np.float64)


def resource(configs: np.ndarray) -> np.ndarray:
    """Per-thread resource use of ``configs`` (columns in ``PARAMETERS`` order; see
    ``--failures`` in the module docstring)."""
    mwg, nwg, kwg, mdimc, ndimc = (configs[:, i] for i in range(5))
    return np.log2(mwg * nwg / (mdimc * ndimc)) + kwg / 16 * (configs[:, 11] + configs[:, 12])


def times(configs: np.ndarray, gpu: int, seed: int = 1, failures: bool = False) -> np.ndarray:
    """Made-up run times of ``configs`` on GPU number ``gpu`` (see the module docstring); NaN
    where a configuration fails (``failures`` only)."""
    scaled = np.log2(configs + 1)
    scaled = (scaled - scaled.min(0)) / (scaled.max(0) - scaled.min(0) + 1e-9)
    shared = np.random.default_rng(seed)
    width = configs.shape[1]
    weights = shared.normal(0, 0.5, width)
    centre = shared.uniform(0.2, 0.8, width)
    pairs = [(i, j) for i in range(width) for j in range(i + 1, width)]
    chosen = shared.choice(len(pairs), 8, replace=False)
    rng = np.random.default_rng(100 + gpu)
    weights = weights + rng.normal(0, 0.25, width)
    centre = np.clip(centre + rng.normal(0, 0.15, width), 0, 1)
    log_time = 0.6 * (scaled - centre) ** 2 @ np.abs(weights) + 0.3 * scaled @ (weights * 0.3)
    for pair in chosen:
        i, j = pairs[pair]
        log_time += rng.normal(0, 0.4) * (scaled[:, i] - centre[i]) * (scaled[:, j] - centre[j])
    threads = configs[:, 3] * configs[:, 4]
    log_time += np.where(threads >= 256 + 128 * gpu, 0.4, 0.0)
    out = np.exp(log_time + rng.normal(0, 0.02, len(configs)))
    if failures:
        use = resource(configs)
        span = use.max() - use.min()
        out = out * np.exp(-1.5 * (use - use.min()) / span)
        out[use > np.quantile(use, 0.64 + 0.04 * gpu)] = np.nan
    return out


def write(
    out: Path,
    *,
    constraints: bool = True,
    seed: int = 1,
    parameters: dict[str, list[int]] = PARAMETERS,
    failures: bool = False,
) -> Path:
    """Write one cache per GPU and the config into ``out``; return the config's path
    (``parameters``: fewer values of the same parameters, for a quick test)."""
    out.mkdir(parents=True, exist_ok=True)
    configs = valid_configurations(parameters)
    names = list(parameters)
    files = []
    for index, gpu in enumerate(GPUS):
        cache = {}
        for row, value in zip(
            configs.astype(int).tolist(), times(configs, index, seed, failures), strict=True
        ):
            entry: dict[str, float | int | str] = dict(zip(names, row, strict=True))
            entry["time"] = float(value) if np.isfinite(value) else "RuntimeFailedConfig"
            cache[",".join(map(str, row))] = entry
        document = {
            "device_name": gpu,
            "kernel_name": "synthetic_gemm",
            "problem_size": [4096, 4096],
            "tune_params_keys": names,
            "tune_params": parameters,
            "objective": "time",
            "cache": cache,
        }
        with gzip.open(out / f"{gpu}.json.gz", "wt", encoding="utf-8") as handle:
            json.dump(document, handle)
        files.append(f'{gpu} = "{gpu}.json.gz"')
    name = "synthetic_gemm" + ("" if constraints else "_no_constraints")
    name += "_failures" if failures else ""
    design = ""
    if constraints:
        design = "\n[design]\nconstraints = [\n" + "".join(f'    "{c}",\n' for c in CONSTRAINTS)
        design += "]\n"
    text = f"""# Made-up times over CLBlast GEMM's space (experiments/synthetic_replay.py).
[campaign]
name = "{name}"
seed = 0

[kernel]
executor = "replay"
objective = "time"
files = {{ gpu = {{ {", ".join(files)} }} }}
{design}
[objectives]
time = "minimize"

[trees]
prefix = "gemm"
"""
    path = out / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for caches and config")
    parser.add_argument("--no-constraints", action="store_true", help="config without them")
    parser.add_argument("--seed", type=int, default=1, help="seed of the shared landscape")
    parser.add_argument("--failures", action="store_true", help="failures beside the optimum")
    args = parser.parse_args(argv)
    path = write(
        args.out, constraints=not args.no_constraints, seed=args.seed, failures=args.failures
    )
    print(f"wrote {len(GPUS)} caches and {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
