"""``report``: one self-contained HTML page with an inline PNG per figure."""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from mlkaps_gpu.campaign import Campaign
from mlkaps_gpu.cli._main import main
from mlkaps_gpu.validation import _report
from mlkaps_gpu.validation._expert import FixedConfiguration
from mlkaps_gpu.validation._merge import merge, write_merge
from mlkaps_gpu.validation._validate import validate, write_validation
from tests.toy import PNG, stub_rendering

from .paired import REFERENCE, copied_campaign, kernel_on_path


@pytest.fixture(scope="module")
def campaign(paired_tuned: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Campaign]:
    folder = tmp_path_factory.mktemp("report")
    for _ in kernel_on_path(folder):
        yield copied_campaign(paired_tuned, folder)


def images(text: str) -> list[bytes]:
    sources = re.findall(r'<img alt="[^"]*" src="data:image/png;base64,([^"]+)">', text)
    return [base64.b64decode(source) for source in sources]


def test_report_of_a_tuned_campaign_has_an_inline_png_per_figure(
    campaign: Campaign, quick_png: None
) -> None:
    text, figures = _report.build_report(campaign.directory, folds=2)
    assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>")
    pictures = images(text)
    # what ships, best-so-far, importance, parallel coordinates, samples over time,
    # accuracy, optimum maps, depth sweep
    assert len(pictures) == text.count("<img") == len(figures) == 8
    assert all(picture.startswith(PNG) for picture in pictures)
    for section in (
        "What ships, what it gains, how sure it is",
        "The search",
        "Configuration",
        "Samples over time",
        "Surrogate accuracy",
        "Optimum maps",
    ):
        assert f"<h2>{section}</h2>" in text
    assert "MAPE (%)" in text and "<h2>Validation</h2>" not in text
    # the header in a collapsible block, escaped
    assert "<details><summary>toy.h (" in text and "toy_select" in text
    assert "#include &lt;" in text or "#ifndef" in text
    assert 'src="http' not in text and "<script" not in text  # self-contained


def test_page_template_escapes_every_text() -> None:
    import importlib.resources

    import pandas as pd

    template = importlib.resources.files("mlkaps_gpu.validation") / "templates/report.html.j2"
    assert template.is_file()  # shipped as package data
    page = _report._Page()
    page.paragraph("a < b & c", "note")
    page.heading("<h>")
    page.table({"<k>": "<v>", "x": 0.123456})
    page.table(pd.DataFrame({"<c>": ["<x>", 1.23456]}))
    page.figure(PNG, 'say "hi" <now>')
    page.code("#include <math.h>", "<s>")
    text = page.render("<title>")
    for raw in ("<h>", "<k>", "<v>", "<c>", "<x>", "<s>", "<now>", "<math.h>", "<title><"):
        assert raw not in text
    assert '<p class="note">a &lt; b &amp; c</p>' in text
    assert "<h1>&lt;title&gt;</h1>" in text and "<h2>&lt;h&gt;</h2>" in text
    assert "<th>&lt;k&gt;</th><td>&lt;v&gt;</td>" in text and "<td>0.1235</td>" in text
    assert (
        "<th>&lt;c&gt;</th>" in text and "<td>&lt;x&gt;</td>" in text and "<td>1.235</td>" in text
    )
    assert images(text) == [PNG] and page.figures == ['say "hi" <now>']
    assert (
        "<details><summary>&lt;s&gt;</summary><pre>#include &lt;math.h&gt;</pre></details>" in text
    )


def test_report_shows_validation_and_merge_figures(campaign: Campaign, tmp_path: Path) -> None:
    expert = FixedConfiguration(campaign.space, REFERENCE)
    before = validate(campaign, expert, sizes={"n": 6}, repeats=5)
    result = merge(campaign, expert, before=before)
    with pytest.MonkeyPatch.context() as patch:
        stub_rendering(patch)  # the validation / merge figures are rendered in their own tests
        write_validation(before, campaign.directory / "validation", campaign.space)
        write_merge(result, campaign.directory / "merge", campaign.space)

    out = tmp_path / "report.html"
    assert main(["report", str(campaign.directory), "--out", str(out), "--folds", "2"]) == 0
    text = out.read_text(encoding="utf-8")
    pictures = images(text)
    # 8 campaign figures + validation (map, histogram) + merge before / after (2 each)
    assert len(pictures) == text.count("<img") == 14
    assert all(picture.startswith(PNG) for picture in pictures)
    assert sum(len(picture) > 1000 for picture in pictures) == 8  # the report's own, rendered
    for caption in (
        "validation: speedup map",
        "merge, before: speedup histogram",
        "merge, after: speedup map",
    ):
        assert f'alt="{caption}"' in text
    assert "<h2>Validation</h2>" in text and "<h2>Merge with the expert</h2>" in text
    assert "toy_merged.h (" in text and "before merge" in text and "after merge" in text


