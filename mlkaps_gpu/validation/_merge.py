"""``mlkaps-gpu merge``: keep the tuned configuration only where it is significantly faster than
an expert's, export that choice as a second header, and validate it again.

1. *Compare* (:func:`~mlkaps_gpu.validation._validate.validate`): at every validation point the
   header's configuration and the expert's are measured ``repeats`` times, interleaved.
2. *Decide*: a point keeps the tuned configuration only where the comparison calls it a
   progression (signed-rank test on the paired repeats, speedup beyond the point's measured
   noise threshold); everywhere else the expert's.
3. *Fit*: a selector (``joint`` mode when :mod:`mlkaps_gpu.trees` offers it, else
   ``per_parameter``) learns the decisions. Its score makes each point's decision the unique
   optimum there: the decided configuration costs 1, the other measured one
   ``max(1 + 0.001, measured ratio)`` and a configuration never measured there
   ``max(1 + 0.5, surrogate ratio)``, so the tree reproduces the decisions and, where it must
   err, errs towards a measured configuration. The depth is the smallest of least regret over
   1..12 (``max_depth="auto"``, tolerance 0) unless ``max_depth`` is given.
4. *Export*: ``<prefix>_merged.h`` (symbols prefixed ``<prefix>_merged``), verified against the
   selector on boundary inputs exactly as the campaign's header, ``merged_selector.json`` (the
   selector as data, never a pickle).
5. *Validate again*: the merged header against the expert at the same points, with fresh
   measurements; ``merge/summary.json`` holds both summaries (before / after).
6. *Never regress*: the merged header ships only when that second validation has no point
   where it is slower than the expert beyond noise (the same signed-rank test and per-point
   noise threshold) and its geometric-mean speedup is at least 1. A tree of depth ``auto`` that
   fails is refitted at depth ``FAITHFUL_DEPTH`` (reproducing the per-point decisions as far as
   a tree can) and validated again; if that fails too, or no point kept the tuned
   configuration, the expert ships: the rejected header moves to ``merge/rejected/`` and the
   command says so. The *headroom* (:mod:`._headroom`) tells how much faster than the expert a
   small local search around it gets, and what share of that the shipped choice reaches.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mlkaps_gpu.campaign import Campaign, CampaignError, atomic_write
from mlkaps_gpu.codegen import boundary_inputs, render_header, validate_prefix, verify_header
from mlkaps_gpu.space import Space
from mlkaps_gpu.trees import MODES, Selector, fit_selector, tree_size
from mlkaps_gpu.validation._expert import HeaderReference, Reference
from mlkaps_gpu.validation._headroom import HeadroomSettings, measure_headroom
from mlkaps_gpu.validation._validate import (
    Progress,
    Validation,
    validate,
    write_validation,
)

MERGE_DIR = "merge"
#: The merged selector as data (:meth:`Selector.to_dict <mlkaps_gpu.trees.Selector.to_dict>`).
MERGED_SELECTOR = "merged_selector.json"
#: Least relative cost of the other measured configuration at a point.
DECISION_MARGIN = 1e-3
#: Least relative cost of a configuration never measured at a point: the measurements say
#: nothing about it there, and the surrogate's optimism is what the merge guards against.
UNMEASURED_PENALTY = 0.5
#: Depth of the second, faithful fit when the first merged tree does not ship.
FAITHFUL_DEPTH = 12


@dataclass
class MergeResult:
    """What :func:`merge` produced."""

    decisions: pd.DataFrame
    selector: Selector
    header: Path | None  # None: no tuned choice won, the expert ships
    before: Validation
    after: Validation
    summary: dict[str, Any]


def decide(validation: Validation, space: Space) -> pd.DataFrame:
    """Per point: inputs, the kept configuration and ``source`` (``tuned`` or ``expert``)."""
    keep_tuned = (validation.points["verdict"] == "progression").to_numpy()
    tuned = validation.configurations("tuned", space)
    expert = validation.configurations("reference", space)
    chosen = pd.DataFrame(
        {
            name: pd.Series(
                np.where(keep_tuned, tuned[name].to_numpy(object), expert[name].to_numpy(object))
            ).astype(space.parameters[name].dtype)
            for name in space.design_names
        }
    )
    inputs = validation.points[space.input_names].astype({p.name: p.dtype for p in space.inputs})
    return pd.concat(
        [
            inputs.reset_index(drop=True),
            chosen,
            pd.DataFrame({"source": np.where(keep_tuned, "tuned", "expert")}),
        ],
        axis=1,
    )


def decision_score(validation: Validation, decisions: pd.DataFrame, campaign: Campaign) -> Any:
    """The score of step 3 (module docstring) over rows of inputs + design."""
    space = campaign.space
    surrogate = campaign.load_models()[0]
    maximize = campaign.setup.directions[0] == "maximize"

    def surrogate_cost(table: pd.DataFrame) -> np.ndarray:
        predicted = np.asarray(surrogate.predict(space.features(table)), dtype=np.float64)
        predicted = np.maximum(np.abs(predicted), 1e-300)
        return 1.0 / predicted if maximize else predicted

    inputs = space.input_names
    keys = decisions[inputs].assign(_point=np.arange(len(decisions)))
    chosen_codes = space.design_codes(decisions)
    tuned_codes = space.design_codes(validation.configurations("tuned", space))
    expert_codes = space.design_codes(validation.configurations("reference", space))
    from_tuned = (decisions["source"] == "tuned").to_numpy()
    other_codes = np.where(from_tuned[:, None], expert_codes, tuned_codes)
    costs = validation.points[["tuned_cost", "reference_cost"]].to_numpy(dtype=np.float64)
    # measured ratio of the other configuration to the kept one (log costs are medians)
    measured = np.exp(np.where(from_tuned, costs[:, 1] - costs[:, 0], costs[:, 0] - costs[:, 1]))
    measured = np.where(np.isfinite(measured), measured, 1.0)
    chosen_prediction = surrogate_cost(decisions[space.names])

    def score(table: pd.DataFrame) -> np.ndarray:
        located = table[inputs].merge(keys, on=inputs, how="left")["_point"].to_numpy()
        if np.any(pd.isna(located)):
            raise ValueError("decision score asked about a point that was not validated")
        point = located.astype(np.int64)
        codes = space.design_codes(table)
        is_chosen = np.all(codes == chosen_codes[point], axis=1)
        is_other = np.all(codes == other_codes[point], axis=1) & ~is_chosen
        ratio = surrogate_cost(table) / chosen_prediction[point]
        floor = np.where(is_other, 1.0 + DECISION_MARGIN, 1.0 + UNMEASURED_PENALTY)
        ratio = np.where(is_other, measured[point], ratio)
        return np.where(is_chosen, 1.0, np.maximum(floor, ratio))

    return score


def merged_mode() -> str:
    """``joint`` where the trees offer it, else ``per_parameter``."""
    return "joint" if "joint" in MODES else "per_parameter"


def fit_merged(
    campaign: Campaign,
    decisions: pd.DataFrame,
    score: Any,
    *,
    mode: str,
    max_depth: int | str = "auto",
) -> tuple[Selector, dict[str, Any]]:
    """Fit the merged selector on the decisions; returns it and its size / depth details."""
    fitted = fit_selector(
        decisions[campaign.space.names],
        campaign.space,
        score,
        mode=mode,
        max_depth=max_depth,
        depth_tolerance=0.0,
        random_state=campaign.config.seed,
    )
    return fitted.selector, {
        "mode": mode,
        "max_depth": fitted.sweep.chosen,
        **tree_size(fitted.selector),  # leaves, nodes and the actual depth
        "depth_sweep": fitted.sweep.records(),
    }


def export_merged(
    campaign: Campaign, selector: Selector, provenance: dict[str, Any]
) -> tuple[Path, str, dict[str, Any]]:
    """Write and verify ``<prefix>_merged.h``; returns its path, prefix and verification."""
    prefix = validate_prefix(f"{campaign.config.trees.prefix}_merged")
    header = render_header(selector, prefix, provenance=provenance)
    rng = np.random.default_rng(campaign.config.seed)
    checks = boundary_inputs(selector, campaign.config.trees.verify_inputs, rng)
    report = verify_header(selector, header, checks, prefix=prefix)  # built in the user's cache
    if not report.ok:
        raise CampaignError(f"the merged header failed verification: {report}")
    path = campaign.directory / f"{prefix}.h"
    atomic_write(
        campaign.directory / MERGED_SELECTOR,
        json.dumps(selector.to_dict(), indent=1, sort_keys=True).encode("utf-8"),
    )
    atomic_write(path, header.encode())
    return path, prefix, {"verified_inputs": report.n_rows, "mismatches": report.n_mismatches}


def _compare_before(
    campaign: Campaign,
    expert: Reference,
    before: Validation | None,
    settings: dict[str, Any],
    progress: Progress | None,
) -> Validation:
    """Step 1: the campaign's header against ``expert`` (or the comparison given, checked)."""
    if before is None:
        return validate(campaign, expert, purpose="merge-before", progress=progress, **settings)
    if before.summary.get("reference") != expert.label:
        raise CampaignError(
            f"the comparison given was made against {before.summary.get('reference')!r}, "
            f"not {expert.label!r}"
        )
    if before.summary.get("tuned") != campaign.header_path.name:
        raise CampaignError(
            f"the comparison given measured {before.summary.get('tuned')!r}, not the "
            f"campaign's header {campaign.header_path.name!r}"
        )
    return before


