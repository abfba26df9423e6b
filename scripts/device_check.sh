#!/usr/bin/env bash
# The whole check of the cuda plugin on a machine with an NVIDIA GPU (issue
# 30), in one command that fits a lent GPU machine's session twice:
#
#   OUT=/path/to/results bash scripts/device_check.sh
#
# 1. builds the core and the cuda plugin against this machine's torch, on all
#    its cores (FLAGOS_PLUGINS=cuda: the GPU image has no OpenBLAS or OpenCL
#    for the other plugins); FLAGOS_PREBUILT=<tar from an earlier run> skips it;
# 2. builds and runs the ABI conformance suite on the cuda plugin (googletest
#    from GTEST_SOURCE_DIR, .device/googletest or /usr/src/googletest);
# 3. runs the custom-kernel examples (CUDA C sources through NVRTC);
# 4. sweeps PyTorch's OpInfo database on flagos against native CUDA, float32
#    and bfloat16 (tests/device/opinfo_vs_cuda.py), while
# 5. the model zoo's models train one step against native CUDA
#    (tests/device/zoo_vs_cuda.py), three processes at once;
# 6. runs the benchmarks against native CUDA (benchmarks/bench_cuda.py), alone;
# 7. writes report.md from the JSON (scripts/device_report.py).
#
# Everything lands in $OUT (8 files: log.txt, conformance.txt, opinfo-float32.json,
# opinfo-bfloat16.json, zoo.json, bench.json, report.md, build.tar.xz). Each stage has
# a time limit (FLAGOS_CHECK_<STAGE>_SECONDS) and a failed stage does not
# stop the next; the exit status is 0 only when every stage passed.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
OUT=${OUT:-$ROOT/build/device-check}
mkdir -p "$OUT" build
PY=${PYTHON:-$(command -v python3)}
JOBS=${FLAGOS_BUILD_JOBS:-$(nproc)}
export PYTHONPATH="$ROOT/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export FLAGOS_CACHE_DIR=${FLAGOS_CACHE_DIR:-$ROOT/build/device-kernel-cache}
# torch.testing._internal (the OpInfo database) imports expecttest, which the
# GPU image lacks: a copy travels in .device/pylib (pure Python).
if ! "$PY" -c 'import expecttest' 2>/dev/null && [ -d "$ROOT/.device/pylib" ]; then
  export PYTHONPATH="$PYTHONPATH:$ROOT/.device/pylib"
fi
LOG=$OUT/log.txt
: >"$LOG"
failed=()

log() { printf '\n== device check [%4ss]: %s\n' "$SECONDS" "$*" | tee -a "$LOG"; }
# stage NAME SECONDS CMD...: runs CMD with a time limit, its output to the log.
stage() {
  local name=$1 limit=$2
  shift 2
  log "$name (limit ${limit}s)"
  timeout --kill-after=10 "$limit" "$@" >>"$LOG" 2>&1
  local rc=$?
  [ $rc -eq 0 ] || { failed+=("$name (exit $rc)"); log "$name FAILED (exit $rc)"; }
  return $rc
}

log "machine"
{
  nvidia-smi -L || true
  "$PY" -c 'import sys, torch; print(sys.version.split()[0], torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))'
  nproc
  g++ --version | head -1
  echo "libstdc++.so for g++: $(g++ -print-file-name=libstdc++.so)"
} >>"$LOG" 2>&1

# --- 1. build -----------------------------------------------------------------
if [ -n "${FLAGOS_PREBUILT:-}" ]; then
  log "prebuilt: $FLAGOS_PREBUILT"
  tar -xJf "$FLAGOS_PREBUILT" -C "$ROOT" >>"$LOG" 2>&1 || failed+=("unpack $FLAGOS_PREBUILT")
else
  stage build "${FLAGOS_CHECK_BUILD_SECONDS:-240}" bash -c "
    cmake -S . -B build/device -G Ninja -DPython3_EXECUTABLE=$PY \
      -DFLAGOS_PY_OUTPUT_DIR=$ROOT/python/flagos_torchfl -DFLAGOS_BUILD_TESTS=OFF \
      -DFLAGOS_PLUGINS=cuda && cmake --build build/device -j$JOBS"
  # Note [Dynamic libstdc++]: the core must share the process's libstdc++.
  if ! readelf -d python/flagos_torchfl/_C*.so | grep -q 'libstdc++\.so\.6'; then
    failed+=("build: the core links libstdc++ statically (cmake/dynamic_libstdcxx.cmake)")
    log "build: the core does not link libstdc++.so.6"
  fi
  # The built core and plugin, for a second run without the build.
  tar -cJf "$OUT/build.tar.xz" python/flagos_torchfl/_C*.so python/flagos_torchfl/plugins \
    python/flagos_torchfl/include python/flagos_torchfl/_build_info.py 2>>"$LOG" || true
