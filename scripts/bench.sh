#!/usr/bin/env bash
# The speed benchmarks of docs/performance.md. Each mode ends with one line saying what it
# measured (the lines before it, on stderr, are the single runs).
#   scripts/bench.sh naive [ROWS] [RUNS]   1: paybatch at its defaults vs scripts/naive_payout.py
#   scripts/bench.sh large [ROWS] [RUNS]   2: a large batch at the defaults (300 orders a minute)
#   scripts/bench.sh backtoback [ROWS] [ITEMS]
#                                          3: one batch run twice, as batches a and b, one ledger
#   scripts/bench.sh local [ROWS]          4: read + validate + plan + ledger insert, vs sqlite3
#   scripts/bench.sh repeats [ROWS] [RUNS]
#                                          4 again on a ledger already holding ROWS paid rows of
#                                          an earlier batch: checked against them, side by side
#                                          with the same ledger where they are another service's
#   scripts/bench.sh pacing [RATE] [ORDERS]
#                                          the sustained order rate against a simulator limit
#   scripts/bench.sh window [ORDERS] [RUNS]
#                                          the read of the service's order window (30 days) that
#                                          a new batch makes first, over ORDERS orders
#   scripts/bench.sh wide [ROWS] [COLUMNS]
#                                          peak memory of validate and run on very wide rows
#                                          (COLUMNS columns, most of them carried through), a
#                                          file paid and one refused (a problem in every row)
#   scripts/bench.sh approved [ROWS]       the plan validate keeps (time, size, memory), and the
#                                          refusal of a changed file against it, side by side
#                                          with the refusal of a digest the ledger did not keep
#   scripts/bench.sh payouts [ROWS] [ITEMS]
#                                          `paybatch payouts` on a paid batch of ROWS rows in
#                                          ITEMS-row orders, at 100 ms latency: time, reads per
#                                          order, reads a second; then a second call
#   scripts/bench.sh period [ROWS] [RUNS] [BATCHES]
#                                          `report --since` over BATCHES monthly batches of ROWS
#                                          rows (one paid, its rows copied in SQL under other
#                                          names and dates) writing --out, --html and --journal,
#                                          against BATCHES x `report --batch NAME --out`
#   scripts/bench.sh journal [ROWS] [RUNS] [BATCHES]
#                                          the same period's `report --since --journal`, plain
#                                          against --journal-format double-entry: time, peak
#                                          memory, ratio
#   scripts/bench.sh foreign [ORDERS] [ITEMS] [RUNS]
#                                          the check against the service's orders when a ledger
#                                          meets ORDERS finished orders of other ledgers, ITEMS
#                                          rows each: `validate` on a new ledger (every order
#                                          read whole once), then again on the same ledger
#   scripts/bench.sh resume [ROWS] [RUNS] [STOP] [ORDERS] [ITEMS]
#                                          a run of ROWS rows at the defaults stopped (Ctrl-C)
#                                          after STOP seconds, then resumed: the time of the
#                                          check against the service's orders in the resume,
#                                          and its list reads, against the resume's total; with
#                                          ORDERS orders of ITEMS rows of other ledgers seeded
#   scripts/bench.sh smoke                 tiny versions of every mode (CI: checks they work)
# Polling (5: status requests per order) is printed by naive and large.
# Needs: cargo, python3, sqlite3, curl, jq, bc (Debian packages).
# Every timed run gets a simulator of its own (a new state and a new rate window), so the runs
# are looped here rather than under hyperfine, and each is checked against the simulator's
# ground truth; a median is the middle of the sorted run times.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-smoke}
# Extra flags for every timed `paybatch run` (e.g. PAYBATCH_BENCH_RUN_FLAGS="--concurrency 16" to
# compare a setting with the defaults); none by default: the benchmarks measure the defaults.
read -ra run_flags <<< "${PAYBATCH_BENCH_RUN_FLAGS:-}"
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT

# PAYBATCH_BENCH_PROFILE=dev uses the debug build (CI's smoke run: it only checks that the
# benchmark code works); figures are taken with the default, release. CARGO_TARGET_DIR is
# honoured.
target=${CARGO_TARGET_DIR:-$PWD/target}
if [ "${PAYBATCH_BENCH_PROFILE:-release}" = dev ]; then
  cargo build --quiet --bin paybatch --example gen_batch --example read_window
  bin=$target/debug/paybatch
  gen=$target/debug/examples/gen_batch
  reader=$target/debug/examples/read_window
else
  cargo build --release --quiet --bin paybatch --example gen_batch --example read_window
  bin=$target/release/paybatch
  gen=$target/release/examples/gen_batch
  reader=$target/release/examples/read_window
fi
big=100000000000
# The service as benchmarks 1 to 3 meet it: the simulator's default limit (300 order creations
# in any minute), 100 ms latency on every request, async orders PROCESSING 0.5 to 3 s.
service=(--latency-ms 100 --processing-min-ms 500 --processing-max-ms 3000)
sim_pid=

start_sim() { # args: extra sim flags; sets $base and $admin
  rm -f "$work"/sim.db* "$work/sim.out"
  restart_sim "$@"
}

restart_sim() { # as start_sim, on the state the last simulator left (at $sim_addr)
  rm -f "$work/sim.out"
  "$bin" sim serve --addr "${sim_addr:-127.0.0.1:0}" --state "$work/sim.db" \
    --balance USD=$big --balance EUR=$big --balance GBP=$big --balance CAD=$big "$@" \
    > "$work/sim.out" 2>&1 &
  sim_pid=$!
  # Up to $sim_wait tenths of a second (10 s unless a mode seeds a large state).
  for _ in $(seq 1 "${sim_wait:-100}"); do
    grep -q "listening on http://" "$work/sim.out" 2>/dev/null && break
    sleep 0.1
  done
  base=$(grep -o 'http://[^ ]*' "$work/sim.out" | head -1)
  if [ -z "$base" ]; then echo "the simulator did not start:" >&2; cat "$work/sim.out" >&2; exit 1; fi
  admin=${base%/v2}
}

stop_sim() {
  if [ -n "$sim_pid" ]; then
    kill "$sim_pid" 2>/dev/null || true
    wait "$sim_pid" 2>/dev/null || true
    sim_pid=
  fi
}

key_file() {
  printf 'xx_sim_default_key' > "$work/key"; chmod 600 "$work/key"; echo "$work/key"
}

