"""Sampling on Dask workers: same store as a sequential run, worker deaths lose nothing."""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from mlkaps_gpu.campaign import Campaign, ConfigError, load_config
from mlkaps_gpu.campaign._distributed import asks_ahead, connect
from mlkaps_gpu.campaign._setup import prepare
from mlkaps_gpu.executors import OK, RUNTIME_ERROR, ExecutionSettings
from mlkaps_gpu.sampling import GAAdaptiveSampler, LHSSampler, RandomSampler
from mlkaps_gpu.testing import write_config

distributed = pytest.importorskip("distributed")

DIST_KERNEL = """
import os
import signal
import time
from pathlib import Path

from toy_kernel import model


def slow_model(row):
    folder = os.environ.get("MLKAPS_TEST_PIDS")
    if folder:
        (Path(folder) / str(os.getppid())).touch()  # the Dask worker: the kernel runs in its child
    time.sleep(0.05)
    return model(row)


def poison_model(row):
    if os.environ.get("MLKAPS_TEST_POISON") == f"{row['n']},{row['block']},{row['variant']}":
        os.kill(os.getppid(), signal.SIGKILL)  # the Dask worker: the kernel runs in its child
    return model(row)
"""


def _config(
    folder: Path,
    name: str,
    *,
    method: str = "lhs",
    budget: int = 120,
    batch: int = 20,
    function: str = "toy_kernel:model",
    execution: str = "",
) -> Path:
    (folder / "dist_kernel.py").write_text(DIST_KERNEL)
    path = write_config(folder, method=method, budget=budget, batch=batch, name=name)
    text = path.read_text().replace("toy_kernel:model", function)
    path.write_text(text + ("\n[execution]\n" + execution if execution else ""))
    return path


def _sample(config: Path, out: Path) -> pd.DataFrame:
    campaign = Campaign.create_or_resume(load_config(config), out)
    campaign.sample()
    return campaign.store.load().drop(columns=["timestamp"])


def _sampling_share(out: Path) -> int:
    """What the sampling stage measures: the budget less the confirmation's reserve."""
    with Campaign.open(out) as campaign:
        return campaign.sampling_budget


def _stored(out: Path) -> int:
    try:
        with sqlite3.connect(out / "samples.sqlite", timeout=5) as connection:
            return int(connection.execute("SELECT COUNT(*) FROM samples").fetchone()[0])
    except sqlite3.OperationalError:
        return 0


def _keys(table: pd.DataFrame) -> list[tuple[Any, ...]]:
    return list(zip(table["n"], table["block"], table["variant"], strict=True))


@pytest.fixture(scope="module")
def scheduler() -> Iterator[str]:
    """An already running scheduler with two in-process workers (cheap to start)."""
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, protocol="tcp", dashboard_address=":0"
    )
    yield cluster.scheduler_address
    cluster.close()


def test_local_cluster_with_two_workers_stores_what_a_sequential_run_stores(
    kernel_path: Path, tmp_path: Path
) -> None:
    sequential = _sample(_config(kernel_path, "seq.toml"), tmp_path / "sequential")
    config = _config(kernel_path, "dask.toml", execution='backend = "dask"\nworkers = 2\n')
    with pytest.warns(RuntimeWarning, match="disturb each other's timings"):
        distributed_store = _sample(config, tmp_path / "dask")
    assert distributed_store.equals(sequential)
    assert (distributed_store["status"] == OK).all()


@pytest.mark.parametrize("method", ["ga_adaptive", "random"])
def test_campaign_on_a_scheduler_address_matches_sequential(
    method: str, scheduler: str, kernel_path: Path, tmp_path: Path
) -> None:
    sequential = _sample(_config(kernel_path, "seq.toml", method=method), tmp_path / "seq")
    execution = f'backend = "dask"\nscheduler = "{scheduler}"\nworkers = 2\nin_flight = 2\n'
    config = _config(kernel_path, "dask.toml", method=method, execution=execution)
    assert load_config(config).execution.scheduler == scheduler
    distributed_store = _sample(config, tmp_path / "dask")
    assert distributed_store.equals(sequential)
    # the campaign closed its client, never the cluster it did not start
    with distributed.Client(scheduler) as client:
        assert len(client.nthreads()) == 2


class _Stop(Exception):
    pass


def test_interrupted_distributed_campaign_resumes_like_a_sequential_one(
    scheduler: str, kernel_path: Path, tmp_path: Path
) -> None:
    sequential = _sample(_config(kernel_path, "seq.toml", batch=10), tmp_path / "seq")
    execution = f'backend = "dask"\nscheduler = "{scheduler}"\nworkers = 2\nin_flight = 3\n'
    config = _config(kernel_path, "dask.toml", batch=10, execution=execution)
    out = tmp_path / "dask"

    def stop(stage: str, done: int, budget: int) -> None:
        if done >= 40:
            raise _Stop

    with pytest.raises(_Stop):
        Campaign.create_or_resume(load_config(config), out).sample(stop)
    interrupted = Campaign.open(out).store.load().drop(columns=["timestamp"])
    assert len(interrupted) == 40  # whole batches, asked-ahead ones were dropped
    assert interrupted.equals(sequential.iloc[:40])
    resumed = _sample(config, out)
    assert resumed.equals(sequential)


