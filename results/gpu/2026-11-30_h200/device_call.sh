#!/usr/bin/env bash
# one device call (2026-11-30): CUDA tests (mix core, channel contrasts, pooled frames, centred observations,
# target network), Ray's GPU tests and the Ray runtime's tests, then steps/s of ColourPatch 64x64 with the
# learner on the GPU, frame_pool 1 vs auto, side by side
set -u
t0=$(date +%s); o=$OUT
mkdir -p /tmp/site && python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl 2>&1 | tail -2
[ -f .whl/ray_slim.tar.xz ] && xz -dc -T4 .whl/ray_slim.tar.xz | tar -xf - -C /tmp/site
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PATH=/tmp/site/bin:$PATH
{ nvidia-smi -L; lscpu | grep "Model name"; nproc; python3 -V; python3 -c "import torch, gymnasium; print(torch.__version__, gymnasium.__version__)"; } > $o/header.txt 2>&1
cat $o/header.txt; echo "setup $(( $(date +%s)-t0 ))s"
P="python3 -m pytest -q -p no:cacheprovider -rs"
(timeout 200 $P tests/cores/test_cores_cuda.py tests/agent/test_agent_cuda.py tests/runtime/test_runtime_cuda.py \
  tests/agent/test_target_net.py tests/agent/test_frame_pool.py > $o/tests_cuda.txt 2>&1; echo "cuda rc=$? $(( $(date +%s)-t0 ))s" >> $o/tests_cuda.txt) &
python3 -c "import ray" 2>/dev/null && (timeout 280 $P tests/runtime/test_ray_cuda.py tests/runtime/test_ray_runtime.py > $o/tests_ray.txt 2>&1; echo "ray rc=$? $(( $(date +%s)-t0 ))s" >> $o/tests_ray.txt) &
wait
tail -4 $o/tests_*.txt
B="python3 -m r2ac.cli bench memory --jobs 1 --steps 0 --methods rtrl --tasks gym:examples.colour_patch:ColourPatch --seeds 0 --minutes 1"
for fp in 1 auto; do
  timeout 120 $B --out $o/probe64_pool_$fp env.options.span=150 env.options.size=64 env.options.patch=16 model.frame_pool=$fp device=cuda > $o/probe64_pool_$fp.txt 2>&1 &
done
wait; echo "probes $(( $(date +%s)-t0 ))s"
for fp in 1 auto; do tail -3 $o/probe64_pool_$fp.txt; python3 -c "
import json,glob; [print(f, {k: v for k, v in json.load(open(f)).items() if k in ('step','updates','steps_per_s','status','learner_device')}) for f in glob.glob('$o/probe64_pool_$fp/runs/*/summary.json')]"; done
(cd $o && tar -czf probes.tgz probe64_pool_*/runs/*/metrics.csv probe64_pool_*/runs/*/summary.json probe64_pool_*/runs/*/config.yaml probe64_pool_*/*.csv 2>/dev/null); rm -rf $o/probe64_pool_1 $o/probe64_pool_auto
ls $o
