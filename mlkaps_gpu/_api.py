"""The one-call entry point: ``tune(config, out=directory)``, or ``tune(out=..., space=...,
kernel=..., budget=...)`` from Python objects."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mlkaps_gpu.campaign import Campaign, CampaignConfig
    from mlkaps_gpu.space import Parameter, Space

#: ``progress(stage, done, total)``, called as the stages advance.
Progress = Callable[[str, int, int], None]
#: A kernel given as a Python callable: ``kernel(row) -> value`` (or a dict of objectives).
Kernel = Callable[[dict[str, Any]], Any]


def tune(
    config: CampaignConfig | str | os.PathLike[str] | None = None,
    out: str | os.PathLike[str] | None = None,
    *,
    space: Space | None = None,
    kernel: Kernel | None = None,
    budget: int | None = None,
    objectives: Mapping[str, str] | None = None,
    prefix: str = "mlkaps",
    seed: int = 0,
    force: bool = False,
    remeasure: bool = False,
    progress: Progress | None = None,
) -> Campaign:
    """Run (or resume) a campaign end to end: sampling, surrogate, grid optimization, trees and
    the verified header.

    Either from a configuration (a TOML file or a :func:`load_config` result), or from Python
    objects: a :class:`~mlkaps_gpu.space.Space`, a callable ``kernel(row)`` returning the
    objective value (a dict for several objectives; an exception or a non-finite value is a
    failed measurement) and a ``budget``, every other setting at its default. The callable is
    driven through :meth:`Campaign.ask` / :meth:`Campaign.tell`, so such a campaign is stored
    and resumable like any other.

    Args:
        config: a TOML file or a config from :func:`load_config` (not with ``space``).
        out: the campaign directory; a half-done campaign there is resumed.
        space: the search space (with ``kernel`` and ``budget``).
        kernel: called with one row (a dict of input and design values) per measurement.
        budget: measurements to spend.
        objectives: name -> ``"minimize"`` / ``"maximize"`` (default ``{"time": "minimize"}``).
        prefix: the header's symbol prefix.
        seed: the campaign's seed.
        force: resume even when the configuration differs from the one the directory was
            started with, and rebuild outputs of finished stages that are damaged or missing
            from the stored measurements.
        remeasure: a missing or damaged measurement store is moved aside and measured again
            from scratch (the CLI's ``--remeasure``); without it such a store is an error.
        progress: optional ``progress(stage, done, total)`` callback.

    Returns:
        The finished :class:`~mlkaps_gpu.campaign.Campaign` (its ``header_path`` is the header).

    Example:
        >>> campaign = mlkaps_gpu.tune("campaign.toml", out="runs/lu")  # doctest: +SKIP
    """
    from mlkaps_gpu.campaign import Campaign, load_config

    if out is None:
        raise TypeError("tune: give the campaign directory as out=...")
    if space is not None:
        if config is not None or kernel is None or budget is None:
            raise TypeError("tune: give either config, or space with kernel and budget")
        wanted = dict(objectives or {"time": "minimize"})
        text = config_text(space, budget=budget, objectives=wanted, prefix=prefix, seed=seed)
        return _tune_objects(
            text,
            Path(out),
            kernel,
            list(wanted),
            force=force,
            remeasure=remeasure,
            progress=progress,
        )
    if config is None:
        raise TypeError("tune: give config (a TOML file or load_config's result) or space")
    if isinstance(config, str | os.PathLike):
        config = load_config(Path(config))
    campaign = Campaign.create_or_resume(config, Path(out), force=force, remeasure=remeasure)
    campaign.run(progress)
    return campaign


def _tune_objects(
    text: str,
    out: Path,
    kernel: Kernel,
    objectives: list[str],
    *,
    force: bool,
    remeasure: bool = False,
    progress: Progress | None,
) -> Campaign:
    """The campaign of a configuration text measured by ``kernel`` through ask / tell."""
    from mlkaps_gpu.campaign import Campaign, parse_config

    campaign = Campaign.create_or_resume(
        parse_config(text, label="tune()"), out, force=force, remeasure=remeasure
    )
    _drive(campaign, kernel, objectives, progress)
    campaign.run(progress)
    return campaign


def _drive(campaign: Campaign, kernel: Kernel, objectives: list[str], progress: Any) -> None:
    """Measure the asked rows with ``kernel`` and tell them until the budget is spent."""
    while not campaign.sampling_complete():
        rows = campaign.ask()
        values: dict[str, list[float]] = {name: [] for name in objectives}
        messages = []
        for row in rows.to_dict("records"):
            try:
                answer = kernel(row)
                message = ""
            except Exception as error:  # noqa: BLE001 - a failing kernel is a failed row
                answer, message = math.nan, f"{type(error).__name__}: {error}"
            scored = answer if isinstance(answer, Mapping) else {objectives[0]: answer}
            for name in objectives:
                values[name].append(float(scored.get(name, math.nan)))
            messages.append(message)
        campaign.tell(rows.assign(**values, message=messages))
        if progress:
            progress("sampling", len(campaign.store), campaign.config.sampling.budget)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value.item() if hasattr(value, "item") else value)


def _parameter_line(parameter: Parameter) -> str:
    fields = [f"type = {_toml_value(parameter.kind)}"]
    if parameter.values is not None:
        fields.append(f"values = [{', '.join(_toml_value(v) for v in parameter.values)}]")
    else:
        fields.append(f"range = [{_toml_value(parameter.low)}, {_toml_value(parameter.high)}]")
    if parameter.log:
        fields.append("log = true")
    if parameter.levels is not None:
        fields.append(f"levels = {parameter.levels}")
    return f"{parameter.name} = {{ {', '.join(fields)} }}"


def config_text(
    space: Space, *, budget: int, objectives: Mapping[str, str], prefix: str, seed: int
) -> str:
    """The TOML configuration of a campaign on ``space`` measured through ask / tell."""
    lines = ["[campaign]", 'name = "tune"', f"seed = {seed}", "", "[kernel]"]
    lines += ['executor = "external"', "", "[inputs]"]
    lines += [_parameter_line(p) for p in space.inputs]
    lines += ["", "[design]", *(_parameter_line(p) for p in space.design)]
    if space.constraints:
        listed = ", ".join(json.dumps(c.source) for c in space.constraints)
        lines.append(f"constraints = [{listed}]")
    lines += ["", "[objectives]", *(f"{k} = {json.dumps(v)}" for k, v in objectives.items())]
    lines += [
        "",
        "[sampling]",
        f"budget = {budget}",
        "",
        "[trees]",
        f"prefix = {json.dumps(prefix)}",
    ]
    return "\n".join(lines) + "\n"
