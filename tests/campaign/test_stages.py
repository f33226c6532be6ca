"""Each stage of a campaign built from its settings section and run alone, in this process,
with a fake executor (a Python function measured in-process): no campaign directory, no
manifest, no worker process."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mlkaps_gpu.campaign import (
    CampaignError,
    CodegenStage,
    ConfirmationStage,
    DecisionStage,
    ModelingStage,
    OptimizationStage,
    SampleStore,
    SamplingStage,
    StageContext,
    TrainingSamples,
)
from mlkaps_gpu.executors import Executor
from mlkaps_gpu.optimize import OptimizationSettings
from mlkaps_gpu.sampling import SAMPLERS, Sampler, SamplerParts, SamplingSettings
from mlkaps_gpu.space import Parameter, Space
from mlkaps_gpu.surrogate import LightGBMSurrogate, SurrogateSettings
from mlkaps_gpu.trees import TreesSettings

SPACE = Space(
    [Parameter("n", "int", low=64, high=512)],
    [
        Parameter("block", "int", values=(4, 8, 16, 32, 64)),
        Parameter("variant", "categorical", values=("a", "b")),
    ],
    [],
)


class FunctionExecutor(Executor):
    """``time = 1 + (block - n / 8)**2 / n (+ 0.5 for variant b)``, computed in this process;
    ``fail`` makes every row a runtime error."""

    def __init__(self, *, fail: bool = False) -> None:
        self.fail = fail
        self.measured = 0

    def _run(self, rows: pd.DataFrame) -> pd.DataFrame:
        self.measured += len(rows)
        if self.fail:
            return pd.DataFrame({"status": ["runtime_error"] * len(rows), "message": "boom"})
        return pd.DataFrame({"time": true_time(rows), "status": "ok"})


def true_time(rows: pd.DataFrame) -> np.ndarray:
    n = rows["n"].to_numpy(dtype=float)
    block = rows["block"].to_numpy(dtype=float)
    return 1.0 + (block - n / 8) ** 2 / n + 0.5 * (rows["variant"].to_numpy() == "b")


def context(folder: Path, executor: Executor | None = None) -> StageContext:
    folder.mkdir(parents=True, exist_ok=True)
    return StageContext(
        directory=folder,
        space=SPACE,
        sampling_space=SPACE,
        objectives=["time"],
        directions=["minimize"],
        seed=0,
        store=SampleStore(folder / "samples.sqlite", SPACE, ["time"]),
        executor=executor or FunctionExecutor(),
    )


def sample(ctx: StageContext, budget: int, method: str = "lhs") -> dict:
    settings = SamplingSettings(method=method, budget=budget, batch_size=10)
    sampler = Sampler.from_settings(settings, ctx.sampling_space, SamplerParts(seed=ctx.seed))
    return SamplingStage.from_settings(settings, ctx, sampler).run()


def training(ctx: StageContext) -> TrainingSamples:
    return TrainingSamples(ctx.store, ctx.space, ctx.objectives, [])


def fitted_models(ctx: StageContext) -> list[LightGBMSurrogate]:
    ModelingStage.from_settings(SurrogateSettings(n_estimators=50), ctx, training(ctx)).run()
    return [LightGBMSurrogate.load(str(ctx.directory / "models" / "time.txt"), log_target=True)]


def decisions(ctx: StageContext) -> DecisionStage:
    return DecisionStage.from_settings(
        TreesSettings(max_depth=3), ctx, surrogate=SurrogateSettings(), training=training(ctx)
    )


def optima_of(ctx: StageContext) -> pd.DataFrame:
    stage = OptimizationStage.from_settings(
        OptimizationSettings(grid=4, method="exhaustive"), ctx, decisions=decisions(ctx)
    )
    stage.run(fitted_models(ctx), SPACE.grid(4))
    return pd.read_csv(ctx.directory / "optima.csv")


def test_every_registered_sampler_is_built_from_its_settings() -> None:
    parts = SamplerParts(seed=3, budget=20)
    for name, kind in SAMPLERS.items():
        sampler = Sampler.from_settings(SamplingSettings(method=name), SPACE, parts)
        assert type(sampler) is kind and sampler.seed == 3
        assert SPACE.is_valid(sampler.ask(4)).all()


def test_sampling_stage_spends_the_budget_and_resumes_as_if_uninterrupted(
    tmp_path: Path,
) -> None:
    stored: list[int] = []
    whole = context(tmp_path / "whole")
    details = SamplingStage.from_settings(
        SamplingSettings(method="lhs", budget=40, batch_size=10),
        whole,
        Sampler.from_settings(SamplingSettings(method="lhs"), SPACE),
        on_stored=lambda: stored.append(len(whole.store)),
    ).run()
    assert details["samples"] == 40 and details["status"] == {"ok": 40}
    assert stored == [10, 20, 30, 40]

    executor = FunctionExecutor()
    split = context(tmp_path / "split", executor)
    sample(split, 30)
    assert sample(split, 40)["samples"] == 40
    assert executor.measured == 40  # the second run measured only the 10 left
    columns = [*SPACE.names, "time"]
    pd.testing.assert_frame_equal(split.store.load()[columns], whole.store.load()[columns])


def test_sampling_stage_stops_a_run_whose_first_measurements_all_fail(tmp_path: Path) -> None:
    ctx = context(tmp_path, FunctionExecutor(fail=True))
    settings = SamplingSettings(method="random", budget=50, batch_size=5, stop_after_failures=10)
    stage = SamplingStage.from_settings(settings, ctx, Sampler.from_settings(settings, SPACE))
    with pytest.raises(CampaignError, match="first 10 measurements of this run all failed"):
        stage.run()
    assert len(ctx.store) == 10  # the failed rows stay stored


def test_modeling_stage_saves_one_model_that_ranks_like_the_kernel(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    sample(ctx, 60)
    stage = ModelingStage.from_settings(SurrogateSettings(n_estimators=50), ctx, training(ctx))
    details = stage.run()
    assert details == {"trained_on": 60, "transferred": 0, "log_target": {"time": True}}
    model = LightGBMSurrogate.load(str(tmp_path / "models" / "time.txt"), log_target=True)
    rows = pd.DataFrame({"n": [256, 256], "block": [32, 4], "variant": ["a", "b"]})
    good, bad = model.predict(SPACE.features(rows))
    assert good < bad


def test_modeling_stage_refuses_to_learn_from_fewer_than_two_measurements(
    tmp_path: Path,
) -> None:
    ctx = context(tmp_path)
    sample(ctx, 1)
    with pytest.raises(CampaignError, match="only 1 successful measurements"):
        ModelingStage.from_settings(SurrogateSettings(), ctx, training(ctx)).run()


def test_optimization_stage_writes_the_models_best_configuration_per_grid_point(
    tmp_path: Path,
) -> None:
    ctx = context(tmp_path)
    sample(ctx, 60)
    models = fitted_models(ctx)
    stage = OptimizationStage.from_settings(OptimizationSettings(grid=4, method="exhaustive"), ctx)
    details = stage.run(models, SPACE.grid(4))
    assert details["grid_points"] == 4 and details["method"] == "exhaustive"
    optima = pd.read_csv(tmp_path / "optima.csv")
    assert set(optima["source"]) == {"surrogate"}
    # exhaustive: at each point, no configuration is predicted better than the one written
    for point in optima.to_dict("records"):
        every = SPACE.assemble(
            pd.DataFrame({"n": [point["n"]] * 10}),
            SPACE.valid_design_codes({"n": point["n"]}),
        )
        best = models[0].predict(SPACE.features(every)).min()
        chosen = pd.DataFrame([{name: point[name] for name in SPACE.names}])
        assert models[0].predict(SPACE.features(chosen))[0] == pytest.approx(best)


def test_decision_stage_ships_a_measured_configuration_the_measurements_prefer(
    tmp_path: Path,
) -> None:
    ctx = context(tmp_path)
    sample(ctx, 60)
    grid = SPACE.grid(4)
    # measure every configuration at the grid's points: the evidence knows the best there
    every = pd.concat(
        [
            SPACE.assemble(grid.iloc[[i] * 10], SPACE.valid_design_codes(grid.iloc[i].to_dict()))
            for i in range(len(grid))
        ],
        ignore_index=True,
    )
    ctx.store.append(every, ctx.executor.run(every))
    stage = decisions(ctx)
    optima = grid.assign(block=64, variant="b", n_valid=10, predicted_time=1.0)
    decided = stage.run(optima)
    assert (decided.optima["source"] == "measured").all()
    best = every.assign(time=true_time(every)).sort_values("time").drop_duplicates("n")
    merged = decided.optima.merge(best, on="n", suffixes=("", "_best"))
    assert (merged["block"] == merged["block_best"]).all()
    assert (merged["variant"] == merged["variant_best"]).all()
    answers = stage.answers(decided.fitted.selector, decided.optima)
    assert SPACE.is_valid(answers).all()
    pd.testing.assert_frame_equal(answers, decided.optima[SPACE.names], check_dtype=False)


def test_decision_stage_fits_its_evidence_again_only_once_measurements_were_added(
    tmp_path: Path,
) -> None:
    ctx = context(tmp_path)
    sample(ctx, 40)
    stage = decisions(ctx)
    first = stage.evidence_score()
    assert stage.evidence_score() is first  # the optimization stage's, read by the trees'
    rows = SPACE.assemble(SPACE.grid(2), np.array([[0, 0], [1, 1]]))
    ctx.store.append(rows, ctx.executor.run(rows))
    again = stage.evidence_score()
    assert again is not first
    assert len(again.evidence.table) > len(first.evidence.table)


def test_confirmation_stage_measures_the_answers_within_the_budget(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    sample(ctx, 40)
    optima = optima_of(ctx)
    stored = len(ctx.store)
    stage = ConfirmationStage(ctx, decisions(ctx), budget=stored + 6, batch_size=3)
    optima, fitted, details = stage.run(optima)
    assert stored < len(ctx.store) <= stored + 6
    spent = details["confirmation"]
    assert spent["measured_answers"] + spent["measured_neighbours"] == len(ctx.store) - stored
    assert details["measured_regret"]["points"] == 4
    written = pd.read_csv(tmp_path / "optima.csv")
    assert {"header_measured_time", "header_measured_regret"} <= set(written.columns)


@pytest.mark.compiler
def test_codegen_stage_writes_a_header_verified_against_the_trees(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    sample(ctx, 40)
    optima = optima_of(ctx)
    fitted = decisions(ctx).run(optima, surrogate=fitted_models(ctx)[0]).fitted
    stage = CodegenStage.from_settings(
        TreesSettings(prefix="toy", verify_inputs=50), tmp_path, seed=0
    )
    details = stage.run(fitted, {"campaign": "stages"})
    assert details["header"] == "toy.h" and details["mismatches"] == 0
    assert "stages" in (tmp_path / "toy.h").read_text()
    verification = json.loads((tmp_path / "verification.json").read_text())
    assert verification["verified_inputs"] == details["verified_inputs"] > 0
    assert (tmp_path / "selector.json").is_file()
