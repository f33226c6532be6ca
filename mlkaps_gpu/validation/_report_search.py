"""The report's second section: the search.

How the best measured value improved with the evaluations (per input value and over all, from
``samples.sqlite``), which parameters the surrogate found important (LightGBM's gain importance
of ``models/<objective>.txt``: the total gain of the splits on each feature) and where the
samples went in the space (parallel coordinates).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlkaps_gpu.campaign import Campaign
from mlkaps_gpu.validation._report_page import _Page

#: How the importance is measured, as the figure names it.
IMPORTANCE_METHOD = "LightGBM gain importance (total split gain per feature) of the surrogate"


def gain_importance(campaign: Campaign) -> tuple[list[str], np.ndarray] | None:
    """The parameters (the model's feature order, ``Space.names``) and the total gain of the
    splits on each in the primary objective's surrogate; None before the modeling stage."""
    objective = campaign.setup.objectives[0]
    if not (campaign.directory / "models" / f"{objective}.txt").is_file():
        return None
    booster = campaign.load_models()[0].booster_
    gain = np.asarray(booster.feature_importance(importance_type="gain"), dtype=np.float64)
    names = campaign.space.names
    if len(gain) != len(names):
        names = list(booster.feature_name())
    return list(names), gain


def search_section(page: _Page, campaign: Campaign, table: pd.DataFrame) -> None:
    """Best-so-far, parameter importance and the samples over the space."""
    from mlkaps_gpu import analysis

    page.heading("The search")
    if not len(table):
        page.paragraph("No samples stored yet.")
        return
    objective = campaign.setup.objectives[0]
    maximize = campaign.setup.directions[0] == "maximize"
    inputs = campaign.space.input_names
    page.figure(
        analysis.best_so_far(table, objective, inputs, maximize=maximize),
        f"Best {objective} measured so far against the evaluations: per input value (left, as "
        "a fraction of the best measured there at the end) and over all input values (right)",
    )
    importance = gain_importance(campaign)
    if importance is not None:
        names, gain = importance
        method = f"{IMPORTANCE_METHOD} models/{objective}.txt"
        page.figure(
            analysis.parameter_importance(names, gain, inputs, method=method),
            f"Parameter importance: {method}, as a share of the total",
        )
    page.figure(
        analysis.parallel_coordinates(
            table, campaign.space, objective, maximize=maximize, seed=campaign.config.seed
        ),
        "The samples over the space (parallel coordinates): one line per successful sample, "
        f"coloured by the rank of its {objective}",
    )
