#!/usr/bin/env bash
# Runs the chaos suite with N scenarios starting at SEED (defaults: 1000 from 1).
#   scripts/chaos.sh 1000 1
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-1000}
seed=${2:-1}
PAYBATCH_DEEP_TESTS=1 PAYBATCH_CHAOS_SCENARIOS=$count PAYBATCH_CHAOS_SEED=$seed \
  cargo test --release --test suite chaos:: -- --nocapture
