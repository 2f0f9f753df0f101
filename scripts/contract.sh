#!/usr/bin/env bash
# Contract check: the simulator (`paybatch sim serve`, default settings) against the service's
# published OpenAPI description, with schemathesis.
#
#   scripts/contract.sh [OPENAPI_FILE]      (default: ../shared/spec/openapi-2024-02-05.json)
#
# Installs schemathesis from PyPI into .venv-contract/ (git-ignored), builds paybatch, starts the
# simulator on a free loopback port, runs the examples, coverage and fuzzing phases with the
# checks below, stops the simulator, and exits non-zero on any failure.
#
# Choices, and why:
# - Every request carries the simulator's X-Api-Key (and security parameters are not generated):
#   the document answers only 200 on /ping and omits 401 everywhere, while the service (and the
#   simulator) refuse a request without a valid key with 401.
# - Every request carries X-Api-Version: 2024-02-05, the version the document describes and the
#   version paybatch pins. The document omits the 400 invalid_version answer to another value
#   on /ping and GET /order/{id}.
# - POST /order/estimate is checked too: the simulator prices orders by default, as the service
#   does in production (`sim serve --without-estimate` answers 404, as the playground does).
# - The generator cannot guess product codes, cursors or order ids: the script reads them from the
#   simulator (and places three orders) and offers them as schemathesis dictionaries; each body gets
#   its own idempotency key (the generator draws few distinct ones); order creation is paced at
#   280 a minute, below the simulator's limit of 300. So orders are created and read, not only
#   refused. A 429 would still be checked against the published shape.
#
# Environment: CONTRACT_MAX_EXAMPLES (default 150 per operation and phase), CONTRACT_SEED
# (default 1), SCHEMATHESIS_VERSION (default 4.32.5), CARGO_TARGET_DIR; for a closer look,
# CONTRACT_SIM_ARGS (more `sim serve` flags, e.g. `--minimal-answers 1`: answers holding only
# what the document requires must pass too) and CONTRACT_EXTRA (more `schemathesis run` options,
# e.g. `--report har`).
set -euo pipefail
cd "$(dirname "$0")/.."

spec="${1:-../shared/spec/openapi-2024-02-05.json}"
if [ ! -f "$spec" ]; then
  echo "contract: no OpenAPI file at $spec" >&2
  exit 2
fi
spec="$(cd "$(dirname "$spec")" && pwd)/$(basename "$spec")"
version="${SCHEMATHESIS_VERSION:-4.32.5}"
venv=.venv-contract

# schemathesis, in a virtual environment of its own.
if ! "$venv/bin/schemathesis" --version 2>/dev/null | grep -q "version $version\$"; then
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "schemathesis==$version"
fi
"$venv/bin/schemathesis" --version

cargo build --locked --quiet
bin="${CARGO_TARGET_DIR:-target}/debug/paybatch"

