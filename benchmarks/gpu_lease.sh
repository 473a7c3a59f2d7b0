#!/usr/bin/env bash
# Drives benchmarks/gpu_run.sh through a lease of the device tool, whose calls end after 10
# minutes and re-send the working tree each time (files vanish and reappear under a job that
# runs in it: 37 GPU tests once failed on "no shipped kernels" that way), and bring back at
# most 8 files from $OUT.
#
#   bash benchmarks/gpu_lease.sh start [STAGE ...]   copy the tree to /tmp/kwb-src, start
#                                                    gpu_run.sh there in its own session, wait
#   bash benchmarks/gpu_lease.sh wait                wait for it (up to KWB_WAIT_S, default 560 s)
#
# Both print the stages' facts so far; once the job has ended they put results.tar.gz (the
# results folder, notebooks, logs) and gpu_run.facts alone under $OUT, and while it runs,
# partial.tar.gz (this run's folder and logs so far). Call `wait` again
# within the machine's idle release (30 s) until it says "done".
set -uo pipefail
src=/tmp/kwb-src
work="${KWB_GPU_RUN_DIR:-/tmp/kwb-gpu-run}"
log=/tmp/kwb-gpu-run.log
case "${1:-}" in
  start)
    shift
    rm -rf "$src" && mkdir -p "$src"
    cp -a "$(dirname "$0")/../." "$src/"
    (cd "$src" && setsid nohup bash benchmarks/gpu_run.sh "$@" > "$log" 2>&1 < /dev/null &)
    sleep 5 ;;
  wait) ;;
  *) echo "usage: gpu_lease.sh start [STAGE ...] | wait" >&2; exit 2 ;;
esac
running() { pgrep -f "bash benchmarks/gpu_run.sh" > /dev/null; }
deadline=$(( $(date +%s) + ${KWB_WAIT_S:-560} ))
while running && [ "$(date +%s)" -lt "$deadline" ]; do sleep 5; done
cat "$work/gpu_run.facts" 2>/dev/null
if running; then
  echo "--- still running; last lines:"; tail -n 5 "$log"
  # What the stages have finished so far, in case the machine goes back before the next call
  # (a lost call once took a main job's and a full run's files with it: only the printed facts stayed).
  if [ -n "${OUT:-}" ] && [ -f "$work/run_dir" ]; then
    tar -czf "$OUT/partial.tar.gz" --exclude="*.svg" "$(cat "$work/run_dir")" "$work"/*.facts "$work"/*.log "$work"/*.txt 2>/dev/null
    echo "--- partial results: partial.tar.gz"
  fi
else
  tail -n 25 "$log"
  [ -n "${OUT:-}" ] && cp "$work/results.tar.gz" "$work/gpu_run.facts" "$OUT/" 2>/dev/null
  echo "--- done"
fi
