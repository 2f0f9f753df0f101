#!/usr/bin/env bash
# The crates are the layers, kept by the manifests: the workspace holds the tool (`paybatch`), the
# wire client and models (`paybatch-api`) and the simulator (`paybatch-sim`); the simulator depends
# on the api crate and never on the tool, the api crate on neither (dev-dependencies included,
# which cargo would let form a loop). Reads the manifests and Cargo.lock only (no network, no
# build). Exits 1, saying which, when one of these stops holding.
set -euo pipefail
cd "$(dirname "$0")/.."

fail() {
  echo "error: $1" >&2
  echo "help: $2" >&2
  exit 1
}

metadata=$(cargo metadata --format-version 1 --no-deps --offline --locked)
if command -v jq >/dev/null; then
  names=$(jq -r '.packages[].name' <<<"$metadata" | sort | tr '\n' ' ')
else
  names=$(python3 -c 'import json, sys; print(*sorted(p["name"] for p in json.load(sys.stdin)["packages"]))' <<<"$metadata")
fi
[ "${names% }" = "paybatch paybatch-api paybatch-sim" ] ||
  fail "the workspace holds the packages: ${names% }" \
    "it holds paybatch, paybatch-api and paybatch-sim (Cargo.toml, [workspace] members)"

# The packages a crate depends on, by name, one a line.
deps() {
  cargo tree -p "$1" --offline --locked -e normal,build,dev --prefix none --format '{p}' |
    sed 's/ .*//' | sort -u
}

sim=$(deps paybatch-sim)
grep -qx paybatch-api <<<"$sim" ||
  fail "paybatch-sim does not depend on paybatch-api" "cargo tree -p paybatch-sim"
if grep -qx paybatch <<<"$sim"; then
  fail "paybatch-sim depends on the tool's crate, paybatch" \
    "the simulator takes from paybatch-api and external crates only (cargo tree -p paybatch-sim -i paybatch)"
fi
api=$(deps paybatch-api)
if grep -qxE 'paybatch|paybatch-sim' <<<"$api"; then
  fail "paybatch-api depends on paybatch or paybatch-sim" \
    "the api crate takes from external crates only (cargo tree -p paybatch-api)"
fi
echo "crates: paybatch, paybatch-api, paybatch-sim; the simulator and the api crate do not depend on the tool"