work="$(mktemp -d)"
sim_pid=""
cleanup() {
  if [ -n "$sim_pid" ] && kill -0 "$sim_pid" 2>/dev/null; then
    kill -TERM "$sim_pid" 2>/dev/null || true
    wait "$sim_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# The simulator, with its default behaviour, on a free loopback port.
"$bin" sim serve --addr 127.0.0.1:0 ${CONTRACT_SIM_ARGS:-} >"$work/sim.out" 2>"$work/sim.err" &
sim_pid=$!
url="" key=""
for _ in $(seq 1 100); do
  url="$(sed -n 's/^paybatch simulator .* listening on \(http:\/\/127\.0\.0\.1:[0-9]*\/v2\)$/\1/p' "$work/sim.out")"
  key="$(sed -n 's/^api key: //p' "$work/sim.out")"
  if [ -n "$url" ] && [ -n "$key" ]; then break; fi
  if ! kill -0 "$sim_pid" 2>/dev/null; then
    echo "contract: the simulator did not start:" >&2
    cat "$work/sim.err" >&2
    exit 1
  fi
  sleep 0.1
done
if [ -z "$url" ] || [ -z "$key" ]; then
  echo "contract: the simulator printed no address and key within 10 s" >&2
  exit 1
fi
echo "contract: simulator at $url"

# Test data the generator cannot guess: the simulator's product codes (US dollar ones for bodies),
# amounts they take, payment currencies (now and then another one, for embedded FX), listing
# cursors, and the ids of three orders placed here (sync, async, and sync paid in another
# currency). Generated values are replaced by them some of the time (schemathesis dictionaries),
# so that orders are created and read, not only refused.
"$venv/bin/python" - "$url" "$key" "$work/schemathesis.toml" <<'PY'
import json, sys, urllib.error, urllib.request, uuid

url, key, out = sys.argv[1], sys.argv[2], sys.argv[3]
headers = {"X-Api-Key": key, "X-Api-Version": "2024-02-05", "Content-Type": "application/json"}

def call(method, path, body=None, extra=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, method=method, headers={**headers, **(extra or {})})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.load(r)

# With minimal answers (CONTRACT_SIM_ARGS="--minimal-answers SHARE") a product may come without
# its denominations: read the catalog again until one has them, or try the products in turn.
for _ in range(20):
    catalog = call("GET", "/product?is_orderable=true")["catalog"]
    if any(p.get("gift_card") or p.get("payment") for p in catalog):
        break
codes = [p["code"] for p in catalog]
def takes(p, amounts):
    d = (p.get("gift_card") or p.get("payment") or {}).get("denominations") or {}
    low, high = d.get("minimum_value"), d.get("maximum_value")
    return (d.get("type", "open") == "open" and low is not None and high is not None
            and all(float(low) <= a <= float(high) for a in amounts))

amounts = [10, 25, 50, 100]
usd = [p["code"] for p in catalog if p["currency"] == "USD" and takes(p, amounts)]
usd = usd or [p["code"] for p in catalog if p["currency"] == "USD"]

def place(mode, currency):
    for code in usd:
        body = {"payment_method": {"type": "ACCOUNT_BALANCE", "currency": currency},
                "items": [{"face_value": 10, "distribution_method": {"type": "PAYOUT_LINK"},
                           "products": {"type": "SINGLE", "value": code}}],
                "description": "contract check", "metadata": {"source": "contract"}}
        try:
            return call("POST", "/order", body, {"X-Idempotency-Key": str(uuid.uuid4()),
                                                  "X-Execution-Mode": mode})["id"]
        except urllib.error.HTTPError:
            continue
    raise SystemExit("contract: no US dollar product took an order of 10")

orders = [place(mode, currency)
          for mode, currency in (("sync", "USD"), ("async", "USD"), ("sync", "GBP"))]

cursors = []
for path in ("/order?limit=1", "/product?limit=5", "/product?limit=5&after="):
    if path.endswith("="):
        path += cursors[-1]
    page = call("GET", path)["pagination"]["cursors"]
    cursors += [c for c in (page.get("after"), page.get("before")) if c]
def values(items):
    return "[" + ", ".join(json.dumps(v) for v in items) + "]"

hooks = out.replace("schemathesis.toml", "hooks.py")
with open(hooks, "w") as f:
    f.write("""
import json
import uuid
import schemathesis

@schemathesis.hook
def before_call(ctx, case, **kwargs):
    # The generator draws few distinct idempotency keys (mostly empty ones, refused before the
    # body is read), so most bodies would meet another body's key. As a client does, send one
    # key per body: a key made of the drawn key and the body, so the same case sent again is a
    # replay. A missing key stays missing.
    headers = case.headers or {}
    for name in list(headers):
        if name.lower() == "x-idempotency-key":
            seed = str(headers[name]) + "|" + json.dumps(case.body, sort_keys=True, default=str)
            headers[name] = str(uuid.uuid5(uuid.NAMESPACE_URL, seed))
""")

with open(out, "w") as f:
    f.write(f"""hooks = {json.dumps(hooks)}

[dictionaries.products]
values = {values(codes)}
[dictionaries.usd_products]
values = {values(usd)}
[dictionaries.currencies]
values = ["USD", "USD", "USD", "GBP"]
[dictionaries.amounts]
values = {values(amounts)}
[dictionaries.orders]
values = {values(orders)}
[dictionaries.cursors]
values = {values(cursors)}

[parameters]
"path.product_code" = {{ dictionary = "products", probability = 0.7 }}
"path.id" = {{ dictionary = "orders", probability = 0.7 }}
"query.after" = {{ dictionary = "cursors", probability = 0.7 }}
"query.before" = {{ dictionary = "cursors", probability = 0.5 }}
"body.payment_method.currency" = {{ dictionary = "currencies", probability = 0.8 }}
"body.items[*].face_value" = {{ dictionary = "amounts", probability = 0.9 }}
"body.items[*].products.value" = {{ dictionary = "usd_products", probability = 0.9 }}
"body.items[*].products.values[*]" = {{ dictionary = "usd_products", probability = 0.9 }}

# Order creation at the pace a client keeps: below the simulator's 300 a minute.
[[operations]]
include-operation-id = "createOrder"
rate-limit = "280/m"
""")
print(f"contract: {len(codes)} orderable products, orders {orders}")
PY

status=0
venv_abs="$(pwd)/$venv"
# From the temporary directory, so that schemathesis's own cache stays out of the checkout.
(cd "$work" && timeout 1200 "$venv_abs/bin/schemathesis" --config-file "$work/schemathesis.toml" run "$spec" \
  --url "$url" \
  --header "X-Api-Key: $key" \
  --header "X-Api-Version: 2024-02-05" \
  --generation-with-security-parameters false \
  --phases examples,coverage,fuzzing \
  --checks not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance \
  --max-examples "${CONTRACT_MAX_EXAMPLES:-150}" \
  --seed "${CONTRACT_SEED:-1}" \
  --workers 1 \
  --request-timeout 10 \
  --generation-database none \
  --no-color ${CONTRACT_EXTRA:-}) || status=$?

if ! kill -0 "$sim_pid" 2>/dev/null; then
  echo "contract: the simulator stopped during the run:" >&2
  cat "$work/sim.err" >&2
  status=1
fi
exit "$status"
