#!/usr/bin/env bash
# Measures what a new user waits for: the time from `make run` on a fresh machine to its
# first success ("press Ctrl-C to stop", printed once the sample Infrastructure and
# ControlPlane succeeded), then stops it with an interrupt, as Ctrl-C would.
#
# Fresh means: an empty tools cache and an empty Go build cache in a scratch directory,
# and with COLD_MODULES=1 an empty Go module cache too (every module is then downloaded
# from the module proxy, as on a new machine). The caches of this machine are not touched.
#
#   bash test/tools/time-first-run.sh [SCRATCH_DIR]    (or `make time-first-run`)
#
# TERRASEED_TOOLS_JOBS and TERRASEED_DOWNLOAD pass through to test/tools/bootstrap.sh.
# The scratch directory is removed at the end unless KEEP=1. The output of `make run`
# goes to SCRATCH_DIR/run.log; the last lines say the time and the machine's load.
set -euo pipefail
cd "$(dirname "$0")/../.."

scratch=${1:-$(mktemp -d /tmp/terraseed-first-run.XXXXXX)}
mkdir -p "$scratch"
export TERRASEED_TOOLS_CACHE=$scratch/tools
export GOCACHE=$scratch/go-build
if [[ ${COLD_MODULES:-} == 1 ]]; then
  export GOMODCACHE=$scratch/go-mod
fi
runlog=$scratch/run.log
cleanup() {
  if [[ ${KEEP:-} != 1 ]]; then
    [[ ${COLD_MODULES:-} == 1 ]] && go clean -modcache >/dev/null 2>&1 || true
    rm -rf "$scratch"
  fi
}

echo "first run: cores $(nproc), load before: $(cut -d' ' -f1-3 /proc/loadavg), cold modules: ${COLD_MODULES:-0}, scratch $scratch" >&2
start=$(date +%s)
# Its own process group, so that the interrupt reaches make, go run and the controller.
setsid make run >"$runlog" 2>&1 &
pid=$!
result=failed
while kill -0 "$pid" 2>/dev/null; do
  if grep -q 'press Ctrl-C to stop' "$runlog"; then
    result=succeeded
    break
  fi
  sleep 2
done
took=$(($(date +%s) - start))
if kill -0 "$pid" 2>/dev/null; then
  kill -INT -- "-$pid" 2>/dev/null || true
  for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  kill -KILL -- "-$pid" 2>/dev/null || true
fi
wait "$pid" 2>/dev/null || true
grep '^\[tools\]' "$runlog" >&2 || true
# The CPU time of everything make ran (user, then system): less sensitive to other work on
# the machine than the elapsed time.
tf=$(mktemp)
times >"$tf" # in this shell: a command substitution's children are none
cpu=$(tail -1 "$tf")
rm -f "$tf"
echo "first make run $result after ${took}s; CPU (user system) ${cpu}; load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
if [[ $result != succeeded ]]; then
  tail -40 "$runlog" >&2
  KEEP=1
  echo "kept $scratch" >&2
  exit 1
fi
cleanup