peak_and_time() { # runs "$@" under /usr/bin/time; prints "seconds peak_kb"
  /usr/bin/time -f "%e %M" -o "$work/time" "$@" > /dev/null 2>&1 || true
  tail -n 1 "$work/time"
}

wall() { # runs "$@" (output to $work/cmd.out); prints its wall time in seconds
  local t0 t1
  t0=$(date +%s.%N)
  "$@" > "$work/cmd.out" 2>&1 || true
  t1=$(date +%s.%N)
  echo "scale=2; ($t1 - $t0) / 1" | bc
}

median() { # args: numbers; prints the middle one (the lower middle of an even count)
  printf '%s\n' "$@" | sort -g | sed -n "$(( ($# + 1) / 2 ))p"
}

ratio() { # a / b to $3 decimals, n/a when b is 0 or either is not a number
  local num='^([0-9]+([.][0-9]*)?|[.][0-9]+)$'
  if [[ $1 =~ $num && $2 =~ $num ]] && [ "$(echo "$2 > 0" | bc)" = 1 ]; then echo "scale=${3:-2}; $1 / $2" | bc; else echo n/a; fi
}

polls() { # prints "list-requests order-requests orders per-order" from the simulator's stats
  local stats list one orders
  stats=$(curl -s "$admin/_sim/stats")
  list=$(echo "$stats" | jq '.requests["GET /order"] // 0')
  one=$(echo "$stats" | jq '.requests["GET /order/{id}"] // 0')
  orders=$(echo "$stats" | jq .orders_created)
  echo "$list $one $orders $(ratio "$((list + one))" "$orders")"
}

s429() { curl -s "$admin/_sim/stats" | jq .answered_429; }

paid_once() { # args: rows, result CSV (reference, status columns); prints yes or what is wrong
  # From the simulator's ground truth: every order COMPLETED and one item per row in all; from
  # the result file: every row COMPLETED, each reference once.
  curl -s "$admin/_sim/orders" > "$work/sim-orders.json"
  python3 - "$1" "$2" "$work/sim-orders.json" <<'PY'
import csv, json, sys
rows, result, orders = int(sys.argv[1]), sys.argv[2], json.load(open(sys.argv[3]))
if isinstance(orders, dict):
    orders = orders.get("orders", orders.get("data", []))
items = sum(len(o.get("items") or []) for o in orders)
unfinished = sum(1 for o in orders if o.get("status") != "COMPLETED")
with open(result, newline="") as f:
    done = [r["reference"] for r in csv.DictReader(f) if r["status"] == "COMPLETED"]
problems = []
if items != rows:
    problems.append(f"sim-items={items}")
if unfinished:
    problems.append(f"sim-not-completed={unfinished}")
if len(done) != rows or len(set(done)) != rows:
    problems.append(f"completed={len(done)}/distinct={len(set(done))}")
print("yes" if not problems else "NO(" + ",".join(problems) + ")")
PY
}

# 1. paybatch at its defaults (no tuning flag) against the sequential script, RUNS times each,
# each run against a new simulator.
naive_vs() {
  local rows=${1:-300} runs=${2:-3} k i t ok p out list one orders
  local -a ours=() theirs=() ppo=() checks=()
  "$gen" "$rows" > "$work/batch.csv"
  for i in $(seq 1 "$runs"); do
    start_sim "${service[@]}"
    k=$(key_file)
    rm -f "$work"/ledger.db* "$work/result.csv"
    t=$(wall "$bin" run "$work/batch.csv" --base-url "$base" --api-key-file "$k" \
      --ledger "$work/ledger.db" --out "$work/result.csv" --quiet ${run_flags[@]+"${run_flags[@]}"})
    ok=$(paid_once "$rows" "$work/result.csv")
    read -r list one orders p < <(polls)
    out="paybatch run $i: ${t}s orders=$orders paid-once=$ok 429s=$(s429) list-requests=$list order-requests=$one polls-per-order=$p"
    echo "  $out" >&2
    ours+=("$t"); ppo+=("$p"); checks+=("$ok")
    stop_sim

    start_sim "${service[@]}"
    k=$(key_file)
    t=$(wall python3 scripts/naive_payout.py "$work/batch.csv" --base-url "$base" \
      --api-key-file "$k" --batch "run$i" --out "$work/naive.csv")
    ok=$(paid_once "$rows" "$work/naive.csv")
    echo "  naive run $i: ${t}s paid-once=$ok 429s=$(s429) ($(cat "$work/cmd.out"))" >&2
    theirs+=("$t"); checks+=("$ok")
    stop_sim
  done
  local mo mt all=yes
  mo=$(median "${ours[@]}"); mt=$(median "${theirs[@]}")
  for ok in "${checks[@]}"; do [ "$ok" = yes ] || all=no; done
  echo "naive: rows=$rows runs=$runs paybatch=${mo}s (${ours[*]}) naive=${mt}s (${theirs[*]}) speed-up=$(ratio "$mt" "$mo" 1)x paid-once=$all polls-per-order=$(median "${ppo[@]}")"
  [ "$all" = yes ] # a run that paid a row twice, or not at all, fails the benchmark
}

# 2. A large batch at the defaults (no tuning flag), RUNS times.
large() {
  local rows=${1:-100000} runs=${2:-3} k i t n4 p done_rows orders list one
  local -a times=() ppo=() t429=()
  "$gen" "$rows" > "$work/batch.csv"
  for i in $(seq 1 "$runs"); do
    start_sim "${service[@]}"
    k=$(key_file)
    rm -f "$work"/ledger.db*
    t=$(wall "$bin" run "$work/batch.csv" --base-url "$base" --api-key-file "$k" \
      --ledger "$work/ledger.db" --quiet ${run_flags[@]+"${run_flags[@]}"})
    done_rows=$(sqlite3 "$work/ledger.db" "select count(*) from rows where state='COMPLETED'")
    n4=$(s429)
    read -r list one orders p < <(polls)
    echo "  large run $i: ${t}s completed=$done_rows orders=$orders 429s=$n4 list-requests=$list order-requests=$one polls-per-order=$p" >&2
    times+=("$t"); ppo+=("$p"); t429+=("$n4")
    stop_sim
    if [ "$done_rows" != "$rows" ]; then echo "large: only $done_rows of $rows rows COMPLETED" >&2; return 1; fi
  done
  echo "large: rows=$rows runs=$runs took=$(median "${times[@]}")s (${times[*]}) completed=$done_rows orders=$orders 429s=${t429[*]} polls-per-order=$(median "${ppo[@]}")"
}

