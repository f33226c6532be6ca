"""``mlkaps-gpu select``: answer with the configuration chosen by the compiled header.

The header of a campaign is compiled once through cffi and called with the given inputs, so the
answer is the one a library embedding the header would get. Nothing in the campaign directory is
compiled as it stands or loaded: the directory is data (see ``docs/security.md``).

The first call checks every output (``selector.json`` and ``<prefix>.h`` among them) against
the checksums the manifest recorded, rebuilds the selector from ``selector.json``, renders its
header again and requires it to be the stored header byte for byte, then compiles that text with
a small batch wrapper into the user's cache (:mod:`mlkaps_gpu.user_cache`), with a
``select-<digest>.json`` beside it: the compiled module, its function, and the type and values of
every input and design parameter, keyed by the digests of both files. Every later call checks
the checksums, finds that file in the cache, loads the module (checked there before it is
loaded) and calls it: the standard library and cffi's backend only, no executor, no data files,
no configuration validation (see :class:`~mlkaps_gpu.campaign.ReadOnlyCampaign`). ``--csv FILE``
answers every row of a table in the same call; ``--ranked`` gives each row's ranked
configurations (``<prefix>_ranked``, decision 0048).
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from mlkaps_gpu._files import write_atomically
from mlkaps_gpu.campaign import CampaignError, ReadOnlyCampaign

_C_TYPES = {"int": "long long", "float": "double", "bool": "int", "categorical": "int"}
_INTEGER = re.compile(r"\s*[+-]?\d+\s*")


def parse_assignments(assignments: Sequence[str]) -> dict[str, str]:
    """``["m=300", "n=900"]`` -> ``{"m": "300", "n": "900"}``."""
    values: dict[str, str] = {}
    for assignment in assignments:
        name, sep, value = assignment.partition("=")
        if not sep or not name:
            raise CampaignError(f"'{assignment}': expected name=value")
        values[name.strip()] = value.strip()
    return values


def select_with_header(directory: str | Path, assignments: Mapping[str, str]) -> dict[str, Any]:
    """The header's configuration for one input point, as a JSON-able dict."""
    return select_rows(directory, [assignments])[0]


def select_rows(directory: str | Path, rows: Sequence[Mapping[str, str]]) -> list[dict[str, Any]]:
    """The header's configuration for each input point (values as text), in one call."""
    campaign = ReadOnlyCampaign.open(directory)
    campaign.require("trees")
    campaign.warn_if_elsewhere()
    return HeaderFunction.load(campaign)(rows)


def select_ranked_rows(
    directory: str | Path, rows: Sequence[Mapping[str, str]]
) -> list[list[dict[str, Any]]]:
    """The header's ranked configurations (``<prefix>_ranked``) for each input point, best
    first: ``select``'s answer, then the others in the order the point's leaf ranks them.

    Raises:
        CampaignError: the header ranks nothing (per-parameter trees, or a campaign whose
            trees were fitted before headers ranked their configurations).
    """
    campaign = ReadOnlyCampaign.open(directory)
    campaign.require("trees")
    campaign.warn_if_elsewhere()
    return HeaderFunction.load(campaign).ranked(rows)


def with_choices(directory: str | Path, answers: Sequence[Mapping[str, Any]]) -> list[dict]:
    """Each answer with ``choice``: the configuration named as the campaign's data names it
    (a replay of PyTorch AutoHeuristic data: ``type=triton_BLOCK-M=64_..._numwarps=4``, or the
    ``extern_*`` choice).

    Raises:
        CampaignError: the campaign does not replay data that names its choices.
    """
    kernel = ReadOnlyCampaign.open(directory).settings.get("kernel", {})
    if not isinstance(kernel, Mapping) or kernel.get("format") != "autoheuristic":
        shown = kernel.get("format", "kernel_tuner") if isinstance(kernel, Mapping) else None
        raise CampaignError(
            f"--as-choice: {directory} does not replay AutoHeuristic data ([kernel] format is "
            f"{shown!r}; allowed: 'autoheuristic'), so its answers have no choice name"
        )
    import pandas as pd  # only for this option

    from mlkaps_gpu.executors import choice_strings

    names = choice_strings(pd.DataFrame(list(answers))).tolist() if answers else []
    return [{**answer, "choice": name} for answer, name in zip(answers, names, strict=True)]