def test_speedup_map_of_two_inputs_is_a_heat_map_centred_on_one() -> None:
    import io

    import matplotlib.image
    import numpy as np
    import pandas as pd

    from mlkaps_gpu.analysis._plots import speedup_map

    m, n = np.meshgrid([64, 128, 256, 512], [64, 128, 256, 512], indexing="ij")
    speedup = np.where(m > n, 2.0, np.where(m < n, 0.5, 1.0)).ravel()
    points = pd.DataFrame({"m": m.ravel(), "n": n.ravel(), "speedup": speedup})
    points["verdict"] = np.where(speedup > 1, "progression", "neutral")
    points.loc[points["speedup"] < 1, "verdict"] = "regression"
    png = speedup_map(points, ["m", "n"], ["m", "n"], title="t", noise=0.05)
    assert png is not None and png.startswith(PNG)
    image = matplotlib.image.imread(io.BytesIO(png))
    colours = image[..., :3].reshape(-1, 3)
    # the diverging map: red (slowdown), blue (speedup) and white (1.0) cells all appear
    assert np.any((colours[:, 0] > 0.6) & (colours[:, 2] < 0.3))
    assert np.any((colours[:, 2] > 0.5) & (colours[:, 0] < 0.3))
    assert np.any(np.all(colours > 0.95, axis=1))


def test_report_shows_the_headers_answers_against_the_best_measured(
    campaign: Campaign, quick_png: None
) -> None:
    text, _ = _report.build_report(campaign.directory, folds=2)
    assert "<h2>The header&#39;s answers against the best measured</h2>" in text
    assert "<th>measured regret (%)</th>" in text
    assert "<th>best measured: time</th>" in text
    assert "<th>per_point</th>" not in text  # a table, not a cell of raw JSON
    assert "<th>measured_regret</th>" not in text  # said once, in its own section
    # after the tree's section, which keeps the header's text
    assert text.index("<h2>Decision tree</h2>") < text.index("<summary>toy.h (")
    assert text.index("<summary>toy.h (") < text.index("answers against the best measured</h2>")


def test_measured_regret_table_lists_the_worst_point_first() -> None:
    per_point = [
        {
            "gpu": "a",
            "best_measured_time": 1.0,
            "header_measured_time": 1.0,
            "header_measured_regret": 0.0,
        },
        {
            "gpu": "b",
            "best_measured_time": 2.0,
            "header_measured_time": 2.5,
            "header_measured_regret": 0.25,
        },
        {
            "gpu": "c",
            "best_measured_time": 3.0,
            "header_measured_time": None,
            "header_measured_regret": None,
        },
    ]
    table = _report.measured_regret_table(per_point, "time")
    assert list(table.columns) == [
        "gpu",
        "header's answer: time",
        "best measured: time",
        "measured regret (%)",
    ]
    assert list(table["gpu"]) == ["b", "a", "c"]
    assert table["measured regret (%)"].iloc[0] == pytest.approx(25.0)


def test_failed_answers_are_said_as_a_warning() -> None:
    summary = {"points": 2, "known": 1, "mean": 0.0, "max": 0.0, "above_1_percent": 0}
    quiet = _report._Page()
    _report._measured_regret(quiet, {"measured_regret": summary | {"failed": 0}}, "time")
    assert "failed every time" not in quiet.render("r")
    page = _report._Page()
    _report._measured_regret(page, {"measured_regret": summary | {"failed": 1}}, "time")
    text = page.render("r")
    assert re.search(r'class="warning"[^>]*>At 1 grid point\(s\) the header', text)
