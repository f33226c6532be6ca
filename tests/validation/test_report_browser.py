"""The report as a user opens it (issue 42): the demo's, a CSV table replay's and the replayed
GPU convolution's (needs ``$MLKAPS_GPU_DATA``) pages opened in headless Chromium (skipped
without ``/usr/bin/chromium``): no console error, every figure present and decoded, a
screenshot written; the first section read back from the HTML; no table cell holds JSON."""

from __future__ import annotations

import base64
import io
import json
import os
import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mlkaps_gpu.campaign import Campaign, load_config, parse_config
from mlkaps_gpu.cli._demo import DEMO_CONFIG, DEMO_DEFAULT
from mlkaps_gpu.validation import write_report
from mlkaps_gpu.validation._report_shipped import SHIPPED_ROWS

pytestmark = pytest.mark.integration

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)
CONVOLUTION = Path(__file__).resolve().parents[2] / "experiments/configs/convolution_replay.toml"
#: Captions (their first words) of the figures both first sections must hold.
REQUIRED = (
    "What the header ships per input value",
    "Best time measured so far",
    "Parameter importance: LightGBM gain importance",
    "The samples over the space",
)

needs_chromium = pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium")


class Cells(HTMLParser):
    """Every table cell's text, the tables by id (rows of cell texts) and the images."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.cells: list[str] = []
        self.tables: dict[str, list[list[str]]] = {}
        self.images: list[dict[str, str]] = []
        self._table: str | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = {k: v or "" for k, v in attrs}
        if tag == "table":
            self._table = named.get("id") or None
            if self._table:
                self.tables[self._table] = []
        elif tag == "tr" and self._table:
            self.tables[self._table].append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "img":
            self.images.append(named)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            text = " ".join("".join(self._cell).split())
            self.cells.append(text)
            if self._table:
                self.tables[self._table][-1].append(text)
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def parse(text: str) -> Cells:
    cells = Cells()
    cells.feed(text)
    return cells


def json_cells(text: str) -> list[str]:
    """The table cells whose text is a JSON object or array."""
    found = []
    for cell in parse(text).cells:
        if cell.startswith(("{", "[")):
            try:
                json.loads(cell)
            except ValueError:
                continue
            found.append(cell)
    return found


def chromium(page: Path, folder: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    profile = folder / f"profile{len(list(folder.glob('profile*')))}"
    return subprocess.run(
        [str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", *extra, page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def table_frame(rows: list[list[str]]) -> pd.DataFrame:
    return pd.DataFrame(rows[1:], columns=rows[0])


# ---------------------------------------------------------------------------------- campaigns
@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Campaign, Path]:
    """The demo (budget 40), its report with the speed-up over the demo's fixed default."""
    folder = tmp_path_factory.mktemp("demo")
    text = DEMO_CONFIG.replace("budget = 240", "budget = 40")
    config = parse_config(text, path=folder / "demo.toml", label="demo.toml")
    campaign = Campaign.create_or_resume(config, folder / "run")
    campaign.run()
    campaign.close()
    reference = ",".join(f"{k}={v}" for k, v in DEMO_DEFAULT.items())
    path = write_report(folder / "run", folds=2, reference=reference)
    return Campaign.open(folder / "run"), path


@pytest.fixture(scope="module")
def table_replay(tmp_path_factory: pytest.TempPathFactory) -> tuple[Campaign, Path]:
    from tests.campaign.test_table_replay import config_text, make_campaign, shapes_table

    folder = tmp_path_factory.mktemp("table")
    table = folder / "shapes.csv"
    shapes_table(n_points=100).to_csv(table, index=False)  # more shapes than the page lists
    campaign = make_campaign(folder, config_text(table, method="random", budget=150))
    campaign.run()
    campaign.close()
    return Campaign.open(folder / "run"), write_report(folder / "run", folds=2)


@pytest.fixture(scope="module")
def convolution(tmp_path_factory: pytest.TempPathFactory) -> tuple[Campaign, Path]:
    root = os.environ.get("MLKAPS_GPU_DATA")
    if not root or not (Path(root) / "convolution_6gpu").is_dir():
        pytest.skip("MLKAPS_GPU_DATA (the replay data) is not set")
    folder = tmp_path_factory.mktemp("convolution")
    campaign = Campaign.create_or_resume(load_config(CONVOLUTION), folder / "run")
    campaign.run()
    campaign.close()
    return Campaign.open(folder / "run"), write_report(folder / "run", folds=2)


CAMPAIGNS = ("demo", "table_replay", "convolution")