def _fit_export_validate(
    campaign: Campaign,
    expert: Reference,
    before: Validation,
    decisions: pd.DataFrame,
    *,
    mode: str,
    max_depth: int | str,
    settings: dict[str, Any],
    progress: Progress | None,
) -> tuple[Selector, Path, dict[str, Any], Validation, np.ndarray]:
    """Steps 3-5 for one tree: fit, export and verify the header, validate it again."""
    space = campaign.space
    started = time.perf_counter()
    selector, details = fit_merged(
        campaign,
        decisions,
        decision_score(before, decisions, campaign),
        mode=mode,
        max_depth=max_depth,
    )
    header, prefix, verification = export_merged(
        campaign,
        selector,
        {
            "campaign": campaign.config.name,
            "merged_with": expert.label,
            "decided_by": before.summary.get("run", ""),
            "kept_tuned_points": int((decisions["source"] == "tuned").sum()),
            "validation_points": len(decisions),
        },
    )
    merged = HeaderReference(
        space,
        selector,
        header.read_text(encoding="utf-8"),
        prefix=prefix,
        label=header.name,
    )
    answers = merged.configurations(decisions)
    agree = np.all(space.design_codes(answers) == space.design_codes(decisions), axis=1)
    details = {**details, "verification": verification}
    details["fit_seconds"] = round(time.perf_counter() - started, 2)
    after = validate(
        campaign,
        expert,
        points=decisions[space.input_names],
        tuned=merged,
        purpose="merge-after",
        progress=progress,
        **settings,
    )
    after.summary["grid"] = before.summary.get("grid", {})
    return selector, header, details, after, agree