def read_inputs_csv(handle: TextIO) -> list[dict[str, str]]:
    """The rows of a CSV table with a header line (one column per input)."""
    reader = csv.DictReader(handle)
    if not reader.fieldnames:
        raise CampaignError("--csv: the table has no header line naming the inputs")
    return [{k: v for k, v in row.items() if k is not None} for row in reader]


def write_answers_csv(
    handle: TextIO, rows: Sequence[Mapping[str, str]], answers: Sequence[Mapping[str, Any]]
) -> None:
    """Each input row followed by its configuration, as CSV."""
    if not answers:
        return
    names = list(rows[0]) + [name for name in answers[0] if name not in rows[0]]
    writer = csv.DictWriter(handle, fieldnames=names, lineterminator="\n")
    writer.writeheader()
    for row, answer in zip(rows, answers, strict=True):
        writer.writerow({**row, **answer})


def write_ranked_csv(
    handle: TextIO,
    rows: Sequence[Mapping[str, str]],
    ranked: Sequence[Sequence[Mapping[str, Any]]],
) -> None:
    """Each input row once per ranked configuration, with its ``rank`` (1 first), as CSV."""
    first = next((answers[0] for answers in ranked if answers), None)
    if first is None:
        return
    names = list(rows[0]) + ["rank"] + [name for name in first if name not in rows[0]]
    writer = csv.DictWriter(handle, fieldnames=names, lineterminator="\n")
    writer.writeheader()
    for row, answers in zip(rows, ranked, strict=True):
        for rank, answer in enumerate(answers, start=1):
            writer.writerow({**row, "rank": rank, **answer})


