"""PyTorch's shipped AutoHeuristic trees as a peer, read without torch and never executed.

PyTorch ships the decision trees it learnt from the AutoHeuristic data as generated Python
files (``torch/_inductor/autoheuristic/artifacts/_MixedMMA100.py`` and the like): a class
derived from ``LearnedHeuristicDecision`` whose ``fill_choices`` appends the choice strings,
whose ``check_precondition`` names the kernel and the GPU (shared memory, compute capability),
and whose ``get_best_choices`` is a nest of ``if``/``else`` on ``context.get_value(feature)``
returning a ranked list of ``(probability, choice index)`` or ``None`` (unsure).

:func:`read_learned_tree` parses such a file with :mod:`ast` and accepts only what the
generator writes (anything else is an error naming the file and line); :func:`tree_answers`
evaluates the tree at every input point of a :class:`~benchkit.inputs_truth.Truth`. The
features it splits on are the data's columns or PyTorch's augmented ones: products and
quotients of columns named by their formula (``m*n``, ``k/(m*n)``), ``arith_intensity``
(``m k n / (m k + k n + m n)``) and the size buckets ``{lo}LEQ{dim}LEQ{hi}``.

What Inductor does with the tree's answer (``LearnedHeuristicDecision.get_decision``): the top
choice where its probability is above the confidence threshold and the choice is one of the
shape's listed choices; otherwise the heuristic's fallback. The peer is scored both ways the
fallback goes: Inductor's default without autotuning, or autotuning at that shape (every listed
choice measured there: its optimum, at the cost of those cells).
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from benchkit.inputs_truth import Truth

_BUCKET = re.compile(r"^(\d+)LEQ(\w+)LEQ(\d+)$")
_NUMERIC_OPS: dict[type, Callable[[object, object], object]] = {
    ast.LtE: operator.le,
    ast.Lt: operator.lt,
    ast.GtE: operator.ge,
    ast.Gt: operator.gt,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}
_ARITHMETIC: dict[type, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    ast.Mult: np.multiply,
    ast.Div: np.divide,
    ast.Add: np.add,
    ast.Sub: np.subtract,
}


@dataclass(frozen=True)
class Leaf:
    """A return: the ranked ``(probability, choice index)`` list, or None (unsure)."""

    ranked: tuple[tuple[float, int], ...] | None


@dataclass(frozen=True)
class Split:
    """``feature OP value`` (numeric, or on ``str(feature)`` where ``as_text``)."""

    feature: str
    op: type
    value: float | str
    as_text: bool
    then: Leaf | Split
    otherwise: Leaf | Split


@dataclass(frozen=True)
class LearnedTree:
    """One shipped heuristic: its kernel name, GPU, confidence threshold, choices and tree."""

    path: Path
    class_name: str
    name: str
    shared_memory: int | None
    device_capa: tuple[int, ...] | None
    threshold: float
    choices: tuple[str, ...]
    root: Leaf | Split

    def matches(self, meta: dict) -> bool:
        """Whether the data's metadata (its JSON first line) is this heuristic's kernel and
        GPU (``check_precondition``'s name, shared memory and compute capability)."""
        if meta.get("name") != self.name:
            return False
        if self.shared_memory is not None and meta.get("shared_memory") != self.shared_memory:
            return False
        capability = meta.get("device_capa")
        return self.device_capa is None or (
            capability is not None and tuple(capability) == self.device_capa
        )

    def features(self) -> list[str]:
        """The features the tree splits on, in the order first met."""
        found: list[str] = []
        stack: list[Leaf | Split] = [self.root]
        while stack:
            node = stack.pop()
            if isinstance(node, Split):
                if node.feature not in found:
                    found.append(node.feature)
                stack.extend([node.otherwise, node.then])
        return found

    def describe(self) -> str:
        gpu = f"compute capability {self.device_capa}" if self.device_capa else "any GPU"
        return f"`{self.path.name}` ({self.name}, {gpu})"


class TreeFileError(ValueError):
    """A file that is not an AutoHeuristic-generated decision heuristic, or uses a construct
    the generator does not write."""


def read_learned_tree(path: Path) -> LearnedTree:
    """Parse a PyTorch AutoHeuristic ``LearnedHeuristicDecision`` file (never imported or run).

    Raises:
        TreeFileError: which file and line, and what was expected there.
    """
    path = Path(path)
    try:
        module = ast.parse(path.read_text(), filename=str(path))
    except (OSError, SyntaxError, UnicodeDecodeError) as error:
        raise TreeFileError(f"{path}: cannot be read as Python source: {error}") from error
    classes = [
        node
        for node in module.body
        if isinstance(node, ast.ClassDef)
        and any(_name_of(base) == "LearnedHeuristicDecision" for base in node.bases)
    ]
    if len(classes) != 1:
        raise TreeFileError(
            f"{path}: expected one class derived from LearnedHeuristicDecision (a file "
            f"generated by PyTorch's AutoHeuristic), found {len(classes)}"
        )
    cls = classes[0]
    methods = {node.name: node for node in cls.body if isinstance(node, ast.FunctionDef)}
    for needed in ("fill_choices", "get_name", "get_best_choices"):
        if needed not in methods:
            raise TreeFileError(f"{path}: class {cls.name} has no method {needed}")
    name = _returned_constant(path, methods["get_name"], str)
    threshold = (
        float(_returned_constant(path, methods["get_confidence_threshold"], (int, float)))
        if "get_confidence_threshold" in methods
        else 0.0
    )
    shared_memory, device_capa = (
        _precondition(path, methods["check_precondition"])
        if "check_precondition" in methods
        else (None, None)
    )
    return LearnedTree(
        path=path,
        class_name=cls.name,
        name=name,
        shared_memory=shared_memory,
        device_capa=device_capa,
        threshold=threshold,
        choices=_choices(path, methods["fill_choices"]),
        root=_body(path, methods["get_best_choices"].body),
    )


def tree_answers(
    tree: LearnedTree, truth: Truth, fallback: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """The truth's configuration index Inductor runs at each input point with this tree, and
    whether the tree was sure there (its top choice above the threshold and listed at the
    point). Where it was not, the answer is ``fallback`` (one index per point; -1 where
    ``fallback`` is None: the caller decides what unsure costs)."""
    n = truth.n_points
    top = np.full(n, -1, dtype=np.int64)
    inputs = truth.inputs.reset_index(drop=True)
    cache: dict[str, pd.Series] = {}
    for feature in tree.features():  # every feature first: one the data cannot give is an error
        try:
            cache[feature] = feature_values(feature, inputs)
        except TreeFileError as error:
            raise TreeFileError(f"{tree.path}: {error}") from None
    _walk(tree, tree.root, inputs, np.arange(n), top, cache)
    where = {label: i for i, label in enumerate(truth.labels)}
    index = np.array(
        [where.get(tree.choices[c], -1) if 0 <= c < len(tree.choices) else -1 for c in top],
        dtype=np.int64,
    )
    sure = index >= 0
    # NaN: not among the point's listed choices (Inductor cannot run it there)
    sure[sure] = ~np.isnan(truth.times[np.flatnonzero(sure), index[sure]])
    chosen = np.where(sure, index, -1 if fallback is None else fallback)
    return chosen.astype(np.int64), sure


def feature_values(name: str, inputs: pd.DataFrame) -> pd.Series:
    """A feature of the tree at every row of ``inputs``: a column, a size bucket
    ``{lo}LEQ{dim}LEQ{hi}``, ``arith_intensity`` or a formula of columns (``m*n``)."""
    if name in inputs.columns:
        return inputs[name]
    bucket = _BUCKET.match(name)
    if bucket and bucket.group(2) in inputs.columns:
        values = inputs[bucket.group(2)].astype(np.float64)
        return (values >= int(bucket.group(1))) & (values <= int(bucket.group(3)))
    if name == "arith_intensity" and {"m", "k", "n"} <= set(inputs.columns):
        m, k, n = (inputs[c].astype(np.float64) for c in ("m", "k", "n"))
        denominator = m * k + k * n + m * n
        return (m * k * n / denominator.where(denominator != 0, np.nan)).fillna(0.0)
    try:
        formula = ast.parse(name, mode="eval").body
    except SyntaxError:
        formula = None
    if formula is not None:
        return pd.Series(_formula(name, formula, inputs), index=inputs.index)
    raise TreeFileError(
        f"feature {name!r}: not a column of the data ({', '.join(inputs.columns)}), a size "
        "bucket, arith_intensity or a formula of columns"
    )


# ----------------------------------------------------------------------------- internals
def _walk(
    tree: LearnedTree,
    node: Leaf | Split,
    inputs: pd.DataFrame,
    rows: np.ndarray,
    top: np.ndarray,
    cache: dict[str, pd.Series],
) -> None:
    if len(rows) == 0:
        return
    if isinstance(node, Leaf):
        if node.ranked:
            probability, choice = node.ranked[0]
            if probability > tree.threshold:
                top[rows] = choice
        return
    if node.feature not in cache:
        cache[node.feature] = feature_values(node.feature, inputs)
    values = cache[node.feature].iloc[rows]
    compare = _NUMERIC_OPS[node.op]
    if node.as_text:
        mask = np.array([bool(compare(str(v), node.value)) for v in values], dtype=bool)
    else:
        mask = np.asarray(compare(values.astype(np.float64).to_numpy(), node.value), dtype=bool)
    _walk(tree, node.then, inputs, rows[mask], top, cache)
    _walk(tree, node.otherwise, inputs, rows[~mask], top, cache)


def _formula(name: str, node: ast.expr, inputs: pd.DataFrame) -> np.ndarray:
    if isinstance(node, ast.Name):
        if node.id not in inputs.columns:
            raise TreeFileError(f"feature {name!r}: {node.id!r} is not a column of the data")
        return inputs[node.id].astype(np.float64).to_numpy()
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return np.full(len(inputs), float(node.value))
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        with np.errstate(divide="ignore", invalid="ignore"):
            return _ARITHMETIC[type(node.op)](
                _formula(name, node.left, inputs), _formula(name, node.right, inputs)
            )
    raise TreeFileError(
        f"feature {name!r}: only columns, numbers and + - * / make a formula feature"
    )


def _string_argument(node: ast.expr, method: str) -> str | None:
    """``s`` where ``node`` is ``something.method('s')``, else None."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == method
        and len(node.args) == 1
        and not node.keywords
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        return node.args[0].value
    return None


def _name_of(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _returned_constant(path: Path, method: ast.FunctionDef, kind: type | tuple) -> object:
    returns = [s for s in method.body if isinstance(s, ast.Return)]
    if (
        len(returns) != 1
        or not isinstance(returns[0].value, ast.Constant)
        or not isinstance(returns[0].value.value, kind)
    ):
        raise TreeFileError(f"{path}: line {method.lineno}: {method.name} must return one constant")
    return returns[0].value.value


def _precondition(path: Path, method: ast.FunctionDef) -> tuple[int | None, tuple[int, ...] | None]:
    """The shared memory and compute capability ``check_precondition`` compares with."""
    shared_memory: int | None = None
    device_capa: tuple[int, ...] | None = None
    for node in ast.walk(method):
        if not (isinstance(node, ast.Compare) and len(node.ops) == 1):
            continue
        right = node.comparators[0]
        if not isinstance(right, ast.Constant):
            continue
        left = node.left
        inner = left.args[0] if isinstance(left, ast.Call) and left.args else left
        field = inner.attr if isinstance(inner, ast.Attribute) else ""
        if field == "shared_memory" and isinstance(right.value, int):
            shared_memory = right.value
        elif field == "device_capa" and isinstance(right.value, str):
            numbers = re.findall(r"\d+", right.value)
            if not numbers:
                raise TreeFileError(
                    f"{path}: line {node.lineno}: device_capa compared with {right.value!r}"
                )
            device_capa = tuple(int(x) for x in numbers)
    return shared_memory, device_capa


def _choices(path: Path, method: ast.FunctionDef) -> tuple[str, ...]:
    """The strings ``fill_choices`` appends to ``self.choices``, in order."""
    found: list[str] = []
    for statement in method.body:
        choice = (
            _string_argument(statement.value, "append") if isinstance(statement, ast.Expr) else None
        )
        if choice is not None:
            found.append(choice)
        else:
            raise TreeFileError(
                f"{path}: line {statement.lineno}: fill_choices may only append choice strings"
            )
    if not found:
        raise TreeFileError(f"{path}: fill_choices appends no choice")
    return tuple(found)


def _body(path: Path, body: list[ast.stmt]) -> Leaf | Split:
    """A block of ``get_best_choices``: one ``if``/``else`` or one ``return``."""
    statements = [s for s in body if not (isinstance(s, ast.Expr) and _is_docstring(s))]
    if len(statements) != 1:
        line = statements[1].lineno if len(statements) > 1 else "?"
        raise TreeFileError(
            f"{path}: line {line}: each block of get_best_choices must be one if/else or one return"
        )
    statement = statements[0]
    if isinstance(statement, ast.Return):
        return _leaf(path, statement)
    if isinstance(statement, ast.If) and statement.orelse:
        feature, op, value, as_text = _test(path, statement.test)
        return Split(
            feature,
            op,
            value,
            as_text,
            _body(path, statement.body),
            _body(path, statement.orelse),
        )
    raise TreeFileError(
        f"{path}: line {statement.lineno}: expected if/else or return in get_best_choices"
    )


def _is_docstring(statement: ast.Expr) -> bool:
    return isinstance(statement.value, ast.Constant) and isinstance(statement.value.value, str)


def _leaf(path: Path, statement: ast.Return) -> Leaf:
    value = statement.value
    if value is None or (isinstance(value, ast.Constant) and value.value is None):
        return Leaf(None)
    if not isinstance(value, ast.List):
        raise TreeFileError(
            f"{path}: line {statement.lineno}: a return must be None or a list of "
            "(probability, choice index)"
        )
    ranked = []
    for item in value.elts:
        if not (
            isinstance(item, ast.Tuple)
            and len(item.elts) == 2
            and all(isinstance(e, ast.Constant) for e in item.elts)
        ):
            raise TreeFileError(f"{path}: line {item.lineno}: expected (probability, choice index)")
        probability, choice = (e.value for e in item.elts)  # type: ignore[attr-defined]
        if not isinstance(probability, int | float) or not isinstance(choice, int):
            raise TreeFileError(f"{path}: line {item.lineno}: expected (probability, choice index)")
        ranked.append((float(probability), int(choice)))
    return Leaf(tuple(ranked))


def _test(path: Path, test: ast.expr) -> tuple[str, type, float | str, bool]:
    """``context.get_value('f') <= 3.5`` or ``str(context.get_value('f')) != 'True'``."""
    if not (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and type(test.ops[0]) in _NUMERIC_OPS
        and isinstance(test.comparators[0], ast.Constant)
    ):
        raise TreeFileError(f"{path}: line {test.lineno}: expected a comparison with a constant")
    left, op, right = test.left, type(test.ops[0]), test.comparators[0].value
    as_text = (
        isinstance(left, ast.Call)
        and isinstance(left.func, ast.Name)
        and left.func.id == "str"
        and len(left.args) == 1
    )
    if as_text:
        left = left.args[0]  # type: ignore[union-attr]
    feature = _string_argument(left, "get_value")
    if feature is None:
        raise TreeFileError(
            f"{path}: line {test.lineno}: expected context.get_value('feature') in a test"
        )
    if as_text and not (isinstance(right, str) and op in (ast.Eq, ast.NotEq)):
        raise TreeFileError(f"{path}: line {test.lineno}: str(...) is compared with == or !=")
    if not as_text and not isinstance(right, int | float):
        raise TreeFileError(f"{path}: line {test.lineno}: a number is compared with a number")
    return feature, op, right if as_text else float(right), as_text


__all__ = [
    "LearnedTree",
    "Leaf",
    "Split",
    "TreeFileError",
    "feature_values",
    "read_learned_tree",
    "tree_answers",
]