def regressions_beyond_noise(validation: Validation) -> int:
    """Points where the merged side is significantly slower than the expert (the validation's
    signed-rank test and noise threshold)."""
    return int((validation.points["verdict"] == "regression").sum())


def ships(validation: Validation) -> bool:
    """The no-regression rule: a merged header ships only when no validation point is a
    regression beyond noise and its geometric-mean speedup over the expert is at least 1."""
    geomean = validation.summary.get("geomean_speedup")
    return regressions_beyond_noise(validation) == 0 and geomean is not None and geomean >= 1.0


def _withdraw(campaign: Campaign, header: Path) -> Path:
    """Move a rejected merged header (and its selector) into ``merge/rejected/``."""
    folder = campaign.directory / MERGE_DIR / "rejected"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / header.name
    header.replace(target)
    data = campaign.directory / MERGED_SELECTOR
    if data.exists():
        data.replace(folder / data.name)
    return target


def _summary(
    campaign: Campaign,
    expert: Reference,
    decisions: pd.DataFrame,
    shipped: bool,
    header: Path,
    attempts: list[dict[str, Any]],
    details: dict[str, Any],
    agree: np.ndarray,
) -> dict[str, Any]:
    """What the merge decided and shipped (``merge/summary.json`` without the validations)."""
    return {
        "expert": expert.label,
        "shipped": "merged" if shipped else "expert",
        "header": header.name if shipped else None,
        "rejected_header": None if shipped else str(header.relative_to(campaign.directory)),
        "rule": (
            "a merged header ships only when its validation against the expert has no "
            "regression beyond noise and a geometric-mean speedup of at least 1; a tree fitted "
            f"at depth 'auto' that fails is refitted at depth {FAITHFUL_DEPTH}"
        ),
        "attempts": attempts,
        "kept_tuned": int((decisions["source"] == "tuned").sum()),
        "kept_expert": int((decisions["source"] == "expert").sum()),
        "tree_agreement": float(np.mean(agree)) if len(agree) else 1.0,
        "tree_disagreements": int(np.sum(~agree)),
        "tree": {k: v for k, v in details.items() if k not in ("verification", "fit_seconds")},
        "verification": details["verification"],
        "fit_seconds": details["fit_seconds"],
    }


