#!/usr/bin/env bash
# Runs the BullMQ peer benchmark (installs its pinned packages on first use).
#   bench/peers/bullmq/run.sh drain --jobs 20000 --workers 2 --concurrency 10
set -euo pipefail
cd "$(dirname "$0")"
[ -d node_modules ] || npm ci --no-audit --no-fund --silent
exec node bench.mjs "$@"
