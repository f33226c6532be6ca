"""The sampler extension point.

Life cycle (driven by the campaign loop, which owns the budget):

1. ``sampler = SomeSampler(space, seed=...)``, or ``Sampler.from_settings(settings, space, parts)``
   (the campaign's way: the class of ``[sampling] method`` from the registry, built from the
   settings and the :class:`SamplerParts` the campaign hands it);
2. ``sampler.tell(rows, results)`` with every measurement already stored (on resume);
3. repeatedly ``rows = sampler.ask(n)`` -> executor -> store -> ``sampler.tell(rows, results)``.

``ask`` validates ``n``, calls the subclass's ``_ask``, drops rows already measured or already
handed out, tops the batch up, and checks that every row satisfies the constraints. Randomness
comes from one ``numpy.random.Generator`` per call, derived from the seed and the call number, so
the same seed and the same history give the same rows.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pandas as pd

from mlkaps_gpu.space import Space

if TYPE_CHECKING:
    from mlkaps_gpu.sampling._settings import SamplingSettings


@dataclass(frozen=True)
class SamplerParts:
    """What a campaign hands a sampler besides its ``[sampling]`` settings.

    Attributes:
        seed: seed of the sampler's random streams.
        budget: measurements of the sampling stage (GA-Adaptive plans its phases on it).
        objective: the primary objective.
        maximize: whether the primary objective is maximized.
        model_factory: a new (unfitted) bootstrapped ensemble (GA-Adaptive's model).
        points: the input points to exploit at (GA-Adaptive; None: its own choice).
        feature_space: the space whose features the models learn on (None: the sampler's).
        extra_training: measurements of other campaigns added to every fit (GA-Adaptive).
        warm_start: share of the budget first spent on ``extra_training``'s best (None: the
            sampler's default).
    """

    seed: int = 0
    budget: int = 1000
    objective: str = "time"
    maximize: bool = False
    model_factory: Callable[[], Any] | None = None
    points: pd.DataFrame | None = None
    feature_space: Space | None = None
    extra_training: pd.DataFrame | None = None
    warm_start: float | None = None


class SamplerError(RuntimeError):
    """A sampler broke its contract (for example returned an invalid row)."""


class Sampler(abc.ABC):
    """Base class of every sampler.

    Args:
        space: the search space.
        seed: seed of the sampler's random streams.
    """

    #: Whether the sampler reads the grid and the transferred samples of :class:`SamplerParts`
    #: (the campaign builds them only for a sampler that does).
    uses_campaign_data: ClassVar[bool] = False

    def __init__(self, space: Space, *, seed: int = 0) -> None:
        self.space = space
        self.seed = int(seed)
        self._n_asks = 0
        self._seen: set[tuple[Any, ...]] = set()
        self._told: list[pd.DataFrame] = []
        self._history: pd.DataFrame | None = None
        self._finite_rows: pd.DataFrame | bool | None = None

    @classmethod
    def from_settings(
        cls, settings: SamplingSettings, space: Space, parts: SamplerParts | None = None
    ) -> Sampler:
        """The sampler of ``settings.method`` (looked up in the registry,
        :data:`~mlkaps_gpu.sampling.SAMPLERS`) over ``space``, built from the settings and
        ``parts``."""
        from mlkaps_gpu.sampling._registry import SAMPLERS

        return SAMPLERS[settings.method].from_parts(space, parts or SamplerParts(), settings)

    @classmethod
    def from_parts(
        cls, space: Space, parts: SamplerParts, settings: SamplingSettings | None = None
    ) -> Sampler:
        """This class built from ``parts`` (and the settings a sampler reads); a sampler
        that takes more than a seed overrides it."""
        return cls(space, seed=parts.seed)

    def _rng(self, salt: int = 0) -> np.random.Generator:
        return np.random.default_rng(np.random.SeedSequence([self.seed, self._n_asks, salt]))

    def ask(self, n: int) -> pd.DataFrame:
        """Up to ``n`` new valid rows, never one already measured or asked for.

        Fewer rows come back only when the space has no unseen valid configuration left.
        """
        if int(n) != n or n < 1:
            raise ValueError(f"ask(n): n must be a positive integer, got {n!r}")
        n = int(n)
        rng = self._rng()
        self._n_asks += 1
        rows = self._filter_new(self._ask(n, rng))
        attempts = 0
        while len(rows) < n and attempts < 20:
            attempts += 1
            extra = self._filter_new(self.space.sample_valid(n - len(rows), rng), rows)
            rows = pd.concat([rows, extra], ignore_index=True)
        if len(rows) < n:
            # random draws keep hitting seen rows: the space may be (nearly) exhausted
            rows = pd.concat([rows, self._unseen_rows(n - len(rows), rng, rows)], ignore_index=True)
        rows = rows.iloc[:n].reset_index(drop=True)
        if len(rows):
            valid = self.space.is_valid(rows)
            if not valid.all():
                raise SamplerError(
                    f"{type(self).__name__} produced {int((~valid).sum())} invalid rows"
                )
        self._seen.update(self.space.key(rows))
        return rows

    def tell(self, rows: pd.DataFrame, results: pd.DataFrame) -> None:
        """Record measurements (rows and their results, same order)."""
        if len(rows) != len(results):
            raise ValueError("tell: rows and results differ in length")
        if len(rows) == 0:
            return
        self._seen.update(self.space.key(rows))
        told = pd.concat([rows.reset_index(drop=True), results.reset_index(drop=True)], axis=1)
        self._told.append(told)
        self._history = None
        self._tell(told)

    @property
    def history_(self) -> pd.DataFrame:
        """Every told row with its results, in telling order (concatenated on demand, once per
        tell, rather than on every tell)."""
        if self._history is None:
            self._history = (
                pd.concat(self._told, ignore_index=True) if self._told else pd.DataFrame()
            )
            self._told = [self._history] if len(self._history) else []
        return self._history

    def restore(self, rows: pd.DataFrame, results: pd.DataFrame, *, asks: int) -> None:
        """Resume: tell the stored history and continue as if ``asks`` batches had been asked,
        so a resumed campaign draws what an uninterrupted one would have drawn next."""
        self.tell(rows, results)
        self._n_asks = int(asks)

    def _filter_new(self, rows: pd.DataFrame, batch: pd.DataFrame | None = None) -> pd.DataFrame:
        rows = rows[self.space.names].reset_index(drop=True)
        # (no copy of the whole history: _seen grows with the campaign)
        taken = set(self.space.key(batch)) if batch is not None and len(batch) else set()
        keep = []
        for index, key in enumerate(self.space.key(rows)):
            if key not in self._seen and key not in taken:
                taken.add(key)
                keep.append(index)
        return rows.iloc[keep].reset_index(drop=True)

    def _unseen_rows(self, n: int, rng: np.random.Generator, batch: pd.DataFrame) -> pd.DataFrame:
        """Up to ``n`` valid rows never seen, drawn from the enumeration of a finite space
        (none when the space is infinite or too large to enumerate)."""
        if self._finite_rows is None:
            self._finite_rows = _enumerate_valid_rows(self.space)
        if self._finite_rows is False:
            return self.space.empty_table()
        unseen = self._filter_new(self._finite_rows, batch)
        if len(unseen) > n:
            unseen = unseen.iloc[np.sort(rng.choice(len(unseen), size=n, replace=False))]
        return unseen.reset_index(drop=True)

    @abc.abstractmethod
    def _ask(self, n: int, rng: np.random.Generator) -> pd.DataFrame:
        """Propose ``n`` valid rows (duplicates are filtered by ``ask``)."""

    def _tell(self, told: pd.DataFrame) -> None:  # noqa: B027 - optional hook
        """Hook for samplers that learn from results (``told`` has rows and results)."""


def _enumerate_valid_rows(space: Space) -> pd.DataFrame | bool:
    """Every valid row of a space whose inputs are finite, or False when that is not possible
    (a float range input, a design space that is not enumerated, too many rows)."""
    if not space.enumerable:
        return False
    axes = []
    for parameter in space.inputs:
        if parameter.name in space.fixed_inputs:
            axes.append(np.array([space.fixed_inputs[parameter.name]], dtype=parameter.dtype))
        elif parameter.values is not None:
            axes.append(parameter.domain_values())
        elif parameter.kind == "int":
            assert parameter.low is not None and parameter.high is not None
            if parameter.high - parameter.low + 1 > _ENUMERATE_INPUT_POINTS:
                return False
            axes.append(np.arange(int(parameter.low), int(parameter.high) + 1))
        else:
            return False
    n_points = int(np.prod([float(len(a)) for a in axes]))
    if n_points > _ENUMERATE_INPUT_POINTS:
        return False
    mesh = np.meshgrid(*[np.arange(len(a)) for a in axes], indexing="ij")
    inputs = pd.DataFrame(
        {p.name: axes[i][mesh[i].ravel()] for i, p in enumerate(space.inputs)},
        index=range(n_points),
    )
    tables = []
    total = 0
    for point, values in enumerate(inputs.to_dict(orient="records")):
        valid = space.valid_design_codes(values)
        total += len(valid)
        if total > _ENUMERATE_ROWS:
            return False
        if len(valid):
            repeated = inputs.iloc[np.full(len(valid), point)]
            tables.append(space.assemble(repeated, valid))
    if not tables:
        return space.empty_table()
    return pd.concat(tables, ignore_index=True)


#: Limits of the enumeration used to finish a batch in a nearly exhausted finite space.
_ENUMERATE_INPUT_POINTS = 20_000
_ENUMERATE_ROWS = 200_000