# 3. One batch file run twice in a row under two batch names on one ledger (the second run's
# pacer counts the first run's sends). ITEMS: --items-per-order (default: none, i.e. auto).
backtoback() {
  local rows=${1:-300} items=${2:-} k b t done_rows orders
  local -a flags=() times=() summary=()
  [ -n "$items" ] && flags=(--items-per-order "$items")
  "$gen" "$rows" > "$work/batch.csv"
  start_sim "${service[@]}"
  k=$(key_file)
  rm -f "$work"/ledger.db*
  for b in a b; do
    # The same file twice, on purpose: the second batch pays every row again.
    t=$(wall "$bin" run "$work/batch.csv" --batch "$b" --base-url "$base" --api-key-file "$k" \
      --ledger "$work/ledger.db" "${flags[@]}" --allow-repeats --quiet)
    done_rows=$(sqlite3 "$work/ledger.db" "select count(*) from rows r join batches b on b.id = r.batch_id where b.name = '$b' and r.state = 'COMPLETED'")
    orders=$(sqlite3 "$work/ledger.db" "select count(*) from orders o join batches b on b.id = o.batch_id where b.name = '$b'")
    echo "  batch $b: ${t}s completed=$done_rows orders=$orders 429s-so-far=$(s429)" >&2
    times+=("$t"); summary+=("$b:${t}s/$orders-orders/$done_rows-completed")
  done
  echo "backtoback: rows=$rows items-per-order=${items:-auto} ${summary[*]} 429s=$(s429)"
  stop_sim
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
    grouped=$secs
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
  # Benchmark 4's figure: the run at 200 items an order against the data floor of the same run.
  echo "local: paybatch at 200 items an order=${grouped}s data-floor=${both}s paybatch-vs-floor=$(ratio "$grouped" "$both")x"
}


# Benchmark 4 on a ledger that already holds ROWS rows of an earlier batch, paid (other
# references, other recipients), side by side: the same binary on two copies of that ledger, one
# where the earlier batch is of this service (its references and the recipients it paid are
# checked: every one is read before the file, from indexes, and every row of the file is looked
# up) and one where it is of another service (nothing to check, the same ledger size). RUNS times
# each, in turns, each run on a fresh copy. The earlier batch is planned by paybatch and marked
# paid with sqlite3 (its likeness values stand for other recipients).
repeat_cost() {
  local rows=${1:-1000000} runs=${2:-3} i secs peak which
  local -a new_t=() old_t=() new_m=() old_m=()
  "$gen" "$rows" > "$work/batch.csv"
  sed '1!{s/^/OLD/;s/employee/former/}' "$work/batch.csv" > "$work/earlier.csv"
  start_sim --rate-limit 0
  k=$(key_file)
  rm -f "$work"/old.db* "$work"/new.db*
  "$bin" run "$work/earlier.csv" --batch earlier --base-url "$base" --api-key-file "$k" \
    --ledger "$work/new.db" --plan-only --quiet --items-per-order 200 || true
  sqlite3 "$work/new.db" "update rows set state = 'COMPLETED', completed_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), likeness = case when json_extract(spec, '$.email') is not null then random() end"
  cp "$work/new.db" "$work/old.db"
  sqlite3 "$work/old.db" "update batches set base_url = 'http://127.0.0.1:9/v2'"
  echo "repeats: earlier batch of $(sqlite3 "$work/new.db" "select count(*) from rows where state = 'COMPLETED'") paid rows ($(sqlite3 "$work/new.db" "select count(*) from rows where likeness is not null") with an address)" >&2
  for i in $(seq "$runs"); do
    for which in old new; do
      cp "$work/$which.db" "$work/run.db"
      rm -f "$work"/run.db-*
      read -r secs peak < <(peak_and_time "$bin" run "$work/batch.csv" --batch "now$i" \
        --base-url "$base" --api-key-file "$k" --ledger "$work/run.db" --plan-only --quiet \
        --items-per-order 200)
      planned=$(sqlite3 "$work/run.db" "select count(*) from rows r join batches b on b.id = r.batch_id where b.name = 'now$i' and r.state = 'PLANNED'")
      echo "repeats: run $i $([ "$which" = old ] && echo unchecked || echo checked): ${secs}s peak=$((peak / 1024))MB planned=$planned" >&2
      if [ "$which" = old ]; then old_t+=("$secs"); old_m+=("$peak"); else new_t+=("$secs"); new_m+=("$peak"); fi
    done
  done
  local ot nt om nm
  ot=$(median "${old_t[@]}"); nt=$(median "${new_t[@]}")
  om=$(median "${old_m[@]}"); nm=$(median "${new_m[@]}")
  echo "repeats: rows=$rows earlier-rows=$rows unchecked=${ot}s/$((om / 1024))MB checked=${nt}s/$((nm / 1024))MB time-ratio=$(ratio "$nt" "$ot")x memory-ratio=$(ratio "$nm" "$om")x (medians of $runs)"
}

# The order rate a run sustains against a simulator limit of RATE a minute (--order-rate RATE,
# one row an order). The pacer may send RATE orders at once after a quiet minute, then each
# send waits for the send it replaces to be a minute old (plus a second of margin): ORDERS
# (default 3 x RATE) takes at best (ORDERS/RATE - 1) minutes from first send to last. The
# sustained rate counts the orders after the first RATE over that span; a client that keeps to
# the limit and uses every slot of it reaches RATE. Also printed: the most sends the ledger
# records in any 60 s.
pacing() {
  local rate=${1:-600} n=${2:-} k span orders peak sustained best
  n=${n:-$((rate * 3))}
  "$gen" "$n" > "$work/batch.csv"
  start_sim --rate-limit "$rate" --latency-ms 100 --processing-min-ms 50 --processing-max-ms 200
  k=$(key_file)
  rm -f "$work"/ledger.db*
  "$bin" run "$work/batch.csv" --base-url "$base" --api-key-file "$k" \
    --ledger "$work/ledger.db" --order-rate "$rate" --items-per-order 1 --concurrency 16 \
    --quiet || true
  span=$(sqlite3 "$work/ledger.db" "select round((julianday(max(first_sent_at)) - julianday(min(first_sent_at))) * 86400, 2) from orders")
  orders=$(sqlite3 "$work/ledger.db" "select count(*) from orders")
  peak=$(sqlite3 "$work/ledger.db" "with t(s) as (select julianday(first_sent_at) * 86400 from orders) select max((select count(*) from t b where b.s >= a.s and b.s < a.s + 60)) from t a")
  best=$(( (orders + rate - 1) / rate * 60 - 60 ))
  sustained=n/a
  if [ "$orders" -gt "$rate" ]; then
    sustained=$(ratio "$(( (orders - rate) * 60 ))" "$span" 1)
  fi
  echo "pacing: limit=${rate}/min orders=$orders span=${span}s best-span=${best}s sustained=${sustained}/min ratio=$(ratio "$sustained" "$rate" 3) peak-60s=$peak 429s=$(s429)"
  stop_sim
}