def merge(
    campaign: Campaign,
    expert: Reference,
    *,
    sizes: dict[str, int] | None = None,
    before: Validation | None = None,
    repeats: int = 5,
    alpha: float = 0.05,
    seed: int = 0,
    mode: str | None = None,
    max_depth: int | str = "auto",
    headroom: HeadroomSettings | None = None,
    progress: Progress | None = None,
) -> MergeResult:
    """Steps 1-6 of the module docstring; ``before`` reuses a comparison with ``expert``."""
    settings: dict[str, Any] = {"repeats": repeats, "alpha": alpha, "seed": seed}
    before = _compare_before(campaign, expert, before, {**settings, "sizes": sizes}, progress)
    settings["repeats"] = int(before.summary.get("repeats", repeats))
    settings["alpha"] = float(before.summary.get("alpha", alpha))
    decisions = decide(before, campaign.space)
    mode = mode or merged_mode()
    attempts = []
    depths: list[int | str] = [max_depth] if max_depth != "auto" else ["auto", FAITHFUL_DEPTH]
    for depth in depths:
        selector, header, details, after, agree = _fit_export_validate(
            campaign,
            expert,
            before,
            decisions,
            mode=mode,
            max_depth=depth,
            settings=settings,
            progress=progress,
        )
        attempts.append(
            {
                "max_depth": depth,
                "depth": details.get("depth"),
                "leaves": details.get("leaves"),
                "geomean_speedup": after.summary.get("geomean_speedup"),
                "regressions": regressions_beyond_noise(after),
            }
        )
        if ships(after):
            break
    shipped = ships(after) and int((decisions["source"] == "tuned").sum()) > 0
    if not shipped:
        header = _withdraw(campaign, header)
    summary = _summary(campaign, expert, decisions, shipped, header, attempts, details, agree)
    summary.update({"before": before.summary, "after": after.summary})
    if headroom is not None and headroom.points > 0:
        summary["headroom"] = measure_headroom(
            campaign, expert, after, headroom, shipped=shipped, repeats=settings["repeats"]
        )
    decisions = decisions.assign(merged_agrees=agree)
    return MergeResult(decisions, selector, header if shipped else None, before, after, summary)


def write_merge(result: MergeResult, folder: Path, space: Space) -> list[Path]:
    """``summary.json``, ``decisions.csv`` and the before / after validations into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / "summary.json", folder / "decisions.csv"]
    paths[0].write_text(json.dumps(result.summary, indent=2, sort_keys=True) + "\n")
    result.decisions.to_csv(paths[1], index=False)
    paths += write_validation(result.before, folder / "before", space)
    paths += write_validation(result.after, folder / "after", space)
    return paths


def describe_merge(summary: dict[str, Any]) -> str:
    """Before / after in a few lines, and what ships."""
    lines = []
    if summary.get("shipped") == "expert":
        lines.append(
            "the expert ships: no merged header beat it without a regression beyond noise "
            f"(attempts: {_attempts(summary.get('attempts', []))}); the rejected header is "
            f"{summary.get('rejected_header')}"
        )
    lines += [
        f"kept the tuned configuration at {summary['kept_tuned']} of "
        f"{summary['kept_tuned'] + summary['kept_expert']} points (expert elsewhere); "
        f"{summary['tree']['mode']} tree of depth {summary['tree']['depth']}, "
        f"{summary['tree']['leaves']} leaves, agreeing with the decisions at "
        f"{100 * summary['tree_agreement']:.1f}% of the points; header {summary['header']}"
    ]
    headroom = summary.get("headroom")
    if headroom and headroom.get("geomean_headroom") is not None:
        share = headroom.get("median_share_reached")
        lines.append(
            f"headroom: a local search around the expert is {headroom['geomean_headroom']:.3f}x "
            f"faster (geomean, {len(headroom['points'])} points); the shipped choice reaches "
            + (f"a median {100 * share:.0f}% of it" if share is not None else "no headroom")
            + f" ({headroom['points_with_headroom']} points beyond noise)"
        )
    for label in ("before", "after"):
        s = summary[label]
        worst = s.get("worst") or {"speedup": float("nan"), "verdict": "every point the same"}
        lines.append(
            f"{label:>6}: geomean {s['geomean_speedup']:.3f}x, progressions "
            f"{100 * s['progressions']['share']:.1f}%, regressions "
            f"{100 * s['regressions']['share']:.1f}%, "
            f"worst {worst.get('speedup', float('nan')):.3f}x"
            f" ({worst.get('verdict', '-')}), noise threshold +-{100 * s['noise_threshold']:.1f}%"
        )
    return "\n".join(lines)


def _attempts(attempts: list[dict[str, Any]]) -> str:
    return (
        "; ".join(
            f"depth {a['max_depth']}: {a['leaves']} leaves, geomean {a['geomean_speedup']:.3f}x, "
            f"{a['regressions']} regressions"
            for a in attempts
        )
        or "none"
    )
