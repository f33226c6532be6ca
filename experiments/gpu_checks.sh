#!/usr/bin/env bash
# The GPU checks of a session on a lent GPU machine, in one call that fits its time:
#
#     bash experiments/gpu_checks.sh OUT [SECONDS]
#     bash experiments/gpu_checks.sh OUT SECONDS BENCH_ARGUMENTS...   (a follow-up call)
#
# 1. installs the project (and the wheels of its dependencies carried in .whl/, where the
#    machine has no package index), checks that CuPy sees a GPU;
# 2. bench_inputs.py --case gemm_cuda: the exhaustive truth of the shipped CUDA GEMM (every
#    valid configuration at 100 (m, n, k) points, 2 passes) with the peers only, first, so that
#    the truth comes back even if the rest runs out of time;
# 3. the GPU tests (pytest -m gpu);
# 4. bench_inputs.py --case gemm_cuda on that truth with live campaigns of the project, as many
#    seeds (up to 3) as the time left allows;
# then packs the results, the logs and the campaigns' small files in OUT/gpu_checks.tgz (the
# truth is also copied to OUT as soon as it is measured).
# SECONDS (default 560) bounds the whole run: every step runs under `timeout` so that the
# packing always happens.
set -u
out=${1:?usage: gpu_checks.sh OUT [SECONDS]}
total=${2:-560}
start=$(date +%s)
left() { echo $((total - ($(date +%s) - start))); }
work=$(mktemp -d)
results="$work/gpu_checks"
mkdir -p "$results" "$out"
log="$results/gpu_checks.log"
say() { echo "[$(($(date +%s) - start)) s] $*" | tee -a "$log"; }

if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$work/site" .whl/*.whl >>"$log" 2>&1 || say "wheels: install failed"
    export PYTHONPATH="$work/site${PYTHONPATH:+:$PYTHONPATH}"
fi
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . >>"$log" 2>&1 \
    || say "project: editable install failed (the checkout's package is imported from .)"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,utilization.gpu \
    --format=csv >>"$log" 2>&1
python3 - >>"$log" 2>&1 <<'EOF' || { say "environment check failed"; }
import cupy, lightgbm, pymoo, pydantic, cffi
import mlkaps_gpu
print("mlkaps_gpu", mlkaps_gpu.__file__, "cupy", cupy.__version__, "devices",
      cupy.cuda.runtime.getDeviceCount(), "lightgbm", lightgbm.__version__)
EOF
say "installed"

bench() {  # bench_inputs.py on the gemm_cuda case with the remaining time less $1 seconds
    local budget=$(($(left) - $1))
    if [ "$budget" -lt 30 ]; then say "no time left for: $*"; return 1; fi
    shift
    say "bench_inputs $* (at most $budget s)"
    timeout "$budget" python3 experiments/bench_inputs.py --case gemm_cuda --out "$results" \
        --workdir "$work/campaigns" "$@" >>"$results/bench_inputs.log" 2>&1
    say "bench_inputs: exit $?"
}

if [ $# -gt 2 ]; then
    # a follow-up call: the truth measured before (experiments/results), then one bench_inputs
    # run per seed with the arguments given after SECONDS (a seed's results survive a later
    # seed running out of time), e.g. --samplers lhs,random,hvs --no-live-peers
    cp experiments/results/bench_inputs_truth_gemm_cuda.csv "$results"/
    for seed in 0 1 2; do
        bench 20 --seeds "$seed" --tag "_s$seed" "${@:3}" || break
    done
else
bench 200 --skip-project --no-live-peers --seeds 0-2 --tag _peers
cp "$results"/bench_inputs_truth_gemm_cuda.csv "$out"/ 2>/dev/null || say "no truth measured"

tests=$(($(left) - 260))
[ "$tests" -gt 150 ] && tests=150
if [ "$tests" -ge 30 ]; then
    say "GPU tests (at most $tests s)"
    timeout "$tests" python3 -m pytest -m gpu -p no:cacheprovider -q -n 4 \
        >"$results/gpu_tests.log" 2>&1
    say "GPU tests: exit $? ($(tail -1 "$results/gpu_tests.log"))"
fi

# a seed takes about 80 s (campaign, LightGBM on its samples, the truth replay, the peers)
seeds=$((($(left) - 40) / 80))
[ "$seeds" -gt 3 ] && seeds=3
if [ "$seeds" -ge 1 ]; then
    bench 25 --seeds "0-$((seeds - 1))" --samplers default --no-live-peers
fi
fi

find "$work/campaigns" -maxdepth 6 -type f \( -name '*.csv' -o -name '*.h' -o -name '*.json' \
    -o -name '*.toml' -o -name '*.log' -o -name '*.sqlite' \) -size -4M 2>/dev/null \
    | sed "s|^$work/||" | tar czf "$results/campaigns.tgz" -C "$work" -T - 2>/dev/null
tar czf "$out/gpu_checks.tgz" -C "$work" gpu_checks
say "packed ($(du -sh "$out/gpu_checks.tgz" | cut -f1))"
rm -rf "$work"
