"""References a tuned campaign is compared with: the configuration another source picks per input.

A :class:`Reference` answers, for a table of input points, one configuration per point.
:func:`resolve_reference` turns the text given on the command line into one:

* ``expert``: the expert default of the campaign's kernel (the shipped kernels have one, e.g.
  ``lu``: block size 64, recursive panel, all threads);
* ``name=value,...``: one fixed configuration (every design parameter named);
* ``path/to/table.csv``: a table of input -> configuration; a point gets the configuration of the
  nearest row (inputs scaled to [0, 1], logarithmically for log-scaled inputs; categorical and
  bool inputs must match exactly);
* ``module:function``: a Python callable, called with the inputs dict, returning the configuration
  dict;
* a campaign directory: the configuration its compiled header selects.

:class:`HeaderReference` (a compiled header) also stands for the tuned side of a comparison.
"""

from __future__ import annotations

import abc
import importlib
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mlkaps_gpu._numbers import plain
from mlkaps_gpu.campaign import META, Campaign, CampaignError, ReadOnlyCampaign
from mlkaps_gpu.codegen import CompiledHeader
from mlkaps_gpu.space import Parameter, Space, parse_value
from mlkaps_gpu.trees import Selector

_CALLABLE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


class Reference(abc.ABC):
    """A configuration per input point.

    Life cycle: built once (usually by :func:`resolve_reference`), then :meth:`configurations`
    is called with tables of input points; it calls the subclass's :meth:`_configurations` and
    checks that every answer is a value of its parameter's domain.

    Args:
        space: the campaign's space (input and design parameters).
        label: how the reference is named in reports (``expert``, the file, the callable...).
    """

    kind = "reference"

    def __init__(self, space: Space, label: str) -> None:
        self.space = space
        self.label = label

    def configurations(self, points: pd.DataFrame) -> pd.DataFrame:
        """One configuration (a column per design parameter) per row of ``points``."""
        inputs = points[self.space.input_names].reset_index(drop=True)
        table = self._configurations(inputs)
        if len(table) != len(inputs):
            raise CampaignError(
                f"reference {self.label}: {len(table)} configurations for {len(inputs)} points"
            )
        missing = [n for n in self.space.design_names if n not in table]
        if missing:
            raise CampaignError(f"reference {self.label}: no value for {missing}")
        out = pd.DataFrame(
            {p.name: _column(p, table[p.name], self.label) for p in self.space.design}
        )
        outside = self.space.design_codes(out) < 0
        if outside.any():
            row, column = np.argwhere(outside)[0]
            parameter = self.space.design[column]
            raise CampaignError(
                f"reference {self.label}: {parameter.name}={out[parameter.name][row]!r} at "
                f"{inputs.iloc[row].to_dict()} is not one of "
                f"{parameter.domain_values().tolist()}"
            )
        return out

    @abc.abstractmethod
    def _configurations(self, inputs: pd.DataFrame) -> pd.DataFrame:
        """The configurations of the input rows (design columns, any numeric / text type)."""

    def describe(self) -> dict[str, str]:
        """How reports name the reference: its ``kind`` and ``label``."""
        return {"kind": self.kind, "label": self.label}


class FixedConfiguration(Reference):
    """The same configuration at every point."""

    kind = "fixed"

    def __init__(self, space: Space, values: Mapping[str, Any], label: str | None = None) -> None:
        super().__init__(space, label or ",".join(f"{k}={v}" for k, v in values.items()))
        unknown = sorted(set(values) - set(space.design_names))
        missing = [n for n in space.design_names if n not in values]
        if unknown or missing:
            raise CampaignError(
                f"reference {self.label}: give every design parameter once "
                f"({', '.join(space.design_names)}); unknown {unknown}, missing {missing}"
            )
        self.values = dict(values)

    def _configurations(self, inputs: pd.DataFrame) -> pd.DataFrame:
        return pd.DataFrame({n: [self.values[n]] * len(inputs) for n in self.space.design_names})