def test_asks_ahead_only_for_samplers_that_ignore_results(kernel_path: Path) -> None:
    space = prepare(load_config(_config(kernel_path, "toy.toml"))).space
    assert asks_ahead(LHSSampler(space)) and asks_ahead(RandomSampler(space))
    assert not asks_ahead(GAAdaptiveSampler(space, budget=10))

    class Declared(RandomSampler):
        asks_depend_on_results = True

    class Subclassed(LHSSampler):
        pass

    assert not asks_ahead(Declared(space))
    assert not asks_ahead(Subclassed(space))  # unknown: the safe, sequential order


def test_cluster_configuration_errors() -> None:
    with pytest.raises(ConfigError, match="worker_gpus: must list one device per worker"):
        with connect(ExecutionSettings(backend="dask", workers=2, options={"worker_gpus": [0]})):
            pass
    try:
        import dask_jobqueue  # noqa: F401
    except ImportError:
        with pytest.raises(ConfigError, match="needs dask-jobqueue"):
            with connect(ExecutionSettings(backend="dask", cluster="slurm")):
                pass


def test_worker_gpus_give_each_worker_its_own_device() -> None:
    execution = ExecutionSettings(backend="dask", workers=2, options={"worker_gpus": [1, 0]})
    with connect(execution) as (client, workers):
        assert workers == 2
        devices = client.run(lambda: os.environ.get("CUDA_VISIBLE_DEVICES"))
        threads = client.nthreads()
    assert sorted(devices.values()) == ["0", "1"]
    assert set(threads.values()) == {1}


@pytest.mark.slow
def test_killing_a_worker_mid_campaign_loses_and_duplicates_nothing(
    kernel_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    budget, batch = 200, 10
    pids = tmp_path / "pids"
    pids.mkdir()
    monkeypatch.setenv("MLKAPS_TEST_PIDS", str(pids))
    sequential = _sample(
        _config(kernel_path, "seq.toml", budget=budget, batch=batch), tmp_path / "s"
    )
    config = _config(
        kernel_path,
        "dask.toml",
        budget=budget,
        batch=batch,
        function="dist_kernel:slow_model",
        execution='backend = "dask"\nworkers = 2\n',
    )
    out = tmp_path / "dask"
    killed: list[tuple[int, int]] = []

    def kill_one_worker() -> None:
        deadline = time.time() + 120
        while _stored(out) < 40 and time.time() < deadline:
            time.sleep(0.02)
        # the worker that touched its file last is measuring now
        newest = max(pids.iterdir(), key=lambda p: p.stat().st_mtime_ns)
        killed.append((int(newest.name), _stored(out)))
        os.kill(int(newest.name), signal.SIGKILL)

    killer = threading.Thread(target=kill_one_worker)
    killer.start()
    with pytest.warns(RuntimeWarning):
        final = _sample(config, out)
    killer.join()
    ((pid, stored_at_kill),) = killed
    share = _sampling_share(tmp_path / "s")
    assert stored_at_kill < share  # killed while the campaign was measuring
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert len(final) == share
    assert len(set(_keys(final))) == share  # nothing duplicated
    assert (final["status"] == OK).all()  # the lost task was retried, nothing failed
    assert final.equals(sequential)  # nothing lost, nothing changed


@pytest.mark.slow
def test_a_configuration_that_kills_its_worker_is_retried_once_then_stored_failed(
    kernel_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    budget, batch = 60, 10
    sequential = _sample(
        _config(kernel_path, "seq.toml", budget=budget, batch=batch), tmp_path / "s"
    )
    poison = sequential.iloc[23]
    monkeypatch.setenv("MLKAPS_TEST_POISON", f"{poison['n']},{poison['block']},{poison['variant']}")
    config = _config(
        kernel_path,
        "dask.toml",
        budget=budget,
        batch=batch,
        function="dist_kernel:poison_model",
        execution='backend = "dask"\nworkers = 2\n',
    )
    with pytest.warns(RuntimeWarning):
        final = _sample(config, tmp_path / "dask")
    assert len(final) == _sampling_share(tmp_path / "s")
    assert _keys(final) == _keys(sequential)
    failed = final["status"] == RUNTIME_ERROR
    # the batch's rows 20..29 are split in two tasks of 5 rows: the poisoned task is 20..24
    assert list(final.index[failed]) == [20, 21, 22, 23, 24]
    assert final.loc[failed, "message"].str.match(r"lost worker tcp://\S+: .*2 attempts").all()
    assert final.loc[failed, "time"].isna().all()
    ok = ~failed
    assert final.loc[ok, "time"].equals(sequential.loc[ok, "time"])
