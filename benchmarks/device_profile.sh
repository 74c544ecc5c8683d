#!/usr/bin/env bash
# Prepared GPU check (issue 13, the H100 gap): where one Hopper GPU's training step goes by kernel class (gemm,
# attention, elementwise, optimizer, other, idle), measured with torch.profiler by `slowlink bench train --profile`
# and set against the step model's own split of the same step (`--cluster`, layer_parts/logits_parts). The model
# is ~7% too fast on the published H100 rows and the GEMM rates alone do not explain it (docs/workload.md): this
# shows whether the rest is elementwise kernels, attention or idle gaps between kernels on this GPU.
#
# On a lent machine (the `run` tool), from the repository root. The image has torch, numpy, scipy, networkx,
# typer, rich and PyYAML but not pydantic: carry its wheels, fetched here once (Python 3.12 on that image):
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
#     pydantic==2.14.4 pydantic_core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5
#   run: command `bash benchmarks/device_profile.sh`, carry [".whl"], timeout_s 420
# Then, on the GPU only, benchmarks/overlap_contention.py: the GEMM chunks userbuffers issues, alone and beside HBM
# copies / a 16-SM streaming kernel (the TP-overlap cost the SM-share rule leaves out), into $OUT/overlap/.
# SMALL=1 runs tiny shapes (a check of this script on a CPU). Results: $OUT/<shape>.json (bench train's rows, with
# `profile` measured and `plan.profile` modelled: seconds per step by class; both are printed too), stderr in $OUT/log.
set -euo pipefail
OUT=${OUT:-/tmp/device_profile}
mkdir -p "$OUT"
export PYTHONPATH=$PWD/src
if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    export PYTHONPATH=/tmp/site:$PYTHONPATH
fi
PY=${PY:-python3}
CLUSTER=${CLUSTER:-examples/bench-h200-node.yaml}
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv >"$OUT/gpu.csv"
# name layers hidden heads ffn seq batch vocab: a Llama-8B-wide layer at 4k tokens (the accurate TP-1 rows'
# width) and an 8k-wide one at 2k tokens (a GPT-3 175B TP-4 shard's GEMM sizes: k = 12288/4..12288)
if [[ "${SMALL:-0}" == 1 ]]; then
    SHAPES=("tiny 2 256 4 1024 128 2 4096")
else
    SHAPES=("h4096-s4096 4 4096 32 16384 4096 1 32000" "h8192-s2048 2 8192 64 32768 2048 1 32000")
fi
for s in "${SHAPES[@]}"; do
    read -r name layers hidden heads ffn seq batch vocab <<<"$s"
    args=(bench train --nproc 1 --layers "$layers" --hidden "$hidden" --heads "$heads" --ffn-hidden "$ffn"
          --seq-len "$seq" --batch "$batch" --vocab "$vocab" --steps 8 --warmup-steps 3 --profile
          --cluster "$CLUSTER" --no-results)
    echo "== $name" >>"$OUT/log"
    $PY -m slowlink "${args[@]}" --json 2>>"$OUT/log" >"$OUT/$name.json"
    $PY -c "import json,sys; r=json.load(open(sys.argv[1]))[0]; print(sys.argv[2], 'measured', r['profile']);
print('  model', r['plan']['profile'])" "$OUT/$name.json" "$name"
done
if [[ "${SMALL:-0}" != 1 ]]; then
    $PY benchmarks/overlap_contention.py "$OUT/overlap" 50 2>>"$OUT/log" | tail -n 30
fi
