#!/usr/bin/env bash
# Fetch larger public PyTorch profiler traces for a manual `slowlink read kineto` run (no test needs them).
# Usage: benchmarks/fetch_traces.sh [DIR]   (default: traces-public/)
set -euo pipefail
dir=${1:-traces-public}
mkdir -p "$dir"
hta=https://raw.githubusercontent.com/facebookresearch/HolisticTraceAnalysis/main/tests/data
# MIT, Copyright (c) Meta Platforms, Inc. and affiliates
curl -fsSL -o "$dir/hta-negative-queue-rank-0.json.gz" "$hta/negative_queue_length_values_check/rank0.json.gz"
curl -fsSL -o "$dir/hta-ns-resolution-rank-0.json.gz" "$hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
# DeepSeek's profile-data (no licence file in the repository: read it, do not redistribute it)
curl -fsSL -o "$dir/deepseek-train.json" https://raw.githubusercontent.com/deepseek-ai/profile-data/main/train.json
echo "fetched into $dir: slowlink read kineto $dir/<file>"
