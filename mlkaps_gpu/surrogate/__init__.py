"""Surrogate models of the objectives: LightGBM (the campaign's model) and the Gaussian process
that the Bayesian sampler and the Bayesian search strategy share."""

from mlkaps_gpu.surrogate._base import Surrogate
from mlkaps_gpu.surrogate._ensemble import DEFAULT_MEMBERS, BootstrapEnsemble
from mlkaps_gpu.surrogate._failures import FAILURE_LIMIT, FailureClassifier
from mlkaps_gpu.surrogate._gaussian_process import (
    ACQUISITIONS,
    Acquisition,
    CandidateGaussianProcess,
    acquisition_values,
    propose,
    standardised_acquisition,
)
from mlkaps_gpu.surrogate._lightgbm import DEFAULT_PARAMS, LightGBMSurrogate, accuracy
from mlkaps_gpu.surrogate._settings import (
    MAX_N_ESTIMATORS,
    SurrogateSettings,
    check_lightgbm_params,
)

__all__ = [
    "FAILURE_LIMIT",
    "MAX_N_ESTIMATORS",
    "SurrogateSettings",
    "check_lightgbm_params",
    "ACQUISITIONS",
    "Acquisition",
    "DEFAULT_MEMBERS",
    "DEFAULT_PARAMS",
    "BootstrapEnsemble",
    "CandidateGaussianProcess",
    "FailureClassifier",
    "LightGBMSurrogate",
    "Surrogate",
    "accuracy",
    "acquisition_values",
    "propose",
    "standardised_acquisition",
]
