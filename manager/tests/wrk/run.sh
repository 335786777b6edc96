#!/usr/bin/env bash
# A quick wrk run against the real manager binary: a scratch database (probactr_wrk on
# the server of $PG_URL), 300 jobs and 100,000 runs of history (seed.sql), then
# `wrk -t2 -c32 -d10s --latency` against GET /api/v1/status and GET /api/v1/jobs.
# Needs wrk, psql, a PostgreSQL and a Redis. Not part of the test suite.
set -euo pipefail
cd "$(dirname "$0")/../../.."

PG_URL="${PG_URL:-postgres://postgres@127.0.0.1:5432}"
PORT="${PORT:-18080}"
DURATION="${DURATION:-10s}"

cargo build --release -q -p probactr-manager
psql -q "$PG_URL/postgres" -c "DROP DATABASE IF EXISTS probactr_wrk" -c "CREATE DATABASE probactr_wrk"

export DATABASE_URL="$PG_URL/probactr_wrk"
export PROBACTR_MANAGER_LISTEN="127.0.0.1:$PORT"
export PROBACTR_REDIS_PREFIX="probactr-wrk:"
export PROBACTR_ADMIN_PASSWORD="wrk-benchmark-password"
export RUST_LOG="${RUST_LOG:-warn}"
target/release/probactr-manager &
manager=$!
trap 'kill "$manager" 2>/dev/null || true' EXIT

for _ in $(seq 50); do
  curl -fs "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1 && break
  sleep 0.2
done
psql -q "$DATABASE_URL" -f manager/tests/wrk/seed.sql

token=$(curl -fs -X POST "http://127.0.0.1:$PORT/api/v1/auth/token" \
  -H 'content-type: application/json' \
  -d "{\"username\":\"admin\",\"password\":\"$PROBACTR_ADMIN_PASSWORD\"}" |
  sed -E 's/.*"token":"([^"]+)".*/\1/')

for path in /api/v1/status /api/v1/jobs; do
  echo "== GET $path"
  wrk -t2 -c32 -d"$DURATION" --latency -H "Authorization: Bearer $token" "http://127.0.0.1:$PORT$path"
done
