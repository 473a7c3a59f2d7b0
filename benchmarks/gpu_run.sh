#!/usr/bin/env bash
# One GPU machine's whole job, in one call: install kwb, then
#   build   `kwb build --all --device cuda` from an empty cache
#   run     `kwb run` from empty extension and TorchInductor caches, then again with both cached
#   full    `kwb run --full` (every dtype at every bench size), cached builds, into <run>/full/
#           (only when named; KWB_FULL_RUNS=2 runs it twice, the second into <run>/full2/;
#           KWB_FULL_ARGS: more options, "--in-turns" say)
#   tolerance benchmarks/tolerance_vs_eager.py: each kernel and eager PyTorch against float64
#   extension benchmarks/extension_loop.py: tutorial-style extensions, kwb's loop beside torch's
#           (15 minutes on the H100: only when named)
#   variants benchmarks/<name>_variants.py for each name in KWB_VARIANTS (default norm_backward; options
#           in KWB_VARIANT_ARGS_<name>, else KWB_VARIANT_ARGS; ncu's kernels a regex in KWB_NCU_KERNELS),
#           into benchmarks/variants/<device>/bench.csv, and ncu's view of each launched once where
#           the script takes --once (only when named)
#   repeat  benchmarks/bench_row_repeat.py with KWB_REPEAT_ARGS (a row a run found wrong, from its seed),
#           with PDL as the environment sets it, then with KWB_PDL=0 (only when named)
#   inductor benchmarks/inductor_kernels.py: torch.compile's Triton kernels and chosen configs for the
#           kernels in KWB_INDUCTOR_KERNELS (options in KWB_INDUCTOR_ARGS), into <run>/inductor/ (only when named)
#   ncu     benchmarks/ncu_compare.py under Nsight Compute for each case in KWB_NCU_COMPARE (only when named)
#   graphs  benchmarks/graph_timeline.py and launch_paths.py --dump: the graph rows' kernels, gaps,
#           launch paths and CUDA's DOT of each provider's graph, into <run>/, and `kwb bench`'s own fp32
#           add row beside them (KWB_GRAPH_CASES: "add rmsnorm"; KWB_LAUNCH_COPIES: "32,1"; only when named)
#   pytest  the GPU suite: python -m pytest -m "cuda or nvcc or nvrtc" (KWB_PYTEST_ARGS: more arguments)
#   sanitize  benchmarks/sanitize.py: memcheck on every kernel (KWB_SANITIZE_NAMES: some), racecheck
#           where shared memory is used (beside the GPU suite: both judge correctness only)
#   jit     benchmarks/jit_loop.py --repeat 2 (every approach but the tutorial's 30-70 s builds)
#   notebooks notebooks/run.py: every walkthrough re-executed in place
# and write benchmarks/results/<device>/<date>-<commit>/ (the run's report, logs, sanitizer and
# gpu_run.json) and benchmarks/results/<device>/gpu_run.json, the newest (docs/results.md quotes it).
#
#   KWB_GIT_DESCRIBE=$(git describe --always --dirty) bash benchmarks/gpu_run.sh [STAGE ...]
#
# No STAGE: all of them but extension, in the order above. KWB_PROFILE=1 runs `kwb run` under cProfile.
# Outputs land in the repository (results, notebooks) and, packed, in the work folder
# (KWB_GPU_RUN_DIR, default /tmp/kwb-gpu-run: logs, facts and results.tar.gz). Through the device
# tool, run it with benchmarks/gpu_lease.sh, which starts it in a copy of the tree and collects.
# The device's copy of the tree may carry a stale .git: pass KWB_GIT_DESCRIBE from your checkout.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${KWB_GPU_RUN_DIR:-/tmp/kwb-gpu-run}"
rm -rf "$out"; mkdir -p "$out"
export PYTHONUNBUFFERED=1
stages=("$@")
[ "${#stages[@]}" -eq 0 ] && stages=(build run tolerance pytest sanitize jit notebooks)  # about 18 minutes on the H100
wants() { local s; for s in "${stages[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }
now() { date +%s.%N; }
since() { python -c "import sys; print(round($(now) - $1, 1))"; }

# Packages the machine lacks (nbclient, ipykernel, ...) travel as wheels: benchmarks/fetch_wheels.sh.
if ls .nbwheels/*.whl >/dev/null 2>&1; then
  python -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/kwb-site .nbwheels/*.whl
  export PYTHONPATH=/tmp/kwb-site${PYTHONPATH:+:$PYTHONPATH}
fi
# CUTLASS's headers travel as a tarball (benchmarks/fetch_wheels.sh): CUTLASS_PATH points the builds at them.
if [ -f .cutlass.tar.xz ]; then
  mkdir -p /tmp/kwb-cutlass && tar -xJf .cutlass.tar.xz -C /tmp/kwb-cutlass && export CUTLASS_PATH=/tmp/kwb-cutlass
fi
# python -m: the machine's `pip` and `kwb` may belong to another interpreter than the one holding torch.
python -m pip install --no-deps --no-build-isolation -q -e . 2>&1 | tail -2
slug=$(python -c 'from workbench.harness import results; print(results.environment("cuda").slug)')
res="benchmarks/results/$slug"
run_dir="$res/$(date -u +%Y-%m-%d)-${KWB_GIT_DESCRIBE:-unknown}"  # this call's report, logs and checks
mkdir -p "$run_dir"
echo "$PWD/$run_dir" > "$out/run_dir"  # where gpu_lease.sh finds what a call has finished so far
facts="$out/gpu_run.facts"  # key=value lines, turned into gpu_run.json at the end
: > "$facts"
fact() { echo "$1=$2" >> "$facts"; }
fact date "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
fact commit "${KWB_GIT_DESCRIBE:-unknown}"
export KWB_GIT_DESCRIBE="${KWB_GIT_DESCRIBE:-}"
t=$(now); python -c 'import torch' && fact import_torch_s "$(since "$t")"
python -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, torch.cuda.get_device_name())' | tee "$out/env.txt"
nvcc --version | tail -2 | tee -a "$out/env.txt"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,utilization.gpu --format=csv | tee -a "$out/env.txt"

fresh() {  # empty extension, TorchInductor and Triton caches under $1
  rm -rf "$1"; mkdir -p "$1/ext" "$1/inductor" "$1/triton"
  export TORCH_EXTENSIONS_DIR="$1/ext" TORCHINDUCTOR_CACHE_DIR="$1/inductor" TRITON_CACHE_DIR="$1/triton"
}

if wants build; then
  fresh /tmp/kwb-build
  t=$(now)
  python -m workbench.cli build --all --device cuda 2>&1 | tee "$out/build_all.log"
  fact build_all_cold_rc "${PIPESTATUS[0]}"
  fact build_all_cold_s "$(since "$t")"
  # Each unit's compile seconds (ninja's log: start and end in ms), for where the time went.
  for log in "$TORCH_EXTENSIONS_DIR"/kwb_*/*/.ninja_log "$TORCH_EXTENSIONS_DIR"/kwb_*/.ninja_log; do
    [ -f "$log" ] && awk -v k="$log" 'NR>1 {printf "%7.2f s  %s  (%s)\n", ($2-$1)/1000, $4, k}' "$log"
  done 2>/dev/null | sort -rn | tee "$out/build_units.txt" | head -12
fi

if wants run; then
  fresh /tmp/kwb-run
  profile=()
  [ "${KWB_PROFILE:-0}" = 1 ] && profile=(-m cProfile -o "$out/kwb_run_cold.prof")
  t=$(now)
  python "${profile[@]}" -m workbench.cli run --out /tmp/kwb-report-cold 2>&1 | tee "$out/kwb_run_cold.log"
  fact kwb_run_cold_rc "${PIPESTATUS[0]}"
  fact kwb_run_cold_s "$(since "$t")"
  [ "${KWB_PROFILE:-0}" = 1 ] && profile=(-m cProfile -o "$out/kwb_run_cached.prof")
  t=$(now)
  rm -rf /tmp/kwb-report-cached
  python "${profile[@]}" -m workbench.cli run --out /tmp/kwb-report-cached 2>&1 | tee "$out/kwb_run_cached.log"
  fact kwb_run_cached_rc "${PIPESTATUS[0]}"
  fact kwb_run_cached_s "$(since "$t")"
  # The committed report is the cached run's (the same checks and timings, its builds cached).
  cp -r "/tmp/kwb-report-cached/$slug/." "$run_dir/"
  cp "$out/kwb_run_cold.log" "$out/kwb_run_cached.log" "$run_dir/"
  for p in "$out"/*.prof; do
    [ -f "$p" ] && python -c "import pstats,sys; s=pstats.Stats(sys.argv[1]); s.sort_stats('cumulative').print_stats(70); s.sort_stats('tottime').print_stats(40)" "$p" > "${p%.prof}.txt"
  done
fi

if wants full; then
  # KWB_FULL_RUNS=2: a second run into <run>/full2/, for rows that must hold in two runs
  for n in $(seq 1 "${KWB_FULL_RUNS:-1}"); do
    sfx=$([ "$n" = 1 ] || echo "$n")
    t=$(now)
    rm -rf /tmp/kwb-report-full
    # shellcheck disable=SC2086  # KWB_FULL_NAMES: some kernels by name ("relu_scale softmax"); all by default
    python -m workbench.cli run ${KWB_FULL_NAMES:-} --full ${KWB_FULL_ARGS:-} --out /tmp/kwb-report-full 2>&1 | tee "$out/kwb_run_full$sfx.log"
    fact "kwb_run_full${sfx}_rc" "${PIPESTATUS[0]}"
    fact "kwb_run_full${sfx}_s" "$(since "$t")"
    mkdir -p "$run_dir/full$sfx"
    cp -r "/tmp/kwb-report-full/$slug/." "$run_dir/full$sfx/"
    cp "$out/kwb_run_full$sfx.log" "$run_dir/full$sfx/"
  done
fi

if wants tolerance; then
  t=$(now)
  python benchmarks/tolerance_vs_eager.py --out "$res" > "$out/tolerance.log" 2>&1
  fact tolerance_rc "$?"
  fact tolerance_s "$(since "$t")"
  cp "$res"/tolerance_vs_eager.json "$res"/tolerance_vs_eager.md "$run_dir/" 2>/dev/null
  tail -40 "$out/tolerance.log"
fi

if wants extension; then
  t=$(now)
  # shellcheck disable=SC2086  # KWB_EXTENSION_ARGS: extension_loop.py's options ("--only attn"); every workload by default
  python benchmarks/extension_loop.py --out benchmarks/results ${KWB_EXTENSION_ARGS:-} > "$out/extension_loop.log" 2>&1
  fact extension_loop_rc "$?"
  fact extension_loop_s "$(since "$t")"
  cp "$res"/extension_loop.json "$res"/extension_loop.md "$run_dir/" 2>/dev/null
  tail -30 "$out/extension_loop.log"
fi

if wants variants; then
  t=$(now)
  for name in ${KWB_VARIANTS:-norm_backward}; do
    # KWB_VARIANT_ARGS_<name> (else KWB_VARIANT_ARGS): the script's own options ("--shapes 16384x4096"), for both runs
    args_var="KWB_VARIANT_ARGS_${name}"
    variant_args="${!args_var:-${KWB_VARIANT_ARGS:-}}"
    # shellcheck disable=SC2086
    python "benchmarks/${name}_variants.py" --out benchmarks/variants $variant_args > "$out/${name}_variants.log" 2>&1
    fact "${name}_variants_rc" "$?"
    if grep -q -- "--once" "benchmarks/${name}_variants.py" && command -v ncu > /dev/null; then
      ncu --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats \
        --section WarpStateStats --section MemoryWorkloadAnalysis -k "regex:${KWB_NCU_KERNELS:-norm_backward|backward_staged|column_sum}" \
        python "benchmarks/${name}_variants.py" --once $variant_args > "$out/${name}_ncu.txt" 2>&1
      fact "${name}_ncu_rc" "$?"
    fi
    tail -30 "$out/${name}_variants.log"
  done
  cp -r "benchmarks/variants/$slug" "$run_dir/variants" 2>/dev/null
  fact variants_s "$(since "$t")"
fi

if wants repeat; then
  if [ -z "${KWB_REPEAT_ARGS:-}" ]; then
    echo "repeat: KWB_REPEAT_ARGS is empty (the row to repeat: \"bias_gelu --op ... --seed ...\"); skipped"
  else
    t=$(now)
    : > "$out/bench_row_repeat.log"
    for pdl in 1 0; do  # exit 1: some row was wrong or failed
      # shellcheck disable=SC2086  # KWB_REPEAT_ARGS: the script's options
      KWB_PDL=$pdl python benchmarks/bench_row_repeat.py $KWB_REPEAT_ARGS >> "$out/bench_row_repeat.log" 2>&1
      fact "repeat_pdl${pdl}_rc" "$?"
    done
    fact repeat_s "$(since "$t")"
    cp "$out/bench_row_repeat.log" "$run_dir/" 2>/dev/null
    grep -E "^(repeat|KWB_PDL)" "$out/bench_row_repeat.log"
  fi
fi

if wants inductor; then
  t=$(now)
  mkdir -p "$run_dir/inductor"
  # shellcheck disable=SC2086  # KWB_INDUCTOR_ARGS: inductor_kernels.py's options ("--shapes 4096x1024 --dtypes bfloat16 --train")
  python benchmarks/inductor_kernels.py ${KWB_INDUCTOR_KERNELS:-layernorm rmsnorm} ${KWB_INDUCTOR_ARGS:-} --out "$run_dir/inductor" \
    > "$out/inductor_kernels.log" 2>&1
  fact inductor_rc "$?"
  fact inductor_s "$(since "$t")"
  cp "$out/inductor_kernels.log" "$run_dir/inductor/" 2>/dev/null
  grep -v "^\s*$" "$out/inductor_kernels.log" | tail -30
fi

if wants ncu; then
  # KWB_NCU_COMPARE: "KERNEL OP DTYPE SHAPE" cases, ';'-separated: ncu on kwb's kernel beside torch.compile's
  t=$(now)
  IFS=';' read -ra cases <<< "${KWB_NCU_COMPARE:-relu_scale relu_scale_backward float32 1048576}"
  for c in "${cases[@]}"; do
    read -r kernel op dtype shape <<< "$c"
    report="$out/ncu_${kernel}_${op}_${dtype}_${shape}.txt"
    ncu --clock-control none --nvtx --nvtx-include "kwb/" --nvtx-include "compile/" \
      --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
      --section MemoryWorkloadAnalysis --section SourceCounters \
      python benchmarks/ncu_compare.py "$kernel" "$op" "$dtype" "$shape" > "$report" 2>&1
    fact "ncu_${kernel}_${op}_rc" "$?"
    cp "$report" "$run_dir/" 2>/dev/null
  done
  fact ncu_s "$(since "$t")"
fi

if wants graphs; then
  # where a CUDA-graph row's time goes: kernels and gaps (graph_timeline.py), one add by every
  # launch path, and each path's graph as CUDA's DOT (launch_paths.py --dump)
  t=$(now)
  python benchmarks/graph_timeline.py --copies 32,1 --seconds 0.4 --out "$run_dir" > "$run_dir/graph_timeline.log" 2>&1
  fact graph_timeline_rc "$?"
  for case in ${KWB_GRAPH_CASES:-add rmsnorm}; do
    # the DOT and SASS in a process of their own: a graph's debug mode holds on to every graph after it
    python benchmarks/launch_paths.py --case "$case" --copies "" --dump "$run_dir/graphs_$case" \
      > "$run_dir/launch_paths_${case}_dump.log" 2>&1
    # KWB_LAUNCH_COPIES: input copies each graph rotates over; 13 is the harness's (twice the L2)
    python benchmarks/launch_paths.py --case "$case" --copies "${KWB_LAUNCH_COPIES:-32,1}" --seconds 0.4 \
      > "$run_dir/launch_paths_$case.log" 2>&1
    fact "launch_paths_${case}_rc" "$?"
  done
  # the harness's own row for the add, on the same machine, to set beside launch_paths.py's
  python -m workbench.cli bench vector_add --dtype float32 --sizes 1048576 --no-backward --no-launches \
    > "$run_dir/bench_vector_add_2e20.log" 2>&1
  fact bench_vector_add_rc "$?"
  fact graphs_s "$(since "$t")"
fi

# The GPU suite and the sanitizer judge correctness only, so they share the machine (and its
# minutes: 258 s and 203 s one after the other on the H200).
if wants pytest || wants sanitize; then
  t=$(now)
  if wants sanitize; then
    # KWB_SANITIZE_NAMES: some kernels by name, reported in this call's folder only, so the device's
    # every-kernel sanitize.md stays whole; all by default
    sanitize_out="$res"; [ -n "${KWB_SANITIZE_NAMES:-}" ] && sanitize_out="$run_dir"
    # shellcheck disable=SC2086
    (python benchmarks/sanitize.py ${KWB_SANITIZE_NAMES:-} --out "$sanitize_out" > "$out/sanitize.log" 2>&1; echo "sanitizer_rc=$?" >> "$facts"; \
     echo "sanitize_s=$(since "$t")" >> "$facts") &
  fi
  if wants pytest; then
    fresh /tmp/kwb-pytest
    # shellcheck disable=SC2086  # KWB_PYTEST_ARGS: more pytest arguments ("-k lltm"); the whole suite by default
    python -m pytest -m "cuda or nvcc or nvrtc" -n 8 -q -p no:cacheprovider --junitxml="$out/pytest.xml" ${KWB_PYTEST_ARGS:-} > "$out/pytest.txt" 2>&1
    fact pytest_rc "$?"
    fact pytest_s "$(since "$t")"
    fact pytest_failures "$(grep -E '^(FAILED|ERROR) ' "$out/pytest.txt" | cut -c1-160 | head -8 | paste -sd';')"
    tail -5 "$out/pytest.txt"
  fi
  wait
  tail -4 "$out/sanitize.log" 2>/dev/null
  # this run's, read by gpu_summary.py (the device folder's copy is an earlier run's when sanitize is not named)
  wants sanitize && [ "$sanitize_out" = "$res" ] && cp "$res"/sanitize.json "$res"/sanitize.md "$run_dir/" 2>/dev/null
fi

if wants jit; then
  t=$(now)
  python benchmarks/jit_loop.py --repeat 2 --skip-tutorial --out "$res" 2>&1 | tee "$out/jit_loop.log"
  fact jit_loop_rc "${PIPESTATUS[0]}"
  fact jit_loop_s "$(since "$t")"
  cp "$res"/jit_loop.json "$res"/jit_loop.md "$run_dir/" 2>/dev/null
fi

if wants notebooks; then
  t=$(now)
  # shellcheck disable=SC2086  # KWB_NOTEBOOKS: some notebooks by name or number ("10 softmax"); all by default
  python notebooks/run.py --timeout 900 ${KWB_NOTEBOOKS:-} 2>&1 | tee "$out/notebooks.log"
  fact notebooks_rc "${PIPESTATUS[0]}"
  fact notebooks_s "$(since "$t")"
fi

cp "$out"/build_units.txt "$out"/pytest.txt "$run_dir/" 2>/dev/null
python benchmarks/gpu_summary.py "$facts" "$out" "$run_dir/gpu_run.json"
cp "$run_dir/gpu_run.json" "$res/gpu_run.json"  # the newest run's figures, which docs/results.md quotes
# this run's folder and the device folder's own files, not the earlier runs' (the device tool returns
# files of 16 MiB at most; the whole folder had reached 14 MiB packed)
tar -czf "$out/results.tar.gz" --exclude=runs --exclude=latest --exclude="*.svg" "$run_dir" $(find "$res" -maxdepth 1 -type f) notebooks/*.ipynb "$out"/*.txt "$out"/*.log 2>/dev/null
ls -la "$out"
