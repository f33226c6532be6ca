"""``mlkaps-gpu select``: answer with the configuration chosen by the compiled header.

The header of a campaign is compiled once through cffi (cached under ``DIR/build/``) and called
with the given inputs, so the answer is the one a library embedding the header would get.

The first call compiles the header with a small batch wrapper (this needs the fitted selector,
hence the tree libraries) and writes ``DIR/build/select.json``: the compiled module, its
function, and the type and values of every input and design parameter. Every later call reads
that file, checks it against the header's hash, loads the module and calls it: the standard
library and cffi's backend only, no executor, no data files, no configuration validation (see
:class:`~mlkaps_gpu.campaign.ReadOnlyCampaign`). ``--csv FILE`` answers every row of a table
in the same call.
"""

from __future__ import annotations

import csv
import hashlib
import importlib.util
import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from mlkaps_gpu.campaign import CampaignError, ReadOnlyCampaign

MANIFEST = "select.json"
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


class HeaderFunction:
    """A campaign header's batch function, with what it takes to call it from text inputs.

    Args:
        module: the compiled cffi module.
        function: the name of its batch function.
        inputs: per input parameter, ``{"name", "kind", "values"}`` (``values`` for
            categoricals only).
        design: the same for the design parameters, in the function's output order.
    """

    def __init__(
        self,
        module: Any,
        function: str,
        inputs: list[dict[str, Any]],
        design: list[dict[str, Any]],
    ) -> None:
        self.module = module
        self.function = function
        self.inputs = inputs
        self.design = design

    @classmethod
    def load(cls, campaign: ReadOnlyCampaign) -> HeaderFunction:
        """From ``build/select.json`` when it matches the header, else compiled (and saved)."""
        header = campaign.header_path.read_bytes()
        digest = hashlib.sha256(header).hexdigest()
        build = campaign.directory / "build"
        try:
            manifest = json.loads((build / MANIFEST).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            manifest = None
        if manifest and manifest.get("header_sha256") == digest:
            library = build / manifest["module_file"]
            if library.is_file():
                module = _import(manifest["module"], library)
                return cls(module, manifest["function"], manifest["inputs"], manifest["design"])
        return cls._compile(campaign, header.decode("utf-8"), digest)

    @classmethod
    def _compile(cls, campaign: ReadOnlyCampaign, header: str, digest: str) -> HeaderFunction:
        from mlkaps_gpu.codegen import CompiledHeader  # the tree libraries: first call only

        build = campaign.directory / "build"
        compiled = CompiledHeader(
            campaign.load_selector(), header, prefix=campaign.prefix, build_dir=build
        )
        library = Path(compiled.module.__file__)
        manifest = {
            "header_sha256": digest,
            "module": compiled.module.__name__,
            "module_file": os.path.relpath(library, build),
            "function": compiled.function,
            "inputs": [_describe(p) for p in compiled.model.inputs],
            "design": [_describe(p) for p in compiled.model.design],
        }
        temporary = build / f"{MANIFEST}.{os.getpid()}.tmp"
        temporary.write_text(json.dumps(manifest, indent=1), encoding="utf-8")
        os.replace(temporary, build / MANIFEST)
        return cls(compiled.module, compiled.function, manifest["inputs"], manifest["design"])

    def __call__(self, rows: Sequence[Mapping[str, str]]) -> list[dict[str, Any]]:
        names = [p["name"] for p in self.inputs]
        for row in rows:
            unknown = sorted(set(row) - set(names))
            if unknown:
                raise CampaignError(f"unknown input(s) {unknown} (inputs: {names})")
            missing = [n for n in names if n not in row]
            if missing:
                raise CampaignError(f"missing input(s) {missing}: give name=value for each")
        ffi = self.module.ffi
        arguments = [
            ffi.new(f"{_C_TYPES[p['kind']]}[]", [_parse(p, row[p["name"]]) for row in rows])
            for p in self.inputs
        ]
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


def _import(name: str, library: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, library)
    if spec is None or spec.loader is None:
        raise CampaignError(f"cannot import the compiled header {library}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
