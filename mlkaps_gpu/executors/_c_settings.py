"""``[kernel]`` of ``executor = "cffi"`` (a C kernel: a shipped ``builtin`` or your ``source``)
and of ``executor = "cupy"`` (a shipped CUDA kernel).

A C ``source`` is checked when the configuration is loaded: the file exists, cffi parses the
prototype, macro names are C identifiers, and the ``builder`` and ``check`` references have the
right form (a referenced file must exist). The builder and the check are user code: they are
imported when the executor is built (:func:`~mlkaps_gpu.executors.load_kernel_functions`), never
here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from mlkaps_gpu._settings import SettingError
from mlkaps_gpu.executors._base import ExecutorError
from mlkaps_gpu.executors._prototype import check_prototype
from mlkaps_gpu.executors._python_settings import REFERENCE_ALLOWED, check_reference_form
from mlkaps_gpu.executors._references import (
    is_file_reference,
    resolve_reference,
    split_reference,
)
from mlkaps_gpu.executors._settings import (
    KernelOptions,
    KernelSettingsBase,
    base_folder,
    expand_path,
)
from mlkaps_gpu.space import IdentifierError, check_identifier

#: The ``[kernel]`` keys of a cffi kernel given by its ``source`` (a builtin brings its own).
SOURCE_KEYS = (
    "prototype",
    "builder",
    "check",
    "macros",
    "runtime",
    "threads",
    "extra_compile_args",
)


class CffiKernelSettings(KernelSettingsBase):
    """``[kernel]`` with ``executor = "cffi"``: ``builtin``, or ``source`` with ``prototype``
    and ``builder``."""

    executor: Literal["cffi"] = Field(
        description="`cffi`: a C kernel (your `source`, or a shipped `builtin`)."
    )
    builtin: str | None = Field(
        default=None,
        description=(
            "cffi / cupy: the shipped kernel (`lu`, `gemm`, `matsum`, `gemm_cuda`); cffi takes "
            "`builtin` or `source`."
        ),
    )
    source: str | None = Field(
        default=None,
        description=(
            "cffi: your C source file (a path relative to the configuration file, `${VAR}` "
            "expanded), compiled with the design's `macros` as `-D NAME=value` and called "
            "through its `prototype` with the arguments `builder` makes; instead of `builtin`. "
            "Each design parameter reaches it through `macros`, `runtime` or `threads`."
        ),
    )
    prototype: str | None = Field(
        default=None,
        description=(
            "cffi (with `source`): the C prototype of the entry function, e.g. "
            "`void saxpy(int n, double a, const double *x, double *y)`."
        ),
    )
    builder: str | None = Field(
        default=None,
        description=(
            "cffi (with `source`): `file.py:function` (relative to the configuration file, "
            "loaded without PYTHONPATH) or `module:function`, called as `function(inputs, rng)` "
            "and returning `KernelCall(args=[...], overwritten=[...])`: one argument per "
            'parameter of the prototype, `Design("name")` where a `runtime` parameter goes.'
        ),
        json_schema_extra={"allowed": REFERENCE_ALLOWED},
    )
    check: str | None = Field(
        default=None,
        description=(
            "cffi (with `source`): `file.py:function` or `module:function`, called as "
            "`function(inputs, outputs)` after the first and the last run; false gives the "
            "row the status `invalid`. Default: no check."
        ),
        json_schema_extra={"allowed": REFERENCE_ALLOWED},
    )
    macros: list[str] | dict[str, str] = Field(
        default_factory=list,
        description=(
            "cffi (with `source`): design parameters passed at compile time as `-D NAME=value`, "
            'a list (the macro is the parameter\'s name) or `{parameter = "MACRO", ...}`; '
            "each distinct combination of values is compiled once."
        ),
        json_schema_extra={"allowed": 'a list of names, or a table {parameter = "MACRO"}'},
    )
    runtime: list[str] = Field(
        default_factory=list,
        description=(
            "cffi (with `source`): design parameters passed as arguments, where the builder "
            'puts `Design("name")`.'
        ),
    )
    threads: str | None = Field(
        default=None,
        description=(
            "cffi (with `source`): the design parameter holding the OpenMP thread count (set "
            "with `omp_set_num_threads` before the runs; the kernel needs no code for it)."
        ),
    )
    extra_compile_args: list[str] | None = Field(
        default=None,
        description='cffi (with `source`): compiler flags (default `["-O2", "-fopenmp"]`).',
    )
    options: KernelOptions = Field(default_factory=dict)

    @field_validator("builder", "check")
    @classmethod
    def _module_function(cls, value: str | None, info: ValidationInfo) -> str | None:
        return check_reference_form(info.field_name or "builder", value)

    @model_validator(mode="after")
    def _builtin_or_source(self, info: ValidationInfo) -> CffiKernelSettings:
        """A cffi kernel is a `builtin` or a `source`; a source's file, prototype, macro names
        and the files its builder and check name are checked now (not imported)."""
        if (self.builtin is None) == (self.source is None):
            problem = "give `builtin` or `source`, not both" if self.builtin else "missing"
            raise SettingError(
                "source" if self.builtin else "builtin",
                f'{problem}: executor = "cffi" needs `builtin` (a shipped kernel) or `source` '
                "(your C file, with `prototype` and `builder`)",
                self.source,
            )
        if self.builtin is not None:
            for key in SOURCE_KEYS:
                if self.given(key):
                    raise SettingError(
                        key,
                        "only with `source` (a builtin kernel brings its own)",
                        getattr(self, key),
                    )
            return self
        base = base_folder(info)
        assert self.source is not None
        path = expand_path(self.source, "source", base).absolute()
        if not path.is_file():
            raise SettingError("source", f"C source file not found: {path}", self.source)
        self.source = str(path)
        for key in ("prototype", "builder"):
            if getattr(self, key) is None:
                raise SettingError(key, "missing: `source` needs it")
        self._check_prototype()
        self.builder = _resolve_file_reference("builder", self.builder, base)
        if self.check is not None:
            self.check = _resolve_file_reference("check", self.check, base)
        self._check_macro_names()
        return self

    def _check_prototype(self) -> None:
        assert self.prototype is not None
        try:
            entry = check_prototype(self.prototype)
            check_identifier(entry, what="entry function")
        except (ExecutorError, IdentifierError) as error:
            raise SettingError("prototype", str(error), self.prototype) from None

    def _check_macro_names(self) -> None:
        macros = self.macros
        pairs = list(macros.items()) if isinstance(macros, dict) else [(m, m) for m in macros]
        for index, (name, macro) in enumerate(pairs):
            key = f"macros.{name}" if isinstance(macros, dict) else f"macros[{index}]"
            try:
                check_identifier(macro, what="macro")
            except IdentifierError as error:
                raise SettingError(key, str(error), macro) from None
        seen: set[str] = set()
        for key, names in (
            ("macros", [name for name, _ in pairs]),
            ("runtime", self.runtime),
            ("threads", [self.threads] if self.threads else []),
        ):
            for name in names:
                if name in seen:
                    raise SettingError(
                        key, f"design parameter {name!r} is passed to the kernel twice", name
                    )
                seen.add(name)

    def passed_design(self) -> dict[str, str]:
        """``source``: the design parameters passed to the kernel, each with the key that
        passes it (``macros``, ``runtime`` or ``threads``)."""
        passed = {name: "macros" for name in self.macros}
        passed.update({name: "runtime" for name in self.runtime})
        if self.threads:
            passed[self.threads] = "threads"
        return passed

    def check_design(self, design: list[str]) -> None:
        """Check a ``source`` kernel's ``macros``, ``runtime`` and ``threads`` against the
        space's design parameters: each names one, and each reaches the kernel.

        Raises:
            SettingError: naming the key.
        """
        if self.source is None:
            return
        passed = self.passed_design()
        for name, key in passed.items():
            if name not in design:
                raise SettingError(
                    key,
                    f"{name!r} is not a design parameter (design: {', '.join(design) or 'none'})",
                    getattr(self, key),
                )
        for name in design:
            if name not in passed:
                raise SettingError(
                    "runtime",
                    f"design parameter {name!r} does not reach the kernel: list it in `macros` "
                    f'(compile time), `runtime` (an argument, Design("{name}") in the builder) '
                    "or `threads`",
                )


class CupyKernelSettings(KernelSettingsBase):
    """``[kernel]`` with ``executor = "cupy"``: a shipped CUDA kernel."""

    executor: Literal["cupy"] = Field(description="`cupy`: a shipped CUDA kernel.")
    builtin: str = Field(
        description="cffi / cupy: the shipped kernel (`lu`, `gemm`, `matsum`, `gemm_cuda`)."
    )
    options: KernelOptions = Field(default_factory=dict)


def _resolve_file_reference(key: str, reference: str | None, base: Path) -> str:
    """``module:function`` as it is, or ``file.py:function`` with the file's path made absolute
    (relative to ``base``); a file that does not exist is refused now. Nothing is imported."""
    assert reference is not None
    try:
        where, _ = split_reference(reference)
    except ExecutorError as error:
        raise SettingError(key, str(error), reference) from None
    resolved = resolve_reference(reference, base)
    if is_file_reference(where):
        path = Path(split_reference(resolved)[0])
        if not path.is_file():
            raise SettingError(key, f"function file not found: {path}", reference)
    return resolved


__all__ = ["SOURCE_KEYS", "CffiKernelSettings", "CupyKernelSettings"]
