#!/usr/bin/env bash
# The one prepared device check: tests/gpu and bench/gpu.py --quick on a lent GPU machine
# (its python3, /opt/torch/.venv/bin/python3, has torch CUDA, cupy-cuda13x, mpi4py, pytest and
# pytest-timeout, but no MPI library and no pytest-mpi, and nothing can be downloaded there).
#
# 1. Here, once, in the repo's root: the wheels it needs, for Python 3.12 (about 14 MiB;
#    .whl/ is ignored through .git/info/exclude, never committed):
#      echo /.whl/ >> .git/info/exclude
#      .venv/bin/python -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
#        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#        --platform manylinux1_x86_64 -d .whl mpich==5.0.2 mpi4py==4.1.2 pytest-mpi==0.6
# 2. The device call (one run, about 8 minutes at most, leaving time to rerun it):
#      run(command="bash bench/gpu_check.sh", carry=[".whl"], timeout_s=560)
#    What comes back: $OUT/gpu_check.log (everything printed) and $OUT/gpu_bench.md (the
#    bench's Markdown report).
#
# mpich goes in with --prefix, not --target: pip's --target drops a wheel's data files, and
# mpich's libmpi.so.12 is one (<prefix>/lib). mpi4py 4.x finds it through LD_LIBRARY_PATH
# (its loader dlopens libmpi.so by name) and mpiexec through PATH. Our mpi4py 4.1.2 goes first
# on PYTHONPATH, so the version is the one tested here whatever the image holds.
#
# Here, without a GPU, the same logic runs as a dry run:
#   OUT=/tmp/gpu_out PYTHON=.venv/bin/python BENCH_ARGS="--place cpu --quick --batches 8 --dp-batch 8" \
#     bash bench/gpu_check.sh
# (pip refuses the cp312 mpi4py wheel under Python 3.11: logged, and the venv's is used.)
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu_check_out}
PY=${PYTHON:-python3}
SITE=${SITE:-/tmp/site}
MPICH=${MPICH_PREFIX:-/tmp/mpich}
BENCH_ARGS=${BENCH_ARGS:---quick}
TEST_TIMEOUT=${TEST_TIMEOUT:-240}    # seconds for tests/gpu
BENCH_TIMEOUT=${BENCH_TIMEOUT:-200}  # seconds for bench/gpu.py
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu_check.log") 2>&1
failed=()
step() { echo; echo "==== $* ($(date +%T))"; }

step "install .whl/*.whl"
if ! ls .whl/*.whl >/dev/null 2>&1; then
    echo "no .whl/*.whl: download them first (this script's header) and carry .whl"
    failed+=(wheels)
fi
for whl in .whl/*.whl; do
    [ -e "$whl" ] || continue
    case "$(basename "$whl")" in
        mpich-*) opts=(--ignore-installed --prefix "$MPICH") ;;
        *) opts=(--upgrade --target "$SITE") ;;
    esac
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir "${opts[@]}" \
        "$whl" || { echo "pip could not install $whl"; failed+=("install $(basename "$whl")"); }
done
export PYTHONPATH="$PWD:$SITE${PYTHONPATH:+:$PYTHONPATH}"
export LD_LIBRARY_PATH="$MPICH/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$MPICH/bin:$SITE/bin:$PATH"
export PYTHONUNBUFFERED=1

step "machine and versions"
nvidia-smi || echo "nvidia-smi: not available"
echo "mpiexec on PATH: $(command -v mpiexec || echo none); beside $PY: \
$(ls "$(dirname "$(command -v "$PY")")/mpiexec" 2>/dev/null || echo none)"
timeout 60 "$PY" - <<'EOF' || failed+=(versions)
import sys
print("python", sys.version.split()[0], sys.executable)
import numpy
print("numpy", numpy.__version__)
from mpi4py import MPI
import mpi4py
print("mpi4py", mpi4py.__version__, mpi4py.__file__, "|", MPI.Get_library_version().splitlines()[0])
try:
    import torch
    print("torch", torch.__version__, "cuda", torch.version.cuda, "available",
          torch.cuda.is_available(), "nccl", torch.cuda.nccl.version() if torch.cuda.is_available() else "-")
except Exception as e:  # noqa: BLE001
    print("torch:", e)
try:
    import cupy
    print("cupy", cupy.__version__, "devices", cupy.cuda.runtime.getDeviceCount())
    from cupy.cuda import nccl
    print("cupy nccl", nccl.get_version())
except Exception as e:  # noqa: BLE001
    print("cupy:", type(e).__name__, e)
EOF
timeout 30 mpiexec -n 2 "$PY" -c "from mpi4py import MPI; c = MPI.COMM_WORLD; \
print('mpiexec -n 2: rank', c.rank, 'sum', c.allreduce(c.rank + 1))" || failed+=("mpiexec -n 2")

step "python -m pytest -q -ra tests/gpu (at most ${TEST_TIMEOUT} s)"
# SIGINT first: pytest then prints its summary of what ran
timeout -s INT -k 30 "$TEST_TIMEOUT" "$PY" -m pytest -q -ra -p no:cacheprovider \
    --timeout 180 tests/gpu || failed+=("tests/gpu (exit $?)")

step "bench/gpu.py $BENCH_ARGS (at most ${BENCH_TIMEOUT} s)"
timeout -s INT -k 20 "$BENCH_TIMEOUT" "$PY" bench/gpu.py $BENCH_ARGS --dp-timeout 150 \
    --out "$OUT/gpu_bench.md" || failed+=("bench/gpu.py (exit $?)")

step "done"
if [ ${#failed[@]} -gt 0 ]; then
    printf 'FAILED: %s\n' "${failed[@]}"
    exit 1
fi
echo "all steps passed"
