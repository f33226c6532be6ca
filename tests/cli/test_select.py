"""``mlkaps-gpu select``: answers from the campaign directory alone, light, and in batches."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from mlkaps_gpu.campaign import Campaign, CampaignError
from mlkaps_gpu.cli import main
from tests.toy import ToyCampaigns

HEAVY = ("lightgbm", "sklearn", "scipy", "pymoo", "pandas")
INPUTS = (16, 37, 100, 900, 4096)

pytestmark = pytest.mark.compiler


@pytest.fixture
def campaign_dir(toy_campaign: ToyCampaigns, tmp_path: Path) -> Path:
    """A copy of the session's toy campaign (budget 60), tuned by ``mlkaps-gpu tune``."""
    return toy_campaign.copy(tmp_path / "campaign", budget=60)


def _select(out: Path, *arguments: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["select", str(out), *arguments]) == 0
    return capsys.readouterr().out


def _expected(out: Path) -> list[dict[str, object]]:
    selector = Campaign.open(out).load_selector()
    table = selector.select(pd.DataFrame({"n": list(INPUTS)}))
    return [{"block": int(r.block), "variant": r.variant} for r in table.itertuples()]


def test_answers_survive_a_config_whose_kernel_is_gone(
    campaign_dir: Path,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    expected = _expected(campaign_dir)
    first = [json.loads(_select(campaign_dir, f"n={n}", capsys=capsys)) for n in INPUTS]
    assert first == expected
    assert not list(campaign_dir.rglob("*.so"))  # compiled into the user's cache only
    # the kernel (as replay data files would) moves away: the configuration no longer validates
    config = campaign_dir / "config.toml"
    config.write_text(config.read_text().replace("toy_kernel:model", "gone_module:model"))
    # the finished campaign is still read from its directory alone; measuring says what it needs
    reading = Campaign.open(campaign_dir)
    assert reading.load_selector().select(pd.DataFrame({"n": [100]})).shape == (1, 2)
    with pytest.raises(CampaignError, match="gone_module"):
        reading.setup.executor.run(pd.DataFrame({"n": [100], "block": [8], "variant": ["fast"]}))
    again = [json.loads(_select(campaign_dir, f"n={n}", capsys=capsys)) for n in INPUTS]
    assert again == expected
    # an empty user cache: the module is rebuilt from the directory alone
    monkeypatch.setenv("MLKAPS_GPU_CACHE", str(tmp_path / "fresh-cache"))
    rebuilt = [json.loads(_select(campaign_dir, f"n={n}", capsys=capsys)) for n in INPUTS]
    assert rebuilt == expected


def test_csv_batch_answers_every_row(
    campaign_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = tmp_path / "inputs.csv"
    table.write_text("n\n" + "\n".join(str(n) for n in INPUTS) + "\n")
    lines = _select(campaign_dir, "--csv", str(table), capsys=capsys).splitlines()
    assert lines[0] == "n,block,variant"
    expected = _expected(campaign_dir)
    assert lines[1:] == [
        f"{n},{e['block']},{e['variant']}" for n, e in zip(INPUTS, expected, strict=True)
    ]
    table.write_text("n\n100\nabc\n")
    assert main(["select", str(campaign_dir), "--csv", str(table)]) == 2
    assert "expected a int value" in capsys.readouterr().err
    assert main(["select", str(campaign_dir), "--csv", str(tmp_path / "missing.csv")]) == 2
    assert main(["select", str(campaign_dir), "n=3", "--csv", str(table)]) == 2
    assert "not both" in capsys.readouterr().err


def test_ranked_lists_the_headers_ranking_best_first(
    campaign_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = Campaign.open(campaign_dir).load_selector().model_
    assert model.ranking is not None
    codes, counts = model.ranked_codes(pd.DataFrame({"n": list(INPUTS)}))
    design = list(model.design)

    def answer(row: list[int]) -> dict[str, object]:
        values = [p.domain_values()[c] for p, c in zip(design, row, strict=True)]
        return {
            p.name: v.item() if hasattr(v, "item") else v
            for p, v in zip(design, values, strict=True)
        }

    expected = [[answer(codes[i, j]) for j in range(counts[i])] for i in range(len(INPUTS))]
    got = [json.loads(_select(campaign_dir, f"n={n}", "--ranked", capsys=capsys)) for n in INPUTS]
    assert got == expected
    assert [ranked[0] for ranked in got] == _expected(campaign_dir)  # select's answer first
    table = tmp_path / "inputs.csv"
    table.write_text("n\n" + "\n".join(str(n) for n in INPUTS) + "\n")
    lines = _select(campaign_dir, "--csv", str(table), "--ranked", capsys=capsys).splitlines()
    assert lines[0] == "n,rank,block,variant"
    assert lines[1:] == [
        f"{n},{rank},{a['block']},{a['variant']}"
        for n, answers in zip(INPUTS, expected, strict=True)
        for rank, a in enumerate(answers, start=1)
    ]


def test_ranked_says_when_the_header_ranks_nothing(
    campaign_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlkaps_gpu.cli._select import HeaderFunction

    load = HeaderFunction.load.__func__  # type: ignore[attr-defined]

    def unranked(cls, campaign):  # as the header of per-parameter trees: no ranked function
        loaded = load(cls, campaign)
        return cls(loaded.module, loaded.function, loaded.inputs, loaded.design, None)

    monkeypatch.setattr(HeaderFunction, "load", classmethod(unranked))
    assert main(["select", str(campaign_dir), "n=100", "--ranked"]) == 2
    assert "ranks no configurations" in capsys.readouterr().err
    assert main(["select", str(campaign_dir), "n=100"]) == 0  # the first answer still


def test_a_reader_that_stops_early_ends_select_quietly(
    campaign_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _select(campaign_dir, "n=100", capsys=capsys)  # compiled once, outside the pipe
    table = tmp_path / "inputs.csv"
    table.write_text("n\n" + "\n".join(str(16 + n % 4000) for n in range(200_000)) + "\n")
    run_main = "import sys; from mlkaps_gpu.cli import main; sys.exit(main())"
    command = [sys.executable, "-c", run_main, "select", str(campaign_dir)]
    with subprocess.Popen(
        [*command, "--csv", str(table), "--ranked"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as process:
        assert process.stdout is not None and process.stderr is not None
        assert process.stdout.readline().startswith(b"n,rank,")
        process.stdout.close()  # as `| head -1` does
        error = process.stderr.read().decode()
        status = process.wait(timeout=120)
    assert status == 141, error
    assert "Traceback" not in error and "Broken pipe" not in error


def test_unfinished_or_foreign_directories_are_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["select", str(tmp_path), "n=3"]) == 2
    assert "not a campaign directory" in capsys.readouterr().err
    manifest = {"config_sha256": "0" * 64, "stages": ["sampling"]}
    (tmp_path / "campaign.json").write_text(json.dumps(manifest))
    assert main(["select", str(tmp_path), "n=3"]) == 2
    assert "run tune" in capsys.readouterr().err


def _modules_after(arguments: list[str]) -> set[str]:
    code = (
        "import sys\n"
        "from mlkaps_gpu.cli import main\n"
        "try:\n"
        f"    main({arguments!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    return set(json.loads(result.stdout.strip().splitlines()[-1].replace("'", '"')))


def test_select_help_and_version_import_no_heavy_library(
    campaign_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _select(campaign_dir, "n=100", capsys=capsys)  # builds the manifest
    assert _modules_after(["select", str(campaign_dir), "n=100"]) == set()
    assert _modules_after(["--help"]) == set()
    assert _modules_after(["--version"]) == set()
    assert _modules_after(["select", "--help"]) == set()
    # a module command still gets its full parser when it is the one named
    with pytest.raises(SystemExit) as stop:
        main(["report", "--help"])
    assert stop.value.code == 0
    assert "report.html" in capsys.readouterr().out
