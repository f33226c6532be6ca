"""The code generation stage: the header of the fitted trees, verified against them, and the
files that record it (``selector.json``, ``<prefix>.h``, ``verification.json``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from mlkaps_gpu.campaign._directory import atomic_write, write_json
from mlkaps_gpu.campaign._errors import CampaignError
from mlkaps_gpu.campaign._readonly import LEGACY_PICKLE, SELECTOR_FILE, selector_document
from mlkaps_gpu.codegen import boundary_inputs, render_header, verify_header
from mlkaps_gpu.trees import FittedSelector, TreesSettings, tool_versions


class CodegenStage:
    """Render the header of the trees, verify it through cffi, write the stage's files.

    Args:
        directory: where the files go.
        prefix: the header's symbol prefix and file name (``<prefix>.h``).
        verify_inputs: inputs the header is compared with the trees on (beside the
            boundaries).
        mode: the trees' mode, recorded in verification.json.
        seed: seed of the verification inputs.
    """

    def __init__(
        self, directory: Path, *, prefix: str, verify_inputs: int, mode: str, seed: int = 0
    ) -> None:
        self.directory = Path(directory)
        self.prefix = prefix
        self.verify_inputs = int(verify_inputs)
        self.mode = mode
        self.seed = int(seed)

    @classmethod
    def from_settings(cls, settings: TreesSettings, directory: Path, *, seed: int) -> CodegenStage:
        """The stage of ``[trees]`` (prefix, verification inputs, mode)."""
        return cls(
            directory,
            prefix=settings.prefix,
            verify_inputs=settings.verify_inputs,
            mode=settings.mode,
            seed=seed,
        )

    @property
    def header_path(self) -> Path:
        """``<directory>/<prefix>.h``."""
        return self.directory / f"{self.prefix}.h"

    def run(
        self,
        fitted: FittedSelector,
        provenance: dict[str, Any],
        confirmation: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Write and verify the header of ``fitted`` (its comment carries ``provenance``);
        returns verification.json's content (with ``confirmation``'s details).

        Raises:
            CampaignError: the compiled header disagrees with the trees.
        """
        selector = fitted.selector
        versions = tool_versions()
        header = render_header(selector, self.prefix, provenance=provenance)
        rng = np.random.default_rng(self.seed)
        checks = boundary_inputs(selector, self.verify_inputs, rng)
        # compiled into the user's cache, never into the campaign directory
        report = verify_header(selector, header, checks, prefix=self.prefix)
        if not report.ok:
            raise CampaignError(f"generated header failed verification: {report}")
        document = selector_document(selector, self.prefix, versions, provenance)
        atomic_write(self.directory / SELECTOR_FILE, document)
        (self.directory / LEGACY_PICKLE).unlink(missing_ok=True)
        atomic_write(self.header_path, header.encode())
        model = selector.model_
        details = {
            "header": self.header_path.name,
            "verified_inputs": report.n_rows,
            "mismatches": report.n_mismatches,
            "leaves": {
                name: int(tree.n_leaves)
                for name, tree in zip(model.tree_names, model.trees, strict=True)
            },
            "mode": self.mode,
            "depth": fitted.sweep.chosen,
            "depth_sweep": fitted.sweep.records(),
            **(confirmation or {}),
        }
        write_json(self.directory / "verification.json", details)
        return details


__all__ = ["CodegenStage"]
