#!/usr/bin/env bash
# r2ac's checks for a machine with an NVIDIA GPU (docs/results.md, "On a GPU"); CI has none and skips them.
#   1. the CUDA tests (tests/*/test_*_cuda.py: exact RTRL on the GPU vs full BPTT on the CPU, float64; one
#      learner update on the GPU vs the CPU; training, checkpoints and resume with the learner on the GPU);
#   2. the agent, core and local-runtime tests with device=auto, i.e. the learner on the GPU;
#   3. `r2ac bench core` on the GPU and on the CPU side by side (learner and actor rates, memory);
#   4. `r2ac bench memory`: RTRL on the pixel delayed cue at span 100 (10x M), 3 seeds, the learner on the GPU
#      and then on the CPU, the same minutes each.
# usage: tools/gpu_check.sh OUT_DIR [MINUTES]   (PYTHON=... picks the interpreter; default python3; r2ac must be
# importable from it, e.g. the repository root on PYTHONPATH). Exit status: 0 all passed, 1 a check failed,
# 2 no CUDA device.
set -u -o pipefail
out=${1:?usage: tools/gpu_check.sh OUT_DIR [MINUTES]}
minutes=${2:-1.5}
py=${PYTHON:-python3}
mkdir -p "$out"
status=0
step() { echo; echo "== $*"; }

step "device"
"$py" -c "import torch; ok = torch.cuda.is_available(); print('torch', torch.__version__, 'cuda', torch.version.cuda,
      torch.cuda.get_device_name(0) if ok else 'no CUDA device'); raise SystemExit(0 if ok else 2)" \
    | tee "$out/device.txt" || { echo "tools/gpu_check.sh: no CUDA device: nothing to check" >&2; exit 2; }
nvidia-smi -L 2>/dev/null | tee -a "$out/device.txt"

step "CUDA tests"
"$py" -m pytest -q -p no:cacheprovider -rs tests/cores/test_cores_cuda.py tests/agent/test_agent_cuda.py \
    tests/runtime/test_runtime_cuda.py 2>&1 | tee "$out/tests_cuda.log" || status=1

step "agent, core and local-runtime tests with the learner on the GPU (device=auto)"
"$py" -m pytest -q -p no:cacheprovider -rs tests/agent tests/cores tests/runtime/test_learner_sensitivities.py \
    tests/runtime/test_pipeline.py tests/test_checkpoint.py --ignore tests/cores/test_cores_cuda.py \
    --ignore tests/agent/test_agent_cuda.py 2>&1 | tee "$out/tests_auto.log" || status=1

for dev in cuda cpu; do
    step "bench core on $dev"
    "$py" -m r2ac.cli bench core --device "$dev" --hidden 512 --input 257 --batch 32 --M 10 100 1000 \
        --repeats 5 --threads 0 --out "$out/core_$dev" || status=1
done

for dev in cuda cpu; do
    step "bench memory, pixel cue span 100, learner on $dev"
    "$py" -m r2ac.cli bench memory --tasks cue-pixels --spans 100 --methods rtrl --seeds 0,1,2 --jobs 3 \
        --minutes "$minutes" --out "$out/memory_$dev" "device=$dev" || status=1
done
exit $status
