#!/usr/bin/env bash
# Pays the sample batch on the embedded simulator, writes its HTML report (broken down per
# department) and renders it with headless Chromium to docs/report.png (or the file given):
#   scripts/report-screenshot.sh [OUT.png]
# Needs Chromium (Debian: apt-get install chromium). Nothing leaves the machine: the simulator is
# in-process, the page fetches nothing, and Chromium runs with its background networking off.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=${1:-$root/docs/report.png}
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
  echo "error: Chromium is not installed" >&2
  echo "help: apt-get install chromium" >&2
  exit 2
fi
cargo build --quiet
bin=${CARGO_TARGET_DIR:-$root/target}/debug/paybatch
work=$(mktemp -d)
profile=$(mktemp -d)
trap 'rm -rf "$work" "$profile"' EXIT
cp samples/recipients.csv "$work/"
(
  cd "$work"
  # Approved as a finance team does: the digest validate shows, then the run held to it.
  digest=$("$bin" validate recipients.csv --ledger paybatch.db 2>/dev/null |
    sed -n 's/^plan digest: \(sha256:[0-9a-f]*\).*/\1/p')
  "$bin" --quiet run recipients.csv --ledger paybatch.db --expect-digest "$digest"
  "$bin" --quiet report --batch recipients --ledger paybatch.db --html report.html \
    --group-by department
)
# The window is as tall as the page (about 4,700 px with the costs and claims tables), so
# that the picture shows all of it.
"$browser" --headless --no-sandbox --disable-gpu --disable-quic --disable-background-networking \
  --disable-component-update --disable-sync --no-first-run --user-data-dir="$profile" \
  --screenshot="$out" --window-size=1200,4700 "file://$work/report.html" 2>/dev/null
echo "wrote $out"
