"""Names a campaign may give its parameters, objectives and header prefix.

One rule set for every name that ends up in a generated C / CUDA header or as a column of the
campaign store, checked when the configuration is loaded (:func:`check_identifier`,
:func:`check_distinct`) and by the header writer for its prefix, so that no name is refused by
the C compiler or by SQLite after the measurements were taken. A name must be

* ASCII: ``[A-Za-z][A-Za-z0-9_]*``, at most :data:`MAX_IDENTIFIER_LENGTH` characters, without
  ``__`` (reserved in C++) and not starting with ``_`` (reserved at file scope in C);
* none of :data:`RESERVED_C_NAMES`: C / C++ keywords, ``<math.h>`` functions (with their
  ``f`` / ``l`` variants), macros and types of the standard headers a program commonly includes
  (``NAN``, ``FP_NAN``, ``EOF``, ``NULL``, ``INT_MAX``, ``size_t`` ...), CUDA built-ins
  (``blockDim`` ...) and ``main``;
* distinct from the other names and from the store's own columns, ignoring case (SQLite column
  names ignore case) and after NFKC folding (Unicode look-alikes).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection, Iterable

from mlkaps_gpu.space._parameters import SpaceError

#: Longest name accepted (C99 guarantees 63 significant initial characters of an identifier).
MAX_IDENTIFIER_LENGTH = 63

_IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


def _words(*lines: str) -> frozenset[str]:
    return frozenset(word for line in lines for word in line.split())


_KEYWORDS = _words(
    # C89 ... C23
    "auto break case char const continue default do double else enum extern float for goto if",
    "inline int long register restrict return short signed sizeof static struct switch typedef",
    "union unsigned void volatile while _Alignas _Alignof _Atomic _Bool _Complex _Generic",
    "_Imaginary _Noreturn _Static_assert _Thread_local _BitInt _Decimal32 _Decimal64",
    "_Decimal128 alignas alignof bool constexpr false nullptr static_assert thread_local true",
    "typeof typeof_unqual",
    # C++17 / C++20 and the alternative operator spellings
    "and and_eq asm bitand bitor catch char8_t char16_t char32_t class compl concept consteval",
    "constinit const_cast co_await co_return co_yield decltype delete dynamic_cast explicit",
    "export friend mutable namespace new noexcept not not_eq operator or or_eq private",
    "protected public reinterpret_cast requires static_cast template this throw try typeid",
    "typename using virtual wchar_t xor xor_eq",
)

_MATH_BASE = _words(
    "acos asin atan atan2 cos sin tan acosh asinh atanh cosh sinh tanh exp exp2 expm1 frexp",
    "ilogb ldexp log log10 log1p log2 logb modf scalbn scalbln cbrt fabs hypot pow sqrt erf",
    "erfc lgamma tgamma ceil floor nearbyint rint lrint llrint round lround llround trunc fmod",
    "remainder remquo copysign nan nextafter nexttoward fdim fmax fmin fma",
)
_MATH_FUNCTIONS = (
    _MATH_BASE
    | frozenset(f"{name}f" for name in _MATH_BASE)
    | frozenset(f"{name}l" for name in _MATH_BASE)
    # POSIX and glibc additions to <math.h>
    | _words("j0 j1 jn y0 y1 yn gamma signgam drem finite scalb significand exp10 pow10")
    | _words("sincos lgamma_r isinff isnanf")
)

_MACROS = _words(
    # <math.h>
    "NAN INFINITY HUGE_VAL HUGE_VALF HUGE_VALL FP_NAN FP_INFINITE FP_ZERO FP_SUBNORMAL",
    "FP_NORMAL FP_FAST_FMA FP_FAST_FMAF FP_FAST_FMAL FP_ILOGB0 FP_ILOGBNAN MATH_ERRNO",
    "MATH_ERREXCEPT math_errhandling fpclassify isfinite isinf isnan isnormal signbit",
    "isgreater isgreaterequal isless islessequal islessgreater isunordered float_t double_t",
    "M_E M_LOG2E M_LOG10E M_LN2 M_LN10 M_PI M_PI_2 M_PI_4 M_1_PI M_2_PI M_2_SQRTPI M_SQRT2",
    "M_SQRT1_2",
    # <stdio.h>, <stdlib.h>, <stddef.h>, <errno.h>, <assert.h>, <complex.h>, <stdbool.h>
    "EOF NULL BUFSIZ FILENAME_MAX FOPEN_MAX L_tmpnam SEEK_CUR SEEK_END SEEK_SET TMP_MAX",
    "stdin stdout stderr FILE EXIT_SUCCESS EXIT_FAILURE RAND_MAX MB_CUR_MAX offsetof size_t",
    "ptrdiff_t max_align_t errno EDOM ERANGE EILSEQ assert NDEBUG complex imaginary I",
    # <limits.h>, <float.h>, <stdint.h>
    "CHAR_BIT SCHAR_MIN SCHAR_MAX UCHAR_MAX CHAR_MIN CHAR_MAX MB_LEN_MAX SHRT_MIN SHRT_MAX",
    "USHRT_MAX INT_MIN INT_MAX UINT_MAX LONG_MIN LONG_MAX ULONG_MAX LLONG_MIN LLONG_MAX",
    "ULLONG_MAX FLT_MAX FLT_MIN FLT_EPSILON FLT_DIG DBL_MAX DBL_MIN DBL_EPSILON DBL_DIG",
    "LDBL_MAX LDBL_MIN LDBL_EPSILON DECIMAL_DIG FLT_RADIX FLT_ROUNDS FLT_EVAL_METHOD",
    "int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t intptr_t uintptr_t",
    "intmax_t uintmax_t INT8_MAX INT16_MAX INT32_MAX INT64_MAX INT8_MIN INT16_MIN INT32_MIN",
    "INT64_MIN UINT8_MAX UINT16_MAX UINT32_MAX UINT64_MAX SIZE_MAX INTMAX_MAX UINTMAX_MAX",
    # CUDA built-ins
    "threadIdx blockIdx blockDim gridDim warpSize dim3",
)

#: Every name refused, with what it is (for the error message).
RESERVED_C_NAMES: dict[str, str] = {
    **{name: "a C <math.h> function" for name in _MATH_FUNCTIONS},
    **{name: "a C standard-library macro, type or object, or a CUDA built-in" for name in _MACROS},
    **{name: "a C / C++ keyword" for name in _KEYWORDS},
    "main": "the C program entry point",
}


class IdentifierError(SpaceError):
    """A name cannot be used in generated C or as a store column."""


def _fold(name: str) -> str:
    return unicodedata.normalize("NFKC", name).casefold()


def check_identifier(name: object, *, what: str = "name", columns: Collection[str] = ()) -> str:
    """Return ``name`` if it may name a parameter (or a header prefix, an objective).

    Args:
        name: the candidate.
        what: what the name names, for the message (``"header prefix"``...).
        columns: other column names it must differ from, ignoring case (the store's own).

    Raises:
        IdentifierError: the name breaks one of the rules of the module docstring; the message
            says which and what is allowed.
    """
    allowed = "ASCII letters, digits and '_', starting with a letter, e.g. 'block_size'"
    if not isinstance(name, str) or not name:
        raise IdentifierError(f"{what} {name!r} is not a C identifier: use {allowed}")
    if not name.isascii():
        folded = unicodedata.normalize("NFKC", name)
        hint = f" (NFKC reads it as {folded!r})" if folded != name else ""
        raise IdentifierError(f"{what} {name!r} has non-ASCII characters{hint}: use {allowed}")
    if name.startswith("_"):
        raise IdentifierError(
            f"{what} {name!r} starts with '_' (reserved for the C implementation): use {allowed}"
        )
    if not _IDENTIFIER.fullmatch(name):
        raise IdentifierError(f"{what} {name!r} is not a C identifier: use {allowed}")
    if "__" in name:
        raise IdentifierError(f"{what} {name!r} contains '__' (reserved in C++): use single '_'")
    if len(name) > MAX_IDENTIFIER_LENGTH:
        raise IdentifierError(
            f"{what} {name!r} has {len(name)} characters: at most {MAX_IDENTIFIER_LENGTH}"
        )
    if name in RESERVED_C_NAMES:
        raise IdentifierError(
            f"{what} {name!r} is {RESERVED_C_NAMES[name]} and would break the generated header;"
            " choose another name"
        )
    clash = [column for column in columns if _fold(column) == _fold(name)]
    if clash:
        raise IdentifierError(
            f"{what} {name!r} is the campaign store's own column {clash[0]!r} (ignoring case);"
            " choose another name"
        )
    return name


def check_distinct(names: Iterable[str], *, what: str = "names") -> None:
    """Refuse two names equal up to case or NFKC folding (one SQLite column, one C look-alike).

    Raises:
        IdentifierError: naming both names.
    """
    seen: dict[str, str] = {}
    for name in names:
        key = _fold(name)
        if key in seen:
            other = seen[key]
            how = "are the same name" if other == name else "differ only in case or NFKC form"
            raise IdentifierError(
                f"{what} {other!r} and {name!r} {how} (store columns ignore case); rename one"
            )
        seen[key] = name


_TRIGRAPH = re.compile(r"\?\?[=/'()!<>\-]")


def check_c_text(text: str, *, what: str = "text") -> str:
    """Return ``text`` if it may appear in a C string literal or comment: no trigraph
    (``??/`` and the like, which C99 compilers replace) and no control character.

    Raises:
        IdentifierError: naming the offending sequence.
    """
    match = _TRIGRAPH.search(text)
    if match:
        raise IdentifierError(
            f"{what} {text!r} contains the trigraph {match.group(0)!r}, which C compilers "
            "replace; write the two '?' apart"
        )
    if any(unicodedata.category(c) == "Cc" for c in text):
        raise IdentifierError(f"{what} {text!r} contains a control character")
    return text


__all__ = [
    "MAX_IDENTIFIER_LENGTH",
    "RESERVED_C_NAMES",
    "IdentifierError",
    "check_c_text",
    "check_distinct",
    "check_identifier",
]
