#!/usr/bin/env bash
# The throughput benchmarks of docs/performance.md. Each prints what it measured.
#   scripts/bench.sh local [ROWS]      read + validate + plan + ledger insert, vs sqlite3 .import
#   scripts/bench.sh pacing [RATE]     order-creation rate achieved against a simulator limit
#   scripts/bench.sh e2e [ROWS]        a batch at the real limits (180/min, 200 items per order)
#   scripts/bench.sh smoke             tiny versions of local and pacing (CI: checks they work)
# Needs: cargo, sqlite3, curl, jq (Debian packages).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-smoke}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT

# PAYBATCH_BENCH_PROFILE=dev uses the debug build (CI's smoke run: it only checks that the
# benchmark code works); figures are taken with the default, release.
if [ "${PAYBATCH_BENCH_PROFILE:-release}" = dev ]; then
  cargo build --quiet --bin paybatch --example gen_batch
  bin=$PWD/target/debug/paybatch
  gen=$PWD/target/debug/examples/gen_batch
else
  cargo build --release --quiet --bin paybatch --example gen_batch
  bin=$PWD/target/release/paybatch
  gen=$PWD/target/release/examples/gen_batch
fi
big=100000000000

start_sim() { # args: extra sim flags; sets $base and $admin
  "$bin" sim serve --addr 127.0.0.1:0 --state "$work/sim.db" \
    --balance USD=$big --balance EUR=$big --balance GBP=$big --balance CAD=$big "$@" \
    > "$work/sim.out" 2>&1 &
  for _ in $(seq 1 100); do
    grep -q "listening on" "$work/sim.out" 2>/dev/null && break
    sleep 0.1
  done
  base=$(grep -o 'http://[^ ]*' "$work/sim.out" | head -1)
  admin=${base%/v2}
}

key_file() {
  printf 'xx_sim_default_key' > "$work/key"; chmod 600 "$work/key"; echo "$work/key"
}

peak_and_time() { # runs "$@" under /usr/bin/time; prints "seconds peak_kb"
  /usr/bin/time -f "%e %M" -o "$work/time" "$@" > /dev/null 2>&1 || true
  tail -n 1 "$work/time"
}

local_cost() {
  rows=${1:-1000000}
  "$gen" "$rows" > "$work/batch.csv"
  start_sim --rate-limit 0
  k=$(key_file)
  read -r floor _ < <(peak_and_time sqlite3 "$work/floor.db" ".import --csv $work/batch.csv t")
  # Once with the default (one row an order), once as large batches should run (200).
  for items in 1 200; do
    rm -f "$work"/ledger.db*
    read -r secs peak < <(peak_and_time "$bin" run "$work/batch.csv" --base-url "$base" \
      --api-key-file "$k" --ledger "$work/ledger.db" --plan-only --quiet --items-per-order "$items")
    planned=$(sqlite3 "$work/ledger.db" "select count(*) from rows where state='PLANNED'")
    orders=$(sqlite3 "$work/ledger.db" "select count(*) from orders")
    size=$(( $(stat -c %s "$work/ledger.db") / 1048576 ))
    ratio=n/a
    if [ "$(echo "$floor > 0" | bc)" = 1 ]; then ratio=$(echo "scale=2; $secs / $floor" | bc); fi
    rate=n/a
    if [ "$(echo "$secs > 0" | bc)" = 1 ]; then rate=$(echo "$rows / $secs" | bc); fi
    echo "local: rows=$rows items-per-order=$items planned=$planned orders=$orders ledger=${size}MB paybatch=${secs}s peak=$((peak / 1024))MB sqlite3-import=${floor}s ratio=$ratio rows/s=$rate"
  done
  # What no ledger of this file can write less of: its cells and the exact bodies of its orders
  # (re-sent byte for byte after a crash), imported by sqlite3 alone, without a check, an index,
  # a state or a key. Taken from the last run (200 items an order).
  sqlite3 -csv "$work/ledger.db" "select idempotency_key, body from orders" > "$work/bodies.csv"
  read -r both _ < <(peak_and_time sqlite3 "$work/data.db" ".import --csv $work/batch.csv t" \
    ".import --csv $work/bodies.csv u")
  bodies=$(( $(stat -c %s "$work/bodies.csv") / 1048576 ))
  ratio=n/a
  if [ "$(echo "$floor > 0" | bc)" = 1 ]; then ratio=$(echo "scale=2; $both / $floor" | bc); fi
  echo "local: data floor (sqlite3 .import of the file and of the ${bodies}MB of order bodies, items-per-order=200)=${both}s ratio=$ratio"
}

pacing() {
  rate=${1:-600}
  rows=$((rate / 2))
  "$gen" "$rows" > "$work/batch.csv"
  start_sim --rate-limit "$rate" --latency-ms 100 --processing-min-ms 50 --processing-max-ms 200
  k=$(key_file)
  "$bin" run "$work/batch.csv" --base-url "$base" --api-key-file "$k" \
    --ledger "$work/ledger.db" --order-rate "$rate" --concurrency 16 --quiet || true
  span=$(sqlite3 "$work/ledger.db" "select (julianday(max(first_sent_at)) - julianday(min(first_sent_at))) * 86400 from orders")
  orders=$(sqlite3 "$work/ledger.db" "select count(*) from orders")
  s429=$(curl -s "$admin/_sim/stats" | jq .answered_429)
  achieved=$(echo "scale=1; ($orders - 1) * 60 / $span" | bc)
  echo "pacing: limit=${rate}/min orders=$orders span=${span}s achieved=${achieved}/min ratio=$(echo "scale=3; $achieved / $rate" | bc) 429s=$s429"
  polls
}

polls() {
  stats=$(curl -s "$admin/_sim/stats")
  list=$(echo "$stats" | jq '.requests["GET /order"] // 0')
  one=$(echo "$stats" | jq '.requests["GET /order/{id}"] // 0')
  orders=$(echo "$stats" | jq .orders_created)
  echo "polling: orders=$orders list-requests=$list order-requests=$one per-order=$(echo "scale=2; ($list + $one) / $orders" | bc)"
}

e2e() {
  rows=${1:-100000}
  "$gen" "$rows" > "$work/batch.csv"
  start_sim --rate-limit 180
  k=$(key_file)
  t0=$(date +%s.%N)
  "$bin" run "$work/batch.csv" --base-url "$base" --api-key-file "$k" \
    --ledger "$work/ledger.db" --items-per-order 200 --quiet || true
  t1=$(date +%s.%N)
  orders=$(sqlite3 "$work/ledger.db" "select count(*) from orders")
  done_rows=$(sqlite3 "$work/ledger.db" "select count(*) from rows where state='COMPLETED'")
  bound=$(echo "scale=1; $orders / 3" | bc)
  took=$(echo "$t1 - $t0" | bc)
  s429=$(curl -s "$admin/_sim/stats" | jq .answered_429)
  echo "e2e: rows=$rows completed=$done_rows orders=$orders took=${took}s bound=${bound}s ratio=$(echo "scale=3; $took / $bound" | bc) 429s=$s429"
  polls
}

case "$mode" in
  local) local_cost "${2:-1000000}" ;;
  pacing) pacing "${2:-600}" ;;
  e2e) e2e "${2:-100000}" ;;
  smoke) local_cost 2000; kill %1 2>/dev/null || true; rm -f "$work"/*.db*; pacing 120 ;;
  *) echo "usage: $0 local|pacing|e2e|smoke [N]" >&2; exit 2 ;;
esac