class CallableReference(Reference):
    """``function(inputs_dict) -> configuration dict``, called once per point."""

    kind = "callable"

    def __init__(
        self, space: Space, function: Callable[[dict[str, Any]], Mapping[str, Any]], label: str
    ) -> None:
        super().__init__(space, label)
        self.function = function

    def _configurations(self, inputs: pd.DataFrame) -> pd.DataFrame:
        rows = []
        for point in inputs.to_dict("records"):
            answer = self.function({k: plain(v) for k, v in point.items()})
            if not isinstance(answer, Mapping):
                raise CampaignError(
                    f"reference {self.label}: returned {type(answer).__name__} at {point}; "
                    "expected a dict of design values"
                )
            rows.append(dict(answer))
        return pd.DataFrame(rows, columns=self.space.design_names)


def expert_reference(campaign: Campaign) -> CallableReference:
    """The expert default of the campaign's kernel (``BuiltinKernel.expert``)."""
    expert = campaign.setup.expert
    if not expert:
        raise CampaignError(
            f"{campaign.directory}: the kernel has no expert default (only the shipped kernels "
            "have one); give the reference as name=value,..., a CSV table, module:function or "
            "a campaign directory"
        )

    def configuration(inputs: dict[str, Any]) -> dict[str, Any]:
        if callable(expert):
            return dict(expert(inputs))
        return {k: (v(inputs) if callable(v) else v) for k, v in expert.items()}

    reference = CallableReference(campaign.space, configuration, "expert")
    reference.kind = "expert"
    return reference


class TableReference(Reference):
    """The configuration of the table row nearest to each point (see the module docstring)."""

    kind = "table"

    def __init__(self, space: Space, table: pd.DataFrame, label: str) -> None:
        super().__init__(space, label)
        missing = [n for n in space.names if n not in table]
        if missing:
            raise CampaignError(f"{label}: the table lacks column(s) {missing}")
        if len(table) == 0:
            raise CampaignError(f"{label}: the table has no rows")
        self.table = table.reset_index(drop=True)

    def _scaled(self, parameter: Parameter, column: Any) -> np.ndarray:
        values = np.asarray(column, dtype=np.float64)
        if parameter.low is None or parameter.high is None or parameter.high == parameter.low:
            return values
        if parameter.log:
            return np.log(values / parameter.low) / np.log(parameter.high / parameter.low)
        return (values - parameter.low) / (parameter.high - parameter.low)

    def _configurations(self, inputs: pd.DataFrame) -> pd.DataFrame:
        distance = np.zeros((len(inputs), len(self.table)))
        for parameter in self.space.inputs:
            if parameter.kind in ("categorical", "bool"):
                here = inputs[parameter.name].astype(str).to_numpy()
                there = self.table[parameter.name].astype(str).to_numpy()
                distance[here[:, None] != there[None, :]] = np.inf
            else:
                here = self._scaled(parameter, inputs[parameter.name])
                there = self._scaled(parameter, self.table[parameter.name])
                distance += (here[:, None] - there[None, :]) ** 2
        unmatched = ~np.isfinite(distance.min(axis=1)) if len(inputs) else np.zeros(0, bool)
        if unmatched.any():
            point = inputs.iloc[int(np.argmax(unmatched))].to_dict()
            raise CampaignError(f"{self.label}: no row matches the categorical inputs of {point}")
        nearest = np.argmin(distance, axis=1)
        return self.table.iloc[nearest][self.space.design_names].reset_index(drop=True)


class HeaderReference(Reference):
    """The configuration a generated header selects, called through its compiled form."""

    kind = "header"

    def __init__(
        self,
        space: Space,
        selector: Selector,
        header: str,
        *,
        prefix: str,
        label: str,
        build_dir: Path | None = None,
    ) -> None:
        super().__init__(space, label)
        # compiled into the user's cache (build_dir is unused: see mlkaps_gpu.user_cache)
        self.compiled = CompiledHeader(selector, header, prefix=prefix, build_dir=build_dir)

    def _configurations(self, inputs: pd.DataFrame) -> pd.DataFrame:
        return self.compiled(inputs)


