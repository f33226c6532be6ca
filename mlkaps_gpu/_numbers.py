"""Small numeric helpers shared by several packages (numpy only, no other module of
mlkaps_gpu, so that every layer may import them)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt


def plain(value: Any) -> Any:
    """``value`` as plain Python data, ready for JSON or ``str``.

    A numpy scalar becomes the Python value it holds (``np.int64(3)`` -> ``3``); an array,
    list or tuple becomes a list of such values (nested as deep as it is); anything else is
    returned unchanged.
    """
    if isinstance(value, np.ndarray):
        return plain(value.tolist())
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def geometric_mean(values: npt.ArrayLike) -> float:
    """The geometric mean of positive values, ``exp(mean(log(values)))``.

    No guard: an empty input gives NaN (with numpy's warning) and a value <= 0 gives NaN or
    0; callers that may pass such values check them first.
    """
    return float(np.exp(np.mean(np.log(values))))
