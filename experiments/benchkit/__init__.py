"""What the benchmark scripts of ``experiments/`` share (in the way of optuna's ``benchmarks/``:
problems, runners and reports apart).

- :mod:`benchkit.cases`: a case, a replay config stripped to its problem with the exhaustive data
  of each input value; :mod:`benchkit.configs` the config tables (strip, override, TOML).
- :mod:`benchkit.tools`: the tools compared, their labels and ``--tools`` ids.
- :mod:`benchkit.project`: the project as a tool (a campaign, its header, its best measured).
- :mod:`benchkit.peers`: the peer adapters (Kernel Tuner, Optuna TPE, exact random search).
- :mod:`benchkit.metrics`: scores of the rows, on top of :mod:`mlkaps_gpu.analysis`.
- :mod:`benchkit.runner`: every tool on one case; :mod:`benchkit.report` its markdown, CSV and
  figure.
- :mod:`benchkit.provenance`: the lines every results file starts with.
- :mod:`benchkit.inputs_truth`, :mod:`benchkit.inputs_peers`, :mod:`benchkit.inputs_project`,
  :mod:`benchkit.inputs_replay`, :mod:`benchkit.inputs_report`: the parts of ``bench_inputs.py``.
- :mod:`benchkit.repo_scripts`: the analytic cost models of the repository's ``scripts/``.

A script of ``experiments/`` imports it as ``benchkit`` (Python puts a script's own folder first
on ``sys.path``); the tests load it by path (``tests/experiments/_scripts.py``).
"""