class HeaderFunction:
    """A campaign header's batch function, with what it takes to call it from text inputs.

    Args:
        module: the compiled cffi module.
        function: the name of its batch function.
        inputs: per input parameter, ``{"name", "kind", "values"}`` (``values`` for
            categoricals only).
        design: the same for the design parameters, in the function's output order.
        ranked: ``{"function", "width"}`` of the module's batch function over
            ``<prefix>_ranked`` (``width``: the most configurations a row can get), or None
            where the header ranks nothing.
    """

    def __init__(
        self,
        module: Any,
        function: str,
        inputs: list[dict[str, Any]],
        design: list[dict[str, Any]],
        ranked: dict[str, Any] | None = None,
    ) -> None:
        self.module = module
        self.function = function
        self.inputs = inputs
        self.design = design
        self.ranked_batch = ranked

    @classmethod
    def load(cls, campaign: ReadOnlyCampaign) -> HeaderFunction:
        """From the user's cache when this header and selector were compiled before, else
        compiled (after the checks of :meth:`ReadOnlyCampaign.header_text`) and recorded."""
        from mlkaps_gpu import user_cache

        campaign.check_outputs()  # every recorded output: a damaged campaign is named as such
        if not campaign.selector_path.is_file():
            campaign.selector_document()  # the error: missing, or an old pickle (never loaded)
        key = user_cache.source_digest(
            hashlib.sha256(campaign.header_path.read_bytes()).hexdigest(),
            hashlib.sha256(campaign.selector_path.read_bytes()).hexdigest(),
            campaign.prefix,
        )[:32]
        record = user_cache.cache_folder("header") / f"select-{key}.json"
        try:
            manifest = json.loads(record.read_text(encoding="utf-8"))
            module = user_cache.load_module("header", manifest["module"], _no_build)
            return cls(
                module,
                manifest["function"],
                manifest["inputs"],
                manifest["design"],
                manifest["ranked"],  # a record from before rankings has none: compiled again
            )
        except (OSError, ValueError, KeyError, TypeError, ImportError):
            pass  # not compiled yet (or the cache was cleaned): compile it
        return cls._compile(campaign, record)

    @classmethod
    def _compile(cls, campaign: ReadOnlyCampaign, record: Path) -> HeaderFunction:
        from mlkaps_gpu.codegen import CompiledHeader  # the tree libraries: first call only

        header = campaign.header_text()  # the stored header, rendered again from the data
        compiled = CompiledHeader(campaign.load_selector(), header, prefix=campaign.prefix)
        ranking = compiled.model.ranking
        manifest = {
            "module": compiled.module.__name__,
            "function": compiled.function,
            "inputs": [_describe(p) for p in compiled.model.inputs],
            "design": [_describe(p) for p in compiled.model.design],
            "ranked": {
                "function": compiled.function + "_ranked",
                "width": len(ranking.portfolio) + 1,
            }
            if compiled.ranks and ranking is not None
            else None,
        }
        write_atomically(record, json.dumps(manifest, indent=1))
        return cls(
            compiled.module,
            compiled.function,
            manifest["inputs"],
            manifest["design"],
            manifest["ranked"],
        )

    def _arguments(self, rows: Sequence[Mapping[str, str]]) -> list[Any]:
        """The input arrays of a batch function, checked and parsed from text."""
        names = [p["name"] for p in self.inputs]
        for row in rows:
            unknown = sorted(set(row) - set(names))
            if unknown:
                raise CampaignError(f"unknown input(s) {unknown} (inputs: {names})")
            missing = [n for n in names if n not in row]
            if missing:
                raise CampaignError(f"missing input(s) {missing}: give name=value for each")
        ffi = self.module.ffi
        return [
            ffi.new(f"{_C_TYPES[p['kind']]}[]", [_parse(p, row[p["name"]]) for row in rows])
            for p in self.inputs
        ]

    def ranked(self, rows: Sequence[Mapping[str, str]]) -> list[list[dict[str, Any]]]:
        """Per row, the configurations ``<prefix>_ranked`` writes, best first."""
        if self.ranked_batch is None:
            raise CampaignError(
                "--ranked: this campaign's header ranks no configurations (only the trees of "
                '[trees] mode = "joint" do, and only since decision 0048: run `mlkaps-gpu tune` '
                "again to refit them)"
            )
        arguments = self._arguments(rows)
        ffi = self.module.ffi
        width = int(self.ranked_batch["width"])
        counts = ffi.new("int[]", len(rows))
        outputs = [ffi.new(f"{_C_TYPES[p['kind']]}[]", len(rows) * width) for p in self.design]
        function = getattr(self.module.lib, self.ranked_batch["function"])
        function(len(rows), *arguments, counts, *outputs)
        return [
            [
                {
                    p["name"]: _decode(p, out[i * width + j])
                    for p, out in zip(self.design, outputs, strict=True)
                }
                for j in range(counts[i])
            ]
            for i in range(len(rows))
        ]

    def __call__(self, rows: Sequence[Mapping[str, str]]) -> list[dict[str, Any]]:
        arguments = self._arguments(rows)
        ffi = self.module.ffi
        outputs = [ffi.new(f"{_C_TYPES[p['kind']]}[]", len(rows)) for p in self.design]
        getattr(self.module.lib, self.function)(len(rows), *arguments, *outputs)
        return [
            {p["name"]: _decode(p, out[i]) for p, out in zip(self.design, outputs, strict=True)}
            for i in range(len(rows))
        ]


def _describe(parameter: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": parameter.name, "kind": parameter.kind}
    if parameter.kind == "categorical":
        entry["values"] = [str(v) for v in parameter.domain_values().tolist()]
    return entry


def _no_build(folder: Path) -> Path:
    raise ImportError("not in the cache")


def _parse(parameter: Mapping[str, Any], text: str) -> int | float:
    """The C argument for an input written as text (the rules of ``space.parse_value``)."""
    kind, name = parameter["kind"], parameter["name"]
    try:
        if kind == "int":
            if _INTEGER.fullmatch(text):
                return int(text)
            number = float(text)  # 1e3, 300.0: exact only where float holds the integer
            if not number.is_integer() or abs(number) > 2**53:
                raise ValueError
            return int(number)
        if kind == "float":
            return float(text)
        if kind == "bool":
            lowered = text.lower()
            if lowered not in ("0", "1", "true", "false"):
                raise ValueError
            return int(lowered in ("1", "true"))
    except ValueError:
        raise CampaignError(f"input {name}={text!r}: expected a {kind} value") from None
    values = parameter["values"]
    if text not in values:
        raise CampaignError(f"input {name}={text!r}: not one of {values}")
    return int(values.index(text))


def _decode(parameter: Mapping[str, Any], value: Any) -> Any:
    if parameter["kind"] == "categorical":
        return parameter["values"][value]
    if parameter["kind"] == "bool":
        return bool(value)
    if parameter["kind"] == "int":
        return int(value)
    return float(value)
