"""Small numeric helpers shared by several packages (numpy only, no other module of
mlkaps_gpu, so that every layer may import them)."""

from __future__ import annotations

from typing import Any

import numpy as np


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