fi

# --- 2. the ABI conformance suite on the cuda plugin ----------------------------
GTEST=${GTEST_SOURCE_DIR:-}
for dir in "$ROOT/.device/googletest" /usr/src/googletest/googletest; do
  [ -z "$GTEST" ] && [ -f "$dir/src/gtest-all.cc" ] && GTEST=$dir
done
if [ "${FLAGOS_CHECK_CONFORMANCE_SECONDS:-120}" = 0 ]; then
  log "conformance: skipped (FLAGOS_CHECK_CONFORMANCE_SECONDS=0)"
elif [ -n "$GTEST" ]; then
  stage conformance "${FLAGOS_CHECK_CONFORMANCE_SECONDS:-120}" bash -c "
    set -e
    mkdir -p build/device/conformance
    cd build/device/conformance
    for f in $GTEST/src/gtest-all.cc $ROOT/tests/cpp/conformance_main.cpp \
        $ROOT/tests/cpp/{tables,device,memory,stream,event,trace}_test.cpp; do
      g++ -std=c++17 -O1 -c -I$GTEST/include -I$GTEST -I$ROOT/include \
        -DFLAGOS_DEFAULT_CONFORMANCE_PLUGIN='\"\"' \$f -o \$(basename \$f).o &
    done
    wait
    g++ -o abi_conformance_test *.o -lpthread -ldl
    ./abi_conformance_test $ROOT/python/flagos_torchfl/plugins/libflagos_cuda.so \
      2>&1 | tee $OUT/conformance.txt
    test \${PIPESTATUS[0]} -eq 0"
else
  failed+=("conformance: no googletest sources")
fi

# --- 3. custom kernels ----------------------------------------------------------
stage examples "${FLAGOS_CHECK_EXAMPLES_SECONDS:-90}" env FLAGOS_BACKEND=cuda bash -c "
  $PY examples/fused_rmsnorm.py; a=\$?; $PY examples/flash_attention.py; exit \$((a | \$?))"

# --- 4-5. correctness against native CUDA: three processes at once -------------
# Mostly host work (NVRTC builds, Python), so they share the machine's cores
# and the kernel cache folder; the benchmarks run after them, alone.
correct=${FLAGOS_CHECK_OPINFO_SECONDS:-150}
log "correctness: opinfo float32, opinfo bfloat16, zoo at once (${correct}s each)"
pids=()
for job in float32 bfloat16 zoo; do
  if [ $job = zoo ]; then
    cmd=("$PY" tests/device/zoo_vs_cuda.py "$OUT/zoo.json" --seconds "$correct")
  else
    cmd=("$PY" tests/device/opinfo_vs_cuda.py "$OUT/opinfo-$job.json" --seconds "$correct"
      --dtypes $job)
  fi
  timeout --kill-after=10 "$((correct + 60))" "${cmd[@]}" >"build/device-$job.log" 2>&1 &
  pids+=($!)
done
for i in 0 1 2; do
  job=$(echo float32 bfloat16 zoo | cut -d' ' -f$((i + 1)))
  wait "${pids[$i]}"
  rc=$?
  { echo "--- $job (exit $rc)"; tail -n 40 "build/device-$job.log"; } >>"$LOG"
  [ $rc -eq 0 ] || failed+=("$job (exit $rc)")
done

# --- 6. speed against native CUDA, alone on the GPU ---------------------------------
stage bench "${FLAGOS_CHECK_BENCH_SECONDS:-200}" "$PY" benchmarks/bench_cuda.py "$OUT/bench.json" \
  ${FLAGOS_CHECK_BENCH_ARGS:-}

# --- 7. report --------------------------------------------------------------------
"$PY" scripts/device_report.py "$OUT" >"$OUT/report.md" 2>>"$LOG" || failed+=("report")
log "done"
if [ ${#failed[@]} -gt 0 ]; then
  printf 'FAILED: %s\n' "${failed[@]}" | tee -a "$LOG"
  exit 1
fi
echo "all device checks passed" | tee -a "$LOG"