# The read of the service's order window a batch new to a ledger makes before it sends anything
# (src/batch/window.rs): ORDERS finished orders of the last 20 days (`sim serve --seed-orders`,
# a fifth each of three paybatch forms and two others), every request answered after 100 ms,
# read RUNS times by examples/read_window.rs (a read changes nothing: one simulator for all
# runs). The read needs ORDERS / 500 pages, one after the other (each page's cursor comes with
# it); for 20,000 orders the target is at most 40 pages and 5 s.
window_read() {
  local orders=${1:-20000} runs=${2:-3} k i line pages secs kept naming want
  local -a times=()
  want=$(( (orders + 499) / 500 ))
  start_sim --latency-ms 100 --seed-orders "$orders"
  k=$(key_file)
  for i in $(seq 1 "$runs"); do
    line=$("$reader" "$base" "$k" seed-1)
    echo "  window run $i: $line" >&2
    pages=$(echo "$line" | grep -o 'pages=[0-9]*' | cut -d= -f2)
    secs=$(echo "$line" | grep -o 'seconds=[0-9.]*' | cut -d= -f2)
    kept=$(echo "$line" | grep -o 'kept=[0-9]*' | cut -d= -f2)
    naming=$(echo "$line" | grep -o 'naming=[0-9]*' | cut -d= -f2)
    times+=("$secs")
    if [ "$pages" != "$want" ] || ! echo "$line" | grep -q 'complete=true'; then
      echo "window: read $pages pages (want $want), or not complete: $line" >&2; stop_sim; return 1
    fi
  done
  stop_sim
  echo "window: orders=$orders runs=$runs pages=$pages took=$(median "${times[@]}")s (${times[*]}) kept=$kept seed-1-orders=$naming latency=100ms"
}

