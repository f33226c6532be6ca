"""The ``[surrogate]`` section: the LightGBM model of each objective.

``params`` are LightGBM parameters, checked when the configuration is loaded rather than after
the measurements: each name must be one of the installed LightGBM's parameters or aliases (its own
list, ``LGBM_DumpParamAliases``), not one the tool sets itself, not given twice under two aliases;
the values of the common ones are checked here, and the whole set is then given to LightGBM once
on a tiny data set so that LightGBM's own checks run too.
"""

from __future__ import annotations

import contextlib
import functools
import io
import math
import os
import re
import sys
from collections.abc import Callable, Iterator
from typing import Any

from pydantic import Field, field_validator

from mlkaps_gpu.space import INT64_MAX, INT64_MIN, SettingError, SettingsModel

#: Most boosting rounds (``n_estimators``).
MAX_N_ESTIMATORS = 100_000

#: LightGBM parameters the surrogate sets itself, and what to use instead.
RESERVED_PARAMS: dict[str, str] = {
    "num_iterations": "use [surrogate] n_estimators",
    "seed": "LightGBM is seeded by [campaign] seed",
    "num_threads": "the surrogate chooses its threads (one below 20,000 rows)",
    "categorical_feature": "categorical parameters are declared to LightGBM by the tool",
    "early_stopping_round": "the surrogate has no validation set to stop on",
}
#: Command-line, file and network parameters of LightGBM, meaningless for the surrogate.
_NOT_FOR_THE_SURROGATE = (
    "task data valid input_model output_model output_result convert_model "
    "convert_model_language label_column weight_column group_column ignore_column header "
    "save_binary two_round snapshot_freq machines num_machines local_listen_port "
    "machine_list_filename time_out pre_partition initscore_filename valid_data_initscores "
    "forcedsplits_filename forcedbins_filename start_iteration_predict num_iteration_predict "
    "predict_raw_score predict_leaf_index predict_contrib predict_disable_shape_check "
    "pred_early_stop pred_early_stop_freq pred_early_stop_margin precise_float_parser "
    "parser_config_file saved_feature_importance_type"
).split()
#: LightGBM objectives of a regression (the surrogate predicts a number).
REGRESSION_OBJECTIVES = (
    "regression regression_l2 l2 mean_squared_error mse l2_root root_mean_squared_error rmse "
    "regression_l1 l1 mean_absolute_error mae huber fair poisson quantile mape "
    "mean_absolute_percentage_error gamma tweedie"
).split()
_BOOSTING = ("gbdt", "gbrt", "dart", "rf", "random_forest")


def _integer(low: int, high: int) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            return f"must be an integer from {low} to {high}"
        return None

    return check


def _number(low: float, high: float, *, open_low: bool = False) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        ok = ok and math.isfinite(value) and (value > low if open_low else value >= low)
        if not ok or value > high:
            bound = "above" if open_low else "from"
            return f"must be a finite number {bound} {low:g} to {high:g}"
        return None

    return check


def _one_of(choices: tuple[str, ...] | list[str]) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if value not in choices:
            return "must be one of " + ", ".join(f'"{c}"' for c in choices)
        return None

    return check


def _boolean(value: Any) -> str | None:
    return None if isinstance(value, bool) else "must be true or false"


#: Value checks of the common parameters (by canonical name).
VALUE_RULES: dict[str, Callable[[Any], str | None]] = {
    "objective": _one_of(REGRESSION_OBJECTIVES),
    "boosting": _one_of(_BOOSTING),
    "learning_rate": _number(0.0, 1.0, open_low=True),
    "num_leaves": _integer(2, 131_072),
    "max_depth": _integer(-1, 64),
    "min_data_in_leaf": _integer(0, 2**31 - 1),
    "min_sum_hessian_in_leaf": _number(0.0, 1e300),
    "feature_fraction": _number(0.0, 1.0, open_low=True),
    "bagging_fraction": _number(0.0, 1.0, open_low=True),
    "bagging_freq": _integer(0, 2**31 - 1),
    "lambda_l1": _number(0.0, 1e300),
    "lambda_l2": _number(0.0, 1e300),
    "max_bin": _integer(2, 1_000_000),
    "min_data_in_bin": _integer(1, 2**31 - 1),
    "min_data_per_group": _integer(1, 2**31 - 1),
    "cat_smooth": _number(0.0, 1e300),
    "cat_l2": _number(0.0, 1e300),
    "verbosity": _integer(-1, 3),
    "deterministic": _boolean,
    "force_col_wise": _boolean,
    "force_row_wise": _boolean,
    "linear_tree": _boolean,
}


@functools.cache
def lightgbm_aliases() -> dict[str, str]:
    """Every parameter name of the installed LightGBM (canonical names and their aliases),
    mapped to its canonical name, from LightGBM's own list."""
    from lightgbm.basic import _ConfigAliases

    table = _ConfigAliases._get_all_param_aliases()
    return {alias: name for name, aliases in table.items() for alias in aliases}


def _plain_value(value: Any) -> bool:
    if isinstance(value, list):
        return all(_plain_value(v) and not isinstance(v, list) for v in value)
    if isinstance(value, bool) or isinstance(value, str):
        return True
    if isinstance(value, int):
        return INT64_MIN <= value <= INT64_MAX
    return isinstance(value, float) and math.isfinite(value)


