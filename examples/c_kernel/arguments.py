"""The arguments of transpose.c's entry function, and the check of its answer."""

import numpy as np

from mlkaps_gpu.executors import Design, KernelCall


def build(inputs, rng):
    """One argument per parameter of `transpose(m, n, a, b, chunk)`."""
    m, n = inputs["m"], inputs["n"]
    a = rng.random((m, n))  # the same data for the same sizes, in every configuration
    b = np.zeros((n, m))
    return KernelCall(args=[m, n, a, b, Design("chunk")])


def check(inputs, outputs):
    """A configuration that transposes wrongly is recorded as invalid, never as fast."""
    return np.array_equal(outputs["b"], inputs["a"].T)