def campaign_header(campaign: Campaign, *, label: str | None = None) -> HeaderReference:
    """The campaign's own header (the tuned side of a validation)."""
    if not campaign.done("trees") or not campaign.header_path.exists():
        raise CampaignError(f"{campaign.directory}: the campaign has no header yet; run tune")
    # the stored header is compiled only once it is known to be the one the trees of
    # selector.json render (both checked against their checksums): a directory is data
    header = ReadOnlyCampaign(campaign.directory).header_text()
    return HeaderReference(
        campaign.space,
        campaign.load_selector(),
        header,
        prefix=campaign.config.trees.prefix,
        label=label or campaign.header_path.name,
    )


def resolve_reference(text: str, campaign: Campaign) -> Reference:
    """The reference named by ``text`` (see the module docstring for the forms)."""
    text = text.strip()
    space = campaign.space
    if text == "expert":
        return expert_reference(campaign)
    path = Path(text)
    if path.is_dir():
        if not (path / META).exists():
            raise CampaignError(f"reference {text}: a directory but not a campaign (no {META})")
        other = Campaign.open(path)
        if other.space.input_names != space.input_names or (
            other.space.design_names != space.design_names
        ):
            raise CampaignError(
                f"reference {text}: its parameters ({other.space.input_names} / "
                f"{other.space.design_names}) differ from this campaign's"
            )
        reference = campaign_header(other, label=f"{path.name}/{other.header_path.name}")
        reference.space = space
        reference.kind = "campaign"
        return reference
    if text.lower().endswith(".csv"):
        if not path.is_file():
            raise CampaignError(f"reference {text}: no such CSV file")
        table = pd.read_csv(path, keep_default_na=False)
        return TableReference(space, table, path.name)
    if "=" in text:
        values: dict[str, Any] = {}
        for item in text.split(","):
            name, sep, value = item.partition("=")
            name = name.strip()
            if not sep or name not in space.parameters or name in space.input_names:
                raise CampaignError(
                    f"reference '{item}': expected design=value with a design parameter of "
                    f"{space.design_names}"
                )
            values[name] = parse_value(space.parameters[name], value.strip())
        return FixedConfiguration(space, values, label=text)
    if _CALLABLE.match(text):
        module_name, _, function_name = text.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as error:
            raise CampaignError(
                f"reference {text}: cannot import {module_name} ({error})"
            ) from None
        function = getattr(module, function_name, None)
        if not callable(function):
            raise CampaignError(f"reference {text}: {function_name} is not a callable")
        return CallableReference(space, function, text)
    raise CampaignError(
        f"reference {text!r}: expected 'expert', name=value,..., a .csv table, "
        "module:function or a campaign directory"
    )


def _column(parameter: Parameter, values: pd.Series, label: str) -> pd.Series:
    """A design column in the parameter's dtype (text from CSV files converted)."""
    try:
        if parameter.kind == "categorical":
            return values.map(lambda v: str(plain(v))).astype(object).reset_index(drop=True)
        if parameter.kind == "bool":
            return (
                values.map(
                    lambda v: parse_value(parameter, str(plain(v))) if isinstance(v, str) else v
                )
                .astype(bool)
                .reset_index(drop=True)
            )
        numeric = pd.to_numeric(values, errors="raise").to_numpy(dtype=np.float64)
    except (ValueError, TypeError, CampaignError) as error:
        raise CampaignError(f"reference {label}: {parameter.name}: {error}") from None
    if parameter.kind == "int":
        if not np.all(numeric == np.round(numeric)):
            raise CampaignError(f"reference {label}: {parameter.name}: non-integer values")
        return pd.Series(numeric.astype(np.int64))
    return pd.Series(numeric)