# ------------------------------------------------------------------------------------- tests
@needs_chromium
@pytest.mark.parametrize("name", CAMPAIGNS)
def test_report_opens_in_chromium_with_every_figure(
    name: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    from matplotlib import image

    _, page = request.getfixturevalue(name)
    text = page.read_text(encoding="utf-8")
    captions = [found["alt"] for found in parse(text).images]
    dom = chromium(page, tmp_path, "--enable-logging=stderr", "--v=0", "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    console = [line for line in dom.stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]
    assert not console, console
    shown = parse(dom.stdout).images
    assert [found["alt"] for found in shown] == captions  # every figure in the loaded page
    for required in REQUIRED:
        assert any(caption.startswith(required) for caption in captions), required
    for found in shown:
        assert found["src"].startswith("data:image/png;base64,")
        picture = image.imread(io.BytesIO(base64.b64decode(found["src"].split(",", 1)[1])))
        assert picture.shape[0] > 150 and picture.shape[1] > 300, found["alt"]
    screenshot = tmp_path / "report.png"
    shot = chromium(page, tmp_path, f"--screenshot={screenshot}", "--window-size=1280,2400")
    assert shot.returncode == 0, shot.stderr[-2000:]
    assert image.imread(screenshot).shape[:2] == (2400, 1280)


@pytest.mark.parametrize("name", CAMPAIGNS)
def test_no_table_cell_holds_json(name: str, request: pytest.FixtureRequest) -> None:
    _, page = request.getfixturevalue(name)
    text = page.read_text(encoding="utf-8")
    assert len(parse(text).cells) > 50
    assert json_cells(text) == []


def test_json_cells_finds_json() -> None:
    page = "<table><tr><td>{&quot;a&quot;: 1}</td><td>[1, 2]</td><td>{not json</td></tr></table>"
    assert json_cells(page) == ['{"a": 1}', "[1, 2]"]


def test_first_section_shows_configuration_fraction_and_speedup(
    demo: tuple[Campaign, Path],
) -> None:
    """Per input value: the header's configuration, its fraction of the best known (from
    optima.csv) and the speed-up over the demo's default, where both were measured equal to
    the ratio of the stored measurements."""
    campaign, page = demo
    tables = parse(page.read_text(encoding="utf-8")).tables
    shipped = table_frame(tables["shipped"])
    optima = campaign.load_optima()
    assert len(shipped) == len(optima)
    shipped["n"] = shipped["n"].astype(int)
    merged = shipped.merge(optima, on="n", suffixes=("", "_decided"))
    answers = campaign.load_selector().select(optima[["n"]])
    expected = pd.concat([optima[["n"]], answers], axis=1)
    check = merged.merge(expected, on="n", suffixes=("", "_header"))
    assert (check["block"].astype(int) == check["block_header"]).all()
    assert (check["order"] == check["order_header"]).all()
    fraction = check["fraction of the best known"].astype(float)
    assert np.allclose(fraction, 1 / (1 + check["header_regret"]), atol=6e-4)
    speedup = check["speed-up over reference"].str.rstrip("x").astype(float)
    assert (speedup > 0).all()
    # where the default and the answer were both measured: the ratio of the stored means
    samples = campaign.store.valid_samples()
    means = samples.groupby(["n", "block", "order"])["time"].mean()
    both = 0
    for row in check.itertuples(index=False):
        answer = (row.n, int(row.block), row.order)
        default = (row.n, DEMO_DEFAULT["block"], DEMO_DEFAULT["order"])
        if answer in means.index and default in means.index:
            both += 1
            assert float(row[check.columns.get_loc("speed-up over reference")].rstrip("x")) == (
                pytest.approx(means[default] / means[answer], abs=0.006)
            )
    configurations = table_frame(tables["configurations"])
    assert set(configurations["configuration"]) == set(shipped["configuration"])
    assert configurations["input values"].astype(int).sum() == len(optima)
    if not both:  # live timings: the campaign may measure no point at both configurations
        pytest.skip("no grid point has both the answer and the default measured")


def test_first_section_reads_the_table_replay(table_replay: tuple[Campaign, Path]) -> None:
    """Categorical and numeric inputs, no reference, more shapes than the page lists: the
    worst SHIPPED_ROWS shapes in the page, every shape in the CSV download, and a sentence
    saying how to add a reference."""
    campaign, page = table_replay
    text = page.read_text(encoding="utf-8")
    optima = campaign.load_optima()
    assert len(optima) > SHIPPED_ROWS
    shipped = table_frame(parse(text).tables["shipped"])
    assert len(shipped) == SHIPPED_ROWS
    fractions = shipped["fraction of the best known"].astype(float)
    (link,) = re.findall(r'href="data:text/csv;base64,([^"]+)" download="([^"]+)"', text)
    assert link[1] == "shipped_per_input.csv"
    every = pd.read_csv(io.StringIO(base64.b64decode(link[0]).decode("utf-8")))
    assert len(every) == len(optima) and set(every["m"]) == set(optima["m"])
    assert fractions.max() <= np.sort(every["fraction_of_best_known"])[SHIPPED_ROWS - 1] + 6e-4
    assert {"m", "n", "dtype", "configuration", "block", "warps"} <= set(shipped.columns)
    assert shipped["fraction of the best known"].astype(float).between(0, 1).all()
    assert not any(column.startswith("speed-up") for column in shipped.columns)
    assert "--reference" in text


def first_section(text: str) -> str:
    start = text.index("<h2>What ships")
    return text[start : text.index("<h2>", start + 4)]


def test_first_section_lists_each_gpu_of_the_convolution(
    convolution: tuple[Campaign, Path],
) -> None:
    campaign, page = convolution
    text = page.read_text(encoding="utf-8")
    shipped = table_frame(parse(text).tables["shipped"])
    assert sorted(shipped["gpu"]) == sorted(campaign.load_optima()["gpu"])
    assert shipped["parameters"].str.contains("block_size_x=").all()
    assert "ms" in " ".join(shipped["time"])  # Kernel Tuner's times, in milliseconds
    assert "5 of 5 answers were measured" in first_section(text)
