"""Shipped kernels (C through cffi, CUDA through CuPy) with their spaces and checks.

``load_builtin("lu")`` gives a :class:`BuiltinKernel`: its input and design parameters,
constraints, expert default and ``make_executor(**options)``.
"""

from ._registry import (
    BUILTIN_KERNELS,
    BuiltinKernel,
    available_cores,
    load_builtin,
    user_c_kernel,
)
from ._scipy_lu import scipy_lu, scipy_lu_expert

__all__ = ["BUILTIN_KERNELS", "BuiltinKernel", "available_cores", "load_builtin", "user_c_kernel"]
__all__ += ["scipy_lu", "scipy_lu_expert"]
