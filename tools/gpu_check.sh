#!/usr/bin/env bash
# r2ac's checks for a machine with an NVIDIA GPU (docs/results.md, "On a GPU"); CI has none and skips them.
#   1. the CUDA tests (tests/*/test_*_cuda.py: exact RTRL on the GPU vs full BPTT on the CPU, float64; one
#      learner update on the GPU vs the CPU; training, checkpoints and resume with the learner on the GPU);
#   2. the agent, core and local-runtime tests with device=auto, i.e. the learner on the GPU;
#   3. `r2ac bench core` on the GPU and on the CPU side by side (learner and actor rates, memory);
#   4. `r2ac bench memory`: RTRL on the pixel delayed cue at span 100 (10x M), 3 seeds, the learner on the GPU
#      and then on the CPU, the same minutes each;
#   5. (where Ray imports) the Ray runtime's and the sweep's GPU tests (tests/runtime/test_ray_cuda.py) and the
#      Ray runtime's own tests;
#   6. (where Ray and ale-py import) `r2ac bench system` on Atari Breakout: the Ray runtime with 4 and 14 actor
#      processes, the learner process on the GPU (runtime.learner_gpus=1) and then on one CPU core.
# usage: tools/gpu_check.sh OUT_DIR [MINUTES]   (PYTHON=... picks the interpreter; default python3; r2ac must be
# importable from it, e.g. the repository root on PYTHONPATH; CHECKS="cuda auto core memory ray system" picks
# the steps, default all). Exit status: 0 all passed, 1 a check failed, 2 no CUDA device.
set -u -o pipefail
out=${1:?usage: tools/gpu_check.sh OUT_DIR [MINUTES]}
minutes=${2:-1.5}
py=${PYTHON:-python3}
checks=" ${CHECKS:-cuda auto core memory ray system} "
mkdir -p "$out"
status=0
step() { echo; echo "== $*"; }
want() { [[ "$checks" == *" $1 "* ]]; }

step "device"
"$py" -c "import torch; ok = torch.cuda.is_available(); print('torch', torch.__version__, 'cuda', torch.version.cuda,
      torch.cuda.get_device_name(0) if ok else 'no CUDA device'); raise SystemExit(0 if ok else 2)" \
    | tee "$out/device.txt" || { echo "tools/gpu_check.sh: no CUDA device: nothing to check" >&2; exit 2; }
nvidia-smi -L 2>/dev/null | tee -a "$out/device.txt"

if want cuda; then
step "CUDA tests"
"$py" -m pytest -q -p no:cacheprovider -rs tests/cores/test_cores_cuda.py tests/agent/test_agent_cuda.py \
    tests/runtime/test_runtime_cuda.py 2>&1 | tee "$out/tests_cuda.log" || status=1
fi

if want auto; then
step "agent, core and local-runtime tests with the learner on the GPU (device=auto)"
"$py" -m pytest -q -p no:cacheprovider -rs tests/agent tests/cores tests/runtime/test_learner_sensitivities.py \
    tests/runtime/test_pipeline.py tests/test_checkpoint.py --ignore tests/cores/test_cores_cuda.py \
    --ignore tests/agent/test_agent_cuda.py 2>&1 | tee "$out/tests_auto.log" || status=1
fi

want core && for dev in cuda cpu; do
    step "bench core on $dev"
    "$py" -m r2ac.cli bench core --device "$dev" --hidden 512 --input 257 --batch 32 --M 10 100 1000 \
        --repeats 5 --threads 0 --out "$out/core_$dev" || status=1
done

want memory && for dev in cuda cpu; do
    step "bench memory, pixel cue span 100, learner on $dev"
    "$py" -m r2ac.cli bench memory --tasks cue-pixels --spans 100 --methods rtrl --seeds 0,1,2 --jobs 3 \
        --minutes "$minutes" --out "$out/memory_$dev" "device=$dev" || status=1
done
if want ray || want system; then
    if "$py" -c "import ray" 2>/dev/null; then
        if want ray; then
            step "the Ray runtime and the sweep with the learner on the GPU; the Ray runtime's tests"
            "$py" -m pytest -q -p no:cacheprovider -rs tests/runtime/test_ray_cuda.py tests/runtime/test_ray_runtime.py \
                2>&1 | tee "$out/tests_ray.log" || status=1
        fi
        if want system && "$py" -c "import ale_py" 2>/dev/null; then
            for dev in cuda cpu; do
                gpus=0; [ "$dev" = cuda ] && gpus=1
                step "bench system, Atari Breakout on Ray, learner on $dev"
                "$py" -m r2ac.cli bench system --envs atari:Breakout --modes raw ray --actors 4 14 --seconds 25 \
                    --out "$out/system_$dev" "device=$dev" "runtime.learner_gpus=$gpus" || status=1
            done
        elif want system; then
            echo "tools/gpu_check.sh: ale-py does not import here: bench system skipped"
        fi
    else
        echo "tools/gpu_check.sh: Ray does not import here: the Ray checks skipped"
    fi
fi
exit $status
