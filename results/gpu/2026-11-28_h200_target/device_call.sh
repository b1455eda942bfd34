#!/usr/bin/env bash
# one device call: setup, CUDA tests (with the target network), target-net tests with device=auto,
# pixel cue span 100 with the learner on the GPU (fixed steps)
set -u
mkdir -p /tmp/site && python3 -m pip install -q --no-index --no-deps \
  --no-compile --no-cache-dir --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD
o=$OUT; t0=$(date +%s)
{ nvidia-smi -L; lscpu | grep "Model name"; nproc; python3 -V; python3 -c "import torch; print(torch.__version__)"; } > $o/header.txt 2>&1
echo "setup $(( $(date +%s)-t0 ))s"
timeout 170 python3 -m pytest -q -p no:cacheprovider -rs tests/cores/test_cores_cuda.py tests/agent/test_agent_cuda.py \
  tests/runtime/test_runtime_cuda.py tests/agent/test_target_net.py > $o/tests_cuda.txt 2>&1; echo "cuda rc=$? $(( $(date +%s)-t0 ))s"; tail -3 $o/tests_cuda.txt
timeout 170 python3 -m r2ac.cli bench memory --tasks cue-pixels --spans 100 --methods rtrl --seeds 0,1,2 --jobs 3 \
  --steps 400000 --minutes 2.2 --out $o/memory_cuda device=cuda > $o/memory_cuda.txt 2>&1; echo "memory rc=$? $(( $(date +%s)-t0 ))s"; tail -8 $o/memory_cuda.txt
(cd $o/memory_cuda && tar -czf ../runs_metrics.tgz runs/*/metrics.csv runs/*/summary.json runs/*/config.yaml) ; rm -rf $o/memory_cuda/runs; ls -R $o | head -20

