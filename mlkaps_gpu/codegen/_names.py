"""C identifiers for generated headers: prefix validation, sanitising, and one naming plan.

Every file-scope symbol of a header (types, enum constants, functions, macros) is allocated by
one :class:`NamePlan`, in a fixed order, so that names are unique, deterministic, and the same
for the code generator and for the verification wrapper that calls the header.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from mlkaps_gpu.space import RESERVED_C_NAMES, Parameter, check_identifier

_NOT_IDENTIFIER_CHAR = re.compile(r"[^A-Za-z0-9_]")


def _words(*lines: str) -> frozenset[str]:
    return frozenset(word for line in lines for word in line.split())


#: C99/C11/C23 and C++17 keywords, alternative operator spellings, and macros of the standard
#: headers that a user translation unit commonly includes (a parameter called ``I`` would break
#: under ``<complex.h>``).
RESERVED_WORDS: frozenset[str] = _words(
    "auto break case char const continue default do double else enum extern float for goto if",
    "inline int long register restrict return short signed sizeof static struct switch typedef",
    "union unsigned void volatile while _Alignas _Alignof _Atomic _Bool _Complex _Generic",
    "_Imaginary _Noreturn _Static_assert _Thread_local alignas alignof bool constexpr false",
    "nullptr static_assert thread_local true typeof typeof_unqual and and_eq asm bitand bitor",
    "catch char8_t char16_t char32_t class compl concept consteval constinit const_cast co_await",
    "co_return co_yield decltype delete dynamic_cast explicit export friend mutable namespace new",
    "noexcept not not_eq operator or or_eq private protected public reinterpret_cast requires",
    "static_cast template this throw try typeid typename using virtual wchar_t xor xor_eq",
    "NULL EOF errno assert offsetof INFINITY NAN HUGE_VAL complex imaginary I main",
) | frozenset(RESERVED_C_NAMES)


def validate_prefix(prefix: str) -> str:
    """Check a symbol prefix with the configuration's identifier rules
    (:func:`mlkaps_gpu.space.check_identifier`: ASCII, not reserved, no leading ``_``).

    Raises:
        ValueError: the prefix cannot start C identifiers as given.
    """
    return check_identifier(prefix, what="header prefix")


def sanitize(text: str) -> str:
    """Map every character outside ``[A-Za-z0-9_]`` to ``_`` (``'_'`` for an empty text)."""
    return _NOT_IDENTIFIER_CHAR.sub("_", text) or "_"


def standalone_identifier(name: str) -> str:
    """A sanitised identifier usable on its own (a struct field, a function argument)."""
    candidate = sanitize(name)
    if candidate[0].isdigit() or candidate.startswith("__") or re.match(r"_[A-Z]", candidate):
        candidate = "p_" + candidate.lstrip("_")
    if candidate in RESERVED_WORDS:
        candidate += "_"
    return candidate


def unique_name(candidate: str, taken: set[str]) -> str:
    """``candidate``, or ``candidate_2``, ``candidate_3``... whichever is not taken; records it."""
    name, number = candidate, 1
    while name in taken or name in RESERVED_WORDS:
        number += 1
        name = f"{candidate}_{number}"
    taken.add(name)
    return name


_unique = unique_name


@dataclass(frozen=True)
class OutputNames:
    """Names of one design parameter in a header."""

    field: str  # member of the configuration struct
    value_function: str  # leaf index -> value
    enum_type: str | None  # categorical only
    enum_constants: tuple[str, ...]  # one per domain value, categorical only


@dataclass(frozen=True)
class InputNames:
    """Names of one input parameter in a header."""

    argument: str  # argument of the select function
    enum_type: str | None  # categorical only
    enum_constants: tuple[str, ...]


@dataclass(frozen=True)
class ValidityNames:
    """Names of the run-time validity code (used by headers of models with a validity)."""

    tree_select: str  # the trees' configuration, unchecked
    is_valid: str  # public: inputs and configuration in their domains, constraints hold
    satisfies: str  # constraints only, at given (clamped) inputs
    fallback: str  # nearest valid configuration
    pymod: str  # Python's % on doubles
    fmin: str  # min / max propagating NaN, as numpy's (and inlined, unlike <math.h>'s)
    fmax: str
    code_functions: tuple[str, ...]  # per design parameter: value -> code (-1: not in domain)
    value_of_code: tuple[str, ...]  # per design parameter: code -> value
    candidate_functions: tuple[str, ...]  # per design parameter: fallback candidate k -> code


@dataclass(frozen=True)
class NamePlan:
    """Every identifier of one generated header."""

    prefix: str
    guard: str
    hd_macro: str
    config_type: str
    select_function: str
    feature_function: str
    inputs: tuple[InputNames, ...]
    leaf_functions: tuple[str, ...]  # one per tree
    outputs: tuple[OutputNames, ...]
    locals: tuple[str, str, str]  # config, features, leaf (inside the select function)
    validity: ValidityNames
    branch_functions: tuple[str, ...] = ()  # nested-if form of each leaf function (lookup)
    ranked_function: str = ""  # the ranked configurations (a model with a ranking)

    @classmethod
    def build(
        cls,
        prefix: str,
        inputs: Sequence[Parameter],
        design: Sequence[Parameter],
        tree_names: Sequence[str],
    ) -> NamePlan:
        """Allocate all names. ``tree_names`` label the leaf functions (one per tree)."""
        validate_prefix(prefix)
        upper = prefix.upper()
        taken: set[str] = set()
        guard = _unique(f"{upper}_SELECTOR_H_INCLUDED", taken)
        hd_macro = _unique(f"{upper}_HD", taken)
        config_type = _unique(f"{prefix}_config", taken)
        select_function = _unique(f"{prefix}_select", taken)
        feature_function = _unique(f"{prefix}_float32_feature", taken)
        input_enums = [_enum_names(p, prefix, taken) for p in inputs]
        output_enums = [_enum_names(p, prefix, taken) for p in design]
        leaf_functions = tuple(
            _unique(f"{prefix}_{sanitize(name)}_leaf", taken) for name in tree_names
        )
        outputs = _output_names(prefix, design, output_enums, taken)
        # Allocated after every name above, so that those do not depend on them.
        validity = _validity_names(prefix, design, taken)
        branch_functions = tuple(f"{name}_branches" for name in leaf_functions)
        branch_functions = tuple(_unique(name, taken) for name in branch_functions)
        ranked_function = _unique(f"{prefix}_ranked", taken)
        input_names, local_names = _argument_names(inputs, input_enums, taken)
        return cls(
            prefix=prefix,
            guard=guard,
            hd_macro=hd_macro,
            config_type=config_type,
            select_function=select_function,
            feature_function=feature_function,
            inputs=input_names,
            leaf_functions=leaf_functions,
            outputs=outputs,
            locals=local_names,
            validity=validity,
            branch_functions=branch_functions,
            ranked_function=ranked_function,
        )

    def all_file_scope(self) -> Iterable[str]:
        """Every file-scope identifier (for collision checks by callers)."""
        yield from (self.guard, self.hd_macro, self.config_type, self.select_function)
        yield self.feature_function
        yield from self.leaf_functions
        yield from self.branch_functions
        if self.ranked_function:
            yield self.ranked_function
        enums: list[InputNames | OutputNames] = [*self.inputs, *self.outputs]
        for names in enums:
            if names.enum_type is not None:
                yield names.enum_type
            yield from names.enum_constants
        for output in self.outputs:
            yield output.value_function
        validity = self.validity
        yield from (validity.tree_select, validity.is_valid, validity.satisfies)
        yield from (validity.fallback, validity.pymod, validity.fmin, validity.fmax)
        yield from validity.code_functions
        yield from (*validity.value_of_code, *validity.candidate_functions)


_EnumNames = tuple[str | None, tuple[str, ...]]


def _enum_names(parameter: Parameter, prefix: str, taken: set[str]) -> _EnumNames:
    """The enum type and constants of a categorical parameter (``None, ()`` otherwise),
    recorded in ``taken``."""
    if parameter.kind != "categorical":
        return None, ()
    upper = prefix.upper()
    base = sanitize(parameter.name)
    type_name = _unique(f"{prefix}_{base}_t", taken)
    constants = tuple(
        _unique(f"{upper}_{base.upper()}_{sanitize(str(value)).upper()}", taken)
        for value in parameter.domain_values().tolist()
    )
    return type_name, constants


def _output_names(
    prefix: str, design: Sequence[Parameter], enums: Sequence[_EnumNames], taken: set[str]
) -> tuple[OutputNames, ...]:
    """Names of each design parameter: its value function (file scope, recorded in ``taken``)
    and its struct field (unique among the fields only)."""
    value_functions = [_unique(f"{prefix}_{sanitize(p.name)}_value", taken) for p in design]
    fields: set[str] = set()
    return tuple(
        OutputNames(
            field=_unique(standalone_identifier(p.name), fields),
            value_function=value_functions[i],
            enum_type=enums[i][0],
            enum_constants=enums[i][1],
        )
        for i, p in enumerate(design)
    )


def _validity_names(prefix: str, design: Sequence[Parameter], taken: set[str]) -> ValidityNames:
    """Names of the run-time validity functions, recorded in ``taken``."""

    def per_design(suffix: str) -> tuple[str, ...]:
        return tuple(_unique(f"{prefix}_{sanitize(p.name)}_{suffix}", taken) for p in design)

    return ValidityNames(
        tree_select=_unique(f"{prefix}_tree_select", taken),
        is_valid=_unique(f"{prefix}_is_valid", taken),
        satisfies=_unique(f"{prefix}_satisfies", taken),
        fallback=_unique(f"{prefix}_fallback", taken),
        pymod=_unique(f"{prefix}_pymod", taken),
        fmin=_unique(f"{prefix}_fmin", taken),
        fmax=_unique(f"{prefix}_fmax", taken),
        code_functions=per_design("code"),
        value_of_code=per_design("value_of_code"),
        candidate_functions=per_design("candidate"),
    )


def _argument_names(
    inputs: Sequence[Parameter], enums: Sequence[_EnumNames], taken: set[str]
) -> tuple[tuple[InputNames, ...], tuple[str, str, str]]:
    """Names of each input (select argument, enum) and the select function's locals (config,
    features, leaf). Arguments and locals must not shadow any file-scope name the body refers
    to, so they avoid ``taken`` without being recorded there."""
    scope = set(taken)
    input_names = tuple(
        InputNames(
            argument=_unique(standalone_identifier(p.name), scope),
            enum_type=enums[i][0],
            enum_constants=enums[i][1],
        )
        for i, p in enumerate(inputs)
    )
    local_names = (_unique("config", scope), _unique("x", scope), _unique("leaf", scope))
    return input_names, local_names
