"""The tools a benchmark compares: their row labels, their ``--tools`` ids and their order."""

from __future__ import annotations

from collections.abc import Sequence

KT_STRATEGIES = (
    "genetic_algorithm",
    "simulated_annealing",
    "diff_evo",
    "pso",
    "bayes_opt",
    "random_sample",
)
HEADER = "project header"
BEST_MEASURED = "project best measured"
OPTUNA = "Optuna TPE"
RANDOM = "random search (exact)"
#: tool ids of --tools, in table order (``project`` gives the header and best-measured rows)
TOOL_IDS = ("project", *(f"kt_{s}" for s in KT_STRATEGIES), "optuna_tpe", "random_search")
TOOL_ALIASES = {"kernel_tuner": tuple(f"kt_{s}" for s in KT_STRATEGIES), "kt": None}


def parse_tools(items: Sequence[str]) -> list[str]:
    """``--tools`` items (aliases, comma lists) as tool ids in table order."""
    chosen: list[str] = []
    for item in items:
        for part in item.split(","):
            part = part.strip()
            if not part:
                continue
            if part in ("kernel_tuner", "kt"):
                expanded: Sequence[str] = TOOL_ALIASES["kernel_tuner"] or ()
            elif part in ("optuna",):
                expanded = ("optuna_tpe",)
            elif part in ("random",):
                expanded = ("random_search",)
            elif part in KT_STRATEGIES:
                expanded = (f"kt_{part}",)
            elif part in TOOL_IDS:
                expanded = (part,)
            else:
                raise SystemExit(f"--tools: unknown tool {part!r} (known: {', '.join(TOOL_IDS)})")
            chosen.extend(t for t in expanded if t not in chosen)
    return [t for t in TOOL_IDS if t in chosen]


def tool_rows_order(tools: Sequence[str]) -> list[str]:
    """The row labels of the tool ids, in table order (``project`` gives two rows)."""
    order = []
    for tool in tools:
        if tool == "project":
            order += [HEADER, BEST_MEASURED]
        elif tool.startswith("kt_"):
            order.append(f"KT {tool[3:]}")
        elif tool == "optuna_tpe":
            order.append(OPTUNA)
        else:
            order.append(RANDOM)
    return order


def installed(module: str) -> bool:
    """Whether ``module`` can be imported."""
    try:
        __import__(module)
    except ImportError:
        return False
    return True