def check_lightgbm_params(params: dict[str, Any]) -> None:
    """Check LightGBM parameter names and values (see the module docstring).

    Raises:
        SettingError: naming the parameter (``params.<name>``), its value and what is allowed.
    """
    aliases = lightgbm_aliases()
    canonical: dict[str, str] = {}
    for name, value in params.items():
        key = f"params.{name}"
        if name not in aliases:
            raise SettingError(
                key,
                "not a LightGBM parameter (see the LightGBM parameter list; aliases are allowed)",
                value,
            )
        main = aliases[name]
        if main in canonical:
            raise SettingError(key, f"sets '{main}' again (also given as '{canonical[main]}')")
        canonical[main] = name
        if main in RESERVED_PARAMS:
            raise SettingError(key, f"set by the tool: {RESERVED_PARAMS[main]}", value)
        if main in _NOT_FOR_THE_SURROGATE:
            raise SettingError(key, "a file, command-line or network parameter of LightGBM", value)
        if not _plain_value(value):
            raise SettingError(
                key,
                "must be a string, a boolean, a finite number, an int64 integer or a list of them",
                value,
            )
        rule = VALUE_RULES.get(main)
        problem = rule(value) if rule is not None else None
        if problem:
            raise SettingError(key, problem, value)
    if params:
        _ask_lightgbm(params)


def _ask_lightgbm(params: dict[str, Any]) -> None:
    """Let LightGBM parse ``params`` (with the surrogate's defaults) on a tiny data set."""
    import lightgbm as lgb
    import numpy as np

    from mlkaps_gpu.surrogate._lightgbm import DEFAULT_PARAMS

    features = np.arange(16, dtype=np.float64).reshape(8, 2)
    merged = {**DEFAULT_PARAMS, **params, "num_threads": 1}
    try:
        with _quiet_output():
            data = lgb.Dataset(features, label=features[:, 0] + 1.0, params=merged)
            lgb.Booster(params=merged, train_set=data)
    except lgb.basic.LightGBMError as error:
        message = re.sub(r"\s+at \S+, line \d+\s*\.?", "", str(error)).strip()
        raise SettingError("params", f"refused by LightGBM: {message}", params) from None


@contextlib.contextmanager
def _quiet_output() -> Iterator[None]:
    """Silence LightGBM's own messages (written by its C++ code to the process's stdout)."""
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no file descriptor 1 (embedded interpreters)
        with contextlib.redirect_stdout(io.StringIO()):
            yield
        return
    try:
        with open(os.devnull, "w") as sink, contextlib.redirect_stdout(io.StringIO()):
            os.dup2(sink.fileno(), 1)
            try:
                yield
            finally:
                _flush_c_streams()
    finally:
        os.dup2(saved, 1)
        os.close(saved)


_libc: list[Any] = []


def _flush_c_streams() -> None:
    """``fflush(NULL)`` of the C library, called through cffi's ABI mode (the C library of
    the process, opened once); nothing where it cannot be opened."""
    try:
        if not _libc:
            import cffi

            ffi = cffi.FFI()
            ffi.cdef("int fflush(void *stream);")
            _libc.append((ffi, ffi.dlopen(None)))
        ffi, libc = _libc[0]
        libc.fflush(ffi.NULL)
    except (OSError, AttributeError, ImportError):  # pragma: no cover - no C library
        pass


class SurrogateSettings(SettingsModel):
    """``[surrogate]``: one LightGBM regressor per objective."""

    n_estimators: int = Field(
        default=300,
        ge=1,
        le=MAX_N_ESTIMATORS,
        description="Boosting rounds of each LightGBM model.",
    )
    log_target: bool = Field(
        default=True,
        description=(
            "Learn log(objective): for positive objectives spanning orders of magnitude (run "
            "times); an objective with a value <= 0 is learnt as it is."
        ),
    )
    input_baseline: bool = Field(
        default=True,
        description=(
            "The decisions' and the sampler's ensemble first fits a smooth model of the "
            "objective on the inputs (a ridge regression on the logs of positive numeric "
            "inputs, their squares and pairwise products, one-hot categorical ones) and its "
            "trees learn what that leaves: the configurations' effects, not the inputs' orders "
            "of magnitude (decisions 0036, 0037). Only where an input is numeric: categorical "
            "inputs alone are left to the trees."
        ),
    )
    params: dict[str, Any] = Field(
        default_factory=dict,
        description=(
            "Extra LightGBM parameters over the defaults of the surrogate and of the members "
            'of the ensemble that decides (`objective = "l2"`, `learning_rate = 0.05`, '
            "`num_leaves = 31`, ...): names from LightGBM's parameter "
            "list or their aliases, except those the tool sets (`num_iterations`, `seed`, "
            "`num_threads`, `categorical_feature`, `early_stopping_round`) and file or network "
            "parameters; values checked by LightGBM at load."
        ),
        json_schema_extra={"allowed": "a table of LightGBM parameters {name = value}"},
    )

    @field_validator("params")
    @classmethod
    def _lightgbm_params(cls, params: dict[str, Any]) -> dict[str, Any]:
        check_lightgbm_params(params)
        return params


__all__ = [
    "MAX_N_ESTIMATORS",
    "REGRESSION_OBJECTIVES",
    "RESERVED_PARAMS",
    "SurrogateSettings",
    "check_lightgbm_params",
    "lightgbm_aliases",
]