# Very wide rows: ROWS rows of COLUMNS columns (reference, product_code, face_value, currency,
# email, then carried-through columns, empty), 600 x 120,000 = 73 MB by default. One file with
# every row valid, one with a problem in every row (an amount that is not one); `validate` and
# `run` of each (the refused file's run also with --skip-invalid: every row recorded INVALID
# and written to the result file), each on a new ledger against one simulator (no limit). Prints
# each command's time and peak resident set; fails when a run does not end as it should.
wide() {
  local rows=${1:-600} columns=${2:-120000} k which cmd code want secs peak worst=0
  python3 - "$rows" "$columns" "$work" <<'PY'
import sys
rows, columns, work = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
header = "reference,product_code,face_value,currency,email," + ",".join(
    f"x{i}" for i in range(5, columns))
carried = "," * (columns - 5)
for name, amount in (("valid", "10"), ("refused", "ten")):
    with open(f"{work}/wide-{name}.csv", "w") as f:
        f.write(header + "\n")
        for r in range(rows):
            f.write(f"W-{r},AMZ-US,{amount},USD,w{r}@example.com{carried}\n")
PY
  start_sim --rate-limit 0 --processing-min-ms 50 --processing-max-ms 200
  k=$(key_file)
  local size=$(( $(stat -c %s "$work/wide-valid.csv") / 1048576 ))
  local -a summary=()
  for which in valid refused; do
    for cmd in validate run run--skip-invalid; do
      [ "$which" = valid ] && [ "$cmd" = run--skip-invalid ] && continue
      local -a flags=()
      case "$cmd" in
        run) flags=(--out "$work/wide-result.csv") ;;
        run--skip-invalid) flags=(--out "$work/wide-result.csv" --skip-invalid) ;;
      esac
      rm -f "$work"/wide.db* "$work/wide-result.csv"
      /usr/bin/time -f "%e %M" -o "$work/time" "$bin" "${cmd%%--*}" "$work/wide-$which.csv" \
        --base-url "$base" --api-key-file "$k" --ledger "$work/wide.db" \
        ${flags[@]+"${flags[@]}"} --quiet > /dev/null 2> "$work/cmd.err" && code=0 || code=$?
      read -r secs peak < <(tail -n 1 "$work/time")
      case "$which/$cmd" in
        valid/*) want=0 ;;
        refused/run--skip-invalid) want=4 ;;
        *) want=3 ;;
      esac
      echo "  wide $which $cmd: ${secs}s peak=$((peak / 1024))MB exit=$code" >&2
      if [ "$code" != "$want" ]; then
        echo "wide: $which $cmd ended $code, not $want:" >&2; tail -5 "$work/cmd.err" >&2; return 1
      fi
      [ "$peak" -gt "$worst" ] && worst=$peak
      summary+=("$which-$cmd=$((peak / 1024))MB/${secs}s")
    done
  done
  stop_sim
  echo "wide: rows=$rows columns=$columns file=${size}MB ${summary[*]} worst-peak=$((worst / 1024))MB"
}

# The approved plan of ROWS rows: `validate` on a new ledger (time and peak memory), the plan
# it kept (its size in the ledger, and the time to keep it, from the -v log), then a run of the
# file with 30 addresses changed, one row taken out and one added, refused against that plan (the
# file read again and compared: time and peak memory), side by side with the refusal of a
# digest the ledger did not keep (the same run but for the comparison).
approved_cost() {
  local rows=${1:-1000000} k vsecs vpeak digest size keep rsecs rpeak usecs upeak named
  "$gen" "$rows" > "$work/batch.csv"
  start_sim --rate-limit 0
  k=$(key_file)
  rm -f "$work"/ledger.db*
  /usr/bin/time -f "%e %M" -o "$work/time" "$bin" -v validate "$work/batch.csv" \
    --base-url "$base" --api-key-file "$k" --ledger "$work/ledger.db" \
    > "$work/validate.out" 2> "$work/validate.err" || true
  read -r vsecs vpeak < <(tail -n 1 "$work/time")
  digest=$(grep -o 'plan digest: sha256:[0-9a-f]*' "$work/validate.out" | cut -d' ' -f3)
  if [ -z "$digest" ]; then echo "approved: validate printed no digest:" >&2; cat "$work/validate.err" >&2; return 1; fi
  size=$(sqlite3 "$work/ledger.db" "select length(plan) + length(context) from approved_plans")
  keep=$(grep -o 'approved plan kept: .*' "$work/validate.err" | sed 's/\x1b\[[0-9;]*m//g' | tail -n 1)
  echo "approved: validate ${vsecs}s peak=$((vpeak / 1024))MB; $keep" >&2
  # 30 addresses changed (every 1000th row up to the 30th), the second row out, a row added.
  awk -F, -v OFS=, 'NR == 3 { next } NR > 1 && NR % 1000 == 0 && NR <= 30000 && $5 != "" { $5 = "changed" NR "@example.com" } { print }
    END { print "EMP-NEW-2026-11,AMZ-US,5.00,USD,new@example.com,Sales" }' \
    "$work/batch.csv" > "$work/changed.csv"
  read -r rsecs rpeak < <(peak_and_time "$bin" run "$work/changed.csv" --batch batch \
    --base-url "$base" --api-key-file "$k" --ledger "$work/ledger.db" --plan-only --quiet \
    --expect-digest "$digest")
  "$bin" run "$work/changed.csv" --batch batch --base-url "$base" --api-key-file "$k" \
    --ledger "$work/ledger.db" --plan-only --quiet --expect-digest "$digest" 2> "$work/run.err" || true
  named=$(grep -cE '^  [0-9]+ rows? (added|removed|changed):' "$work/run.err" || true)
  read -r usecs upeak < <(peak_and_time "$bin" run "$work/changed.csv" --batch batch \
    --base-url "$base" --api-key-file "$k" --ledger "$work/ledger.db" --plan-only --quiet \
    --expect-digest "sha256:$(printf '0%.0s' $(seq 64))")
  echo "approved: rows=$rows validate=${vsecs}s/$((vpeak / 1024))MB kept=$((size / 1024))KiB ($(ratio "$size" "$rows" 1) bytes a row) refused-with-changes=${rsecs}s/$((rpeak / 1024))MB refused-unknown=${usecs}s/$((upeak / 1024))MB lists=$named"
}

# `paybatch payouts` on a batch paid in ROWS/ITEMS orders: the batch is paid against a fast
# simulator, which is then started again on the same state with 100 ms latency on every request
# for the reads. Prints the time, the order reads (GET /order/{id}) per order, the reads a
# second, and what a second call right after reads.
payouts_cost() {
  local rows=${1:-100000} items=${2:-200} k t orders reads again rate
  "$gen" "$rows" > "$work/batch.csv"
  start_sim --rate-limit 0 --processing-min-ms 0 --processing-max-ms 50
  k=$(key_file)
  rm -f "$work"/ledger.db*
  "$bin" run "$work/batch.csv" --batch batch --base-url "$base" --api-key-file "$k" \
    --ledger "$work/ledger.db" --items-per-order "$items" --order-rate 1000000 --quiet \
    > /dev/null 2>&1 || true
  stop_sim
  orders=$(sqlite3 "$work/ledger.db" "select count(*) from orders where state = 'COMPLETED'")
  # The same address: the batch is bound to it.
  sim_addr=${admin#http://}
  restart_sim --latency-ms 100
  sim_addr=
  t=$(wall "$bin" payouts --batch batch --base-url "$base" --api-key-file "$k" \
    --ledger "$work/ledger.db" --quiet --json)
  reads=$(curl -s "$admin/_sim/stats" | jq '.requests["GET /order/{id}"] // 0')
  rate=$(ratio "$reads" "$t" 1)
  cp "$work/cmd.out" "$work/first.json"
  wall "$bin" payouts --batch batch --base-url "$base" --api-key-file "$k" \
    --ledger "$work/ledger.db" --quiet --json > /dev/null
  again=$(( $(curl -s "$admin/_sim/stats" | jq '.requests["GET /order/{id}"] // 0') - reads ))
  stop_sim
  echo "  payouts first call: $(head -c 400 "$work/first.json")" >&2
  if [ "$reads" -gt "$orders" ] || [ "$orders" = 0 ] || ! grep -q '"orders_read"' "$work/first.json"; then
    echo "payouts: $reads reads for $orders orders" >&2; cat "$work/first.json" >&2; return 1
  fi
  echo "payouts: rows=$rows items-per-order=$items orders=$orders took=${t}s reads=$reads reads-per-order=$(ratio "$reads" "$orders") reads-per-second=$rate second-call-reads=$again"
}

# A period's report against one report per batch. One batch of ROWS rows is paid (200 items an
# order, no rate limit); its batch, orders, rows and payouts are then copied in SQL BATCHES - 1
# times under other names, keys and order ids, and each batch is made to complete on the 15th
# of its own month of 2026 (the report only reads). Then, RUNS times each, in turns: `report
# --since 2026-01-01 --until 2026-12-31` writing the period's CSV, HTML page and journal, and
# BATCHES x `report --batch NAME --out` (one batch's result file each).
period_ledger() { # args: rows batches; makes $work/ledger.db with BATCHES monthly batches
  local rows=$1 batches=$2 k
  "$gen" "$rows" > "$work/batch.csv"
  start_sim --rate-limit 0 --processing-min-ms 0 --processing-max-ms 50
  k=$(key_file)
  rm -f "$work"/ledger.db*
  "$bin" run "$work/batch.csv" --batch m01 --base-url "$base" --api-key-file "$k" \
    --ledger "$work/ledger.db" --items-per-order 200 --order-rate 1000000 --quiet \
    > /dev/null 2>&1 || true
  stop_sim
  python3 - "$work/ledger.db" "$batches" <<'PY'
import sqlite3, sys
db, batches = sqlite3.connect(sys.argv[1]), int(sys.argv[2])
def columns(table):
    return [r[1] for r in db.execute(f"PRAGMA table_info({table})")]
def copy(table, where, changed):
    cols = columns(table)
    picked = ", ".join(changed.get(c, c) for c in cols)
    db.execute(f"INSERT INTO {table} ({', '.join(cols)}) SELECT {picked} FROM {table} WHERE {where}")
(src,) = db.execute("SELECT id FROM batches WHERE name = 'm01'").fetchone()
step = 10 ** 8
for m in range(2, batches + 1):
    name, off = f"m{m:02d}", m * step
    copy("batches", f"id = {src}", {"id": f"id + {off}", "name": f"'{name}'"})
    bid = src + off
    copy("orders", f"batch_id = {src}", {"id": f"id + {off}", "batch_id": str(bid),
         "idempotency_key": f"idempotency_key || '-{name}'",
         "service_order_id": f"service_order_id || '-{name}'"})
    copy("rows", f"batch_id = {src}", {"id": f"id + {off}", "batch_id": str(bid),
         "order_id": f"order_id + {off}"})
    copy("payouts", f"batch_id = {src}", {"row_id": f"row_id + {off}", "batch_id": str(bid),
         "order_id": f"order_id + {off}"})
for m in range(1, batches + 1):
    at = f"2026-{(m - 1) % 12 + 1:02d}-15T12:00:00.000Z"
    (bid,) = db.execute("SELECT id FROM batches WHERE name = ?", (f"m{m:02d}",)).fetchone()
    db.execute("UPDATE orders SET finished_at = ? WHERE batch_id = ? AND finished_at IS NOT NULL", (at, bid))
    if "booked_on" in columns("orders"):  # the books' one clock: each month books its own
        db.execute("UPDATE orders SET booked_at = ?, booked_on = ? WHERE batch_id = ? AND booked_at IS NOT NULL",
                   (at, at[:10], bid))
    db.execute("UPDATE rows SET completed_at = ? WHERE batch_id = ? AND completed_at IS NOT NULL", (at, bid))
db.commit()
PY
}

period_cost() {
  local rows=${1:-100000} runs=${2:-3} batches=${3:-12} i t peak
  local -a ours=() theirs=() peaks=()
  period_ledger "$rows" "$batches"
  local paid
  paid=$(sqlite3 "$work/ledger.db" "select count(*) from rows where state = 'COMPLETED'")
  for i in $(seq 1 "$runs"); do
    read -r t peak < <(peak_and_time "$bin" report --since 2026-01-01 --until 2026-12-31 \
      --ledger "$work/ledger.db" --out "$work/period.csv" --html "$work/period.html" \
      --journal "$work/journal.csv" --group-by department --quiet)
    ours+=("$t"); peaks+=("$peak")
    echo "  period run $i: ${t}s peak=$((peak / 1024))MB" >&2
    t=$(wall bash -c 'for n in $(seq -f "m%02g" 1 "$3"); do "$1" report --batch "$n" --ledger "$2" --out "$4/one.csv" --quiet || exit 1; done' \
      _ "$bin" "$work/ledger.db" "$batches" "$work")
    theirs+=("$t")
    echo "  per-batch run $i: ${t}s" >&2
  done
  local lines journal_lines
  lines=$(( $(wc -l < "$work/period.csv") - 1 ))
  journal_lines=$(grep -vc ',TOTAL,' "$work/journal.csv" || true)
  if [ "$lines" -ne $(( rows * batches )) ]; then
    echo "period: the period CSV has $lines lines for $(( rows * batches )) rows" >&2; return 1
  fi
  local mo mt mp
  mo=$(median "${ours[@]}"); mt=$(median "${theirs[@]}"); mp=$(median "${peaks[@]}")
  echo "period: batches=$batches rows=$((rows * batches)) paid=$paid journal-lines=$((journal_lines - 1)) period-report(--out --html --journal)=${mo}s per-batch-reports(${batches}x --out)=${mt}s ratio=$(ratio "$mo" "$mt")x peak=$((mp / 1024))MB"
}

# The double-entry journal against the plain one: `report --since` over the ledger of the
# period benchmark (BATCHES monthly batches of ROWS rows), writing only --journal, plain then
# double-entry, RUNS times each (alternated); the median time and peak memory of each, their
# ratio, and a check that the double-entry journal has two lines per plain payment line and
# that its debits equal its credits.
journal_cost() {
  local rows=${1:-100000} runs=${2:-3} batches=${3:-12} i t peak format
  local -a plain=() double=() plain_peaks=() double_peaks=()
  period_ledger "$rows" "$batches"
  for i in $(seq 1 "$runs"); do
    for format in plain double-entry; do
      read -r t peak < <(peak_and_time "$bin" report --since 2026-01-01 --until 2026-12-31 \
        --ledger "$work/ledger.db" --journal "$work/$format.csv" --journal-format "$format" \
        --group-by department --quiet)
      echo "  $format run $i: ${t}s peak=$((peak / 1024))MB" >&2
      if [ "$format" = plain ]; then plain+=("$t"); plain_peaks+=("$peak")
      else double+=("$t"); double_peaks+=("$peak"); fi
    done
  done
  local payments postings sums
  payments=$(grep -c '^payment,' "$work/plain.csv" || true)
  postings=$(( $(wc -l < "$work/double-entry.csv") - 1 ))
  if [ "$postings" -ne $(( 2 * payments )) ]; then
    echo "journal: $postings double-entry lines for $payments payments" >&2; return 1
  fi
  sums=$(python3 - "$work/double-entry.csv" <<'PY'
import csv, sys
from decimal import Decimal
debit = credit = Decimal(0)
for line in csv.DictReader(open(sys.argv[1], newline="")):
    debit += Decimal(line["debit"] or 0)
    credit += Decimal(line["credit"] or 0)
print("balanced" if debit == credit else f"unbalanced {debit} {credit}")
PY
)
  if [ "$sums" != balanced ]; then echo "journal: $sums" >&2; return 1; fi
  local mp md pp pd
  mp=$(median "${plain[@]}"); md=$(median "${double[@]}")
  pp=$(median "${plain_peaks[@]}"); pd=$(median "${double_peaks[@]}")
  echo "journal: batches=$batches rows=$((rows * batches)) payments=$payments plain=${mp}s peak=$((pp / 1024))MB double-entry=${md}s peak=$((pd / 1024))MB lines=$postings ratio=$(ratio "$md" "$mp")x"
}

# The check against the service's orders (src/batch/repeats/service.rs) of a ledger that meets
# ORDERS finished orders of other ledgers of ITEMS rows each (`sim serve --seed-orders ORDERS
# --seed-paybatch-items ITEMS`: created over the last 20 days, each naming its rows in its
# metadata; 100 ms latency on every request). `paybatch validate` (the same read and check as a
# run) of a 100-row file that also repeats 3 of their rows, on a new ledger (the first check:
# the order list read back 31 days, every foreign order read whole once and kept), then again
# on the same ledger (the next check: the list read since the last read, nothing read whole);
# RUNS times, each pair on a new ledger against one simulator (a read changes nothing). Then
# the same validate against a simulator holding no order, for what the rest of it costs. Prints
# the time and peak memory of each, the full reads (GET /order/{id}) and list reads (GET
# /order) each made, the time the simulator took to seed, and the repeats found.
foreign_validate() { # args: ledger; prints "seconds peak_kb exit list-reads full-reads"
  local list0 one0 list1 one1 secs peak code
  read -r list0 one0 _ < <(polls)
  /usr/bin/time -f "%e %M" -o "$work/time" "$bin" validate "$work/small.csv" \
    --base-url "$base" --api-key-file "$k" --ledger "$1" > "$work/validate.out" 2>&1 \
    && code=0 || code=$?
  read -r secs peak < <(tail -n 1 "$work/time")
  read -r list1 one1 _ < <(polls)
  echo "$secs $peak $code $((list1 - list0)) $((one1 - one0))"
}

repeats_named() { # args: references; prints how many of them validate's repeats name, or 0
  # when it names any other row as a repeat
  local ref n=0
  grep -q "^repeats: $# rows\? " "$work/validate.out" || { echo 0; return; }
  for ref in "$@"; do
    grep -qE -- "^  batch .*[:,] $ref(,|\$| )" "$work/validate.out" && n=$((n + 1))
  done
  echo "$n"
}

foreign_check() {
  local orders=${1:-10000} items=${2:-200} runs=${3:-3} i t0 seeded secs peak code list one
  local found service_line
  local -a first_t=() first_m=() next_t=() next_m=() base_t=() base_m=() first_reads=()
  local -a next_reads=() repeats=() foreign=()
  "$gen" 100 > "$work/small.csv"
  # The oldest order's first row, a middle order's middle row, the newest order's last row.
  foreign=("SEED-0-0" "SEED-$((orders / 2))-$((items / 2))" "SEED-$((orders - 1))-$((items - 1))")
  for i in "${!foreign[@]}"; do
    echo "${foreign[$i]},AMZ-US,10.00,USD,foreign$i@example.com,Sales" >> "$work/small.csv"
  done
  t0=$(date +%s.%N)
  sim_wait=6000 start_sim --latency-ms 100 --seed-orders "$orders" --seed-paybatch-items "$items"
  seeded=$(printf '%.1f' "$(echo "$(date +%s.%N) - $t0" | bc)")
  k=$(key_file)
  echo "  foreign: simulator seeded with $orders orders of $items items and listening after ${seeded}s" >&2
  for i in $(seq 1 "$runs"); do
    rm -f "$work"/foreign.db*
    read -r secs peak code list one < <(foreign_validate "$work/foreign.db")
    service_line=$(grep -o 'service: .*' "$work/validate.out" | head -1)
    found=$(repeats_named "${foreign[@]}")
    echo "  foreign run $i first check: ${secs}s peak=$((peak / 1024))MB exit=$code list-reads=$list full-reads=$one repeats-named=$found/3; $service_line" >&2
    if [ "$one" != "$orders" ] || [ "$found" != 3 ]; then
      echo "foreign: the first check read $one orders whole (want $orders) and named $found of the 3 repeated rows:" >&2
      tail -20 "$work/validate.out" >&2; stop_sim; return 1
    fi
    first_t+=("$secs"); first_m+=("$peak"); first_reads+=("$one"); repeats+=("$found")
    read -r secs peak code list one < <(foreign_validate "$work/foreign.db")
    service_line=$(grep -o 'service: .*' "$work/validate.out" | head -1)
    found=$(repeats_named "${foreign[@]}")
    echo "  foreign run $i next check: ${secs}s peak=$((peak / 1024))MB exit=$code list-reads=$list full-reads=$one repeats-named=$found/3; $service_line" >&2
    if [ "$one" != 0 ] || [ "$found" != 3 ]; then
      echo "foreign: the next check read $one orders whole (want 0) and named $found of the 3 repeated rows" >&2
      stop_sim; return 1
    fi
    next_t+=("$secs"); next_m+=("$peak"); next_reads+=("$one")
  done
  cp "$work/validate.out" "$work/foreign-validate.out"
  local ledger_mb
  ledger_mb=$(( $(stat -c %s "$work/foreign.db") / 1048576 ))
  stop_sim
  start_sim --latency-ms 100
  k=$(key_file)
  for i in $(seq 1 "$runs"); do
    rm -f "$work"/empty.db*
    read -r secs peak code list one < <(foreign_validate "$work/empty.db")
    echo "  foreign run $i, no order at the service: ${secs}s peak=$((peak / 1024))MB exit=$code" >&2
    base_t+=("$secs"); base_m+=("$peak")
  done
  stop_sim
  echo "  foreign: what validate said of the repeated rows (last run):" >&2
  grep -E -- "SEED-|repeat" "$work/foreign-validate.out" | head -12 | sed 's/^/    /' >&2
  local ft fm nt nm bt bm
  ft=$(median "${first_t[@]}"); fm=$(median "${first_m[@]}")
  nt=$(median "${next_t[@]}"); nm=$(median "${next_m[@]}")
  bt=$(median "${base_t[@]}"); bm=$(median "${base_m[@]}")
  echo "foreign: orders=$orders items=$items rows=$((orders * items)) seeded-in=${seeded}s first-check=${ft}s/$((fm / 1024))MB (${first_t[*]}) full-reads=${first_reads[*]} next-check=${nt}s/$((nm / 1024))MB (${next_t[*]}) full-reads=${next_reads[*]} no-orders=${bt}s/$((bm / 1024))MB (${base_t[*]}) ledger=${ledger_mb}MB repeats-named=${repeats[*]}/3 latency=100ms (medians of $runs)"
}

# The check against the service's orders in a resumed run at the defaults (no tuning flag,
# the service of benchmarks 1 to 3): a run of ROWS rows stopped with Ctrl-C after STOP seconds,
# then the same command again (`-v`), its output lines stamped with the time since its start.
# The check is the span from the line before the ledger's other batches are read (the catalog)
# to the `service:` line: the read of the order list since the stopped run's read (its own
# orders in it, none read whole), the foreign rows the ledger keeps loaded; its list reads are
# the pages the `service:` line names. With ORDERS > 0 the simulator starts with ORDERS orders
# of ITEMS rows of other ledgers (`--seed-paybatch-items`): the stopped run's first check reads
# them all whole (give STOP room for it), the resume's only loads them. RUNS times, each on a
# new simulator and ledger; checked that every row ends COMPLETED.
stamped() { # runs "$@" with stdout and stderr merged, each line prefixed with seconds since start
  python3 -c '
import subprocess, sys, time
t0 = time.monotonic()
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
for line in p.stdout:
    print(f"{time.monotonic() - t0:.3f} {line}", end="", flush=True)
sys.exit(p.wait())' "$@"
}

resume_check() {
  local rows=${1:-100000} runs=${2:-3} stop=${3:-30} orders=${4:-0} items=${5:-200} i pid k
  local code total check pages before_orders sent done_rows list0 list1 share
  local -a totals=() checks=() shares=() page_counts=() resumed=() seeded=()
  [ "$orders" -gt 0 ] && seeded=(--seed-orders "$orders" --seed-paybatch-items "$items")
  "$gen" "$rows" > "$work/batch.csv"
  for i in $(seq 1 "$runs"); do
    sim_wait=6000 start_sim "${service[@]}" ${seeded[@]+"${seeded[@]}"}
    k=$(key_file)
    rm -f "$work"/ledger.db*
    "$bin" run "$work/batch.csv" --base-url "$base" --api-key-file "$k" \
      --ledger "$work/ledger.db" --quiet ${run_flags[@]+"${run_flags[@]}"} > /dev/null 2>&1 &
    pid=$!
    sleep "$stop"
    kill -INT "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null && code=0 || code=$?
    before_orders=$(curl -s "$admin/_sim/stats" | jq .orders_created)
    read -r list0 _ < <(polls)
    stamped "$bin" -v run "$work/batch.csv" --base-url "$base" --api-key-file "$k" \
      --ledger "$work/ledger.db" ${run_flags[@]+"${run_flags[@]}"} > "$work/resume.out" 2>&1 || true
    read -r list1 _ < <(polls)
    sent=$(( $(curl -s "$admin/_sim/stats" | jq .orders_created) - before_orders ))
    done_rows=$(sqlite3 "$work/ledger.db" "select count(*) from rows where state='COMPLETED'")
    total=$(tail -n 1 "$work/resume.out" | cut -d' ' -f1)
    check=$(awk '/other batches:/ && !from { from = prev } /service: / { print $1 - from; exit } { prev = $1 }' "$work/resume.out")
    pages=$(grep -o 'service: [0-9]* page' "$work/resume.out" | grep -o '[0-9]*' | head -1)
    share=$(ratio "$(echo "$check * 100" | bc)" "$total" 2)
    [ "$share" = n/a ] || share=$(printf '%.2f' "$share")
    echo "  resume run $i: stopped after ${stop}s (exit $code) with $before_orders orders sent; resume ${total}s sent $sent orders, check ${check}s = ${share}% of it, list pages in the check=$pages, list reads in all=$((list1 - list0)), completed=$done_rows" >&2
    grep -B1 -A1 'other batches:' "$work/resume.out" | cut -c1-220 | sed 's/^/    /' >&2
    stop_sim
    if [ "$done_rows" != "$rows" ] || [ -z "$check" ]; then
      echo "resume: $done_rows of $rows rows COMPLETED, check time '${check}'" >&2; tail -5 "$work/resume.out" >&2; return 1
    fi
    totals+=("$total"); checks+=("$check"); shares+=("$share"); page_counts+=("$pages"); resumed+=("$sent")
  done
  echo "resume: rows=$rows stop-after=${stop}s foreign-orders=$orders resume=$(median "${totals[@]}")s (${totals[*]}) check=$(median "${checks[@]}")s (${checks[*]}) check-share=$(median "${shares[@]}")% list-pages-in-check=${page_counts[*]} orders-sent-by-resume=${resumed[*]} (medians of $runs)"
}

case "$mode" in
  naive) naive_vs "${2:-300}" "${3:-3}" ;;
  large | e2e) large "${2:-100000}" "${3:-3}" ;;
  backtoback) backtoback "${2:-300}" "${3:-}" ;;
  local) local_cost "${2:-1000000}"; stop_sim ;;
  repeats) repeat_cost "${2:-1000000}" "${3:-3}"; stop_sim ;;
  pacing) pacing "${2:-600}" "${3:-}" ;;
  window) window_read "${2:-20000}" "${3:-3}" ;;
  wide) wide "${2:-600}" "${3:-120000}" ;;
  approved) approved_cost "${2:-1000000}"; stop_sim ;;
  payouts) payouts_cost "${2:-100000}" "${3:-200}" ;;
  period) period_cost "${2:-100000}" "${3:-3}" "${4:-12}" ;;
  journal) journal_cost "${2:-100000}" "${3:-3}" "${4:-12}" ;;
  foreign) foreign_check "${2:-10000}" "${3:-200}" "${4:-3}" ;;
  resume) resume_check "${2:-100000}" "${3:-3}" "${4:-30}" "${5:-0}" "${6:-200}" ;;
  smoke)
    local_cost 2000; stop_sim
    repeat_cost 2000 1; stop_sim
    pacing 20 20
    if command -v python3 > /dev/null; then naive_vs 6 1; else echo "naive: skipped, no python3"; fi
    large 500 1
    backtoback 6
    window_read 1200 1
    wide 20 2000
    approved_cost 2000; stop_sim
    payouts_cost 400 20
    period_cost 300 1 3
    journal_cost 300 1 3
    foreign_check 50 20 1
    resume_check 600 1 2 ;;
  *) echo "usage: $0 naive|large|backtoback|local|repeats|pacing|window|wide|approved|payouts|period|journal|foreign|resume|smoke [N...]" >&2; exit 2 ;;
esac
