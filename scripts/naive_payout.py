#!/usr/bin/env python3
"""The simplest correct way to pay a batch file, for benchmark 1 of docs/performance.md.

Reads a paybatch CSV (reference, product_code, face_value, currency, email, ...) and pays it one
row at a time: one POST /order per row in the service's sync mode (the answer is the finished
order, no polling), with an idempotency key made from the batch name and the row's reference,
waiting for each answer before the next row. A 429 waits for Retry-After (5 s if absent); a
5xx, an in-progress answer or a lost connection is sent again, same key and same bytes, after
a growing pause. Any other refusal marks the row REJECTED. Python 3 standard library only.

    scripts/naive_payout.py FILE --base-url http://127.0.0.1:PORT/v2 --api-key-file KEY \
        [--batch NAME] [--out result.csv]

Prints one line: rows, completed, rejected, 429 answers, other retries, seconds.
"""

import argparse
import csv
import json
import sys
import time
import urllib.error
import urllib.request

VERSION = "2024-02-05"


def body_of(row, batch):
    """The order of one row. face_value goes on the wire as the file's decimal text."""
    ref = row["reference"]
    email = (row.get("email") or "").strip()
    distribution = (
        {"type": "EMAIL", "email_address": email} if email else {"type": "PAYOUT_LINK"}
    )
    item = {
        "face_value": "@FACE@",
        "distribution_method": distribution,
        "products": {"type": "SINGLE", "value": row["product_code"]},
    }
    order = {
        "payment_method": {"type": "ACCOUNT_BALANCE", "currency": row["currency"]},
        "items": [item],
        "description": f"naive batch={batch} row={ref}"[:128],
        "metadata": {"batch": batch[:200], "row": ref[:200]},
    }
    text = json.dumps(order, separators=(",", ":"))
    face = row["face_value"].strip()
    float(face)  # a number, or the row stops the script here
    return text.replace('"@FACE@"', face, 1).encode()


def send(base, api_key, key, body):
    """One POST /order in sync mode: (status, headers, parsed body or None)."""
    req = urllib.request.Request(
        base.rstrip("/") + "/order",
        data=body,
        method="POST",
        headers={
            "X-Api-Key": api_key,
            "X-Api-Version": VERSION,
            "X-Idempotency-Key": key,
            "X-Execution-Mode": "sync",
            "Content-Type": "application/json",
            "Accept": "application/json",
        },
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, resp.headers, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = None
        return e.code, e.headers, parsed


def retry_after(headers, default):
    try:
        return max(float(headers.get("Retry-After")), 0.0)
    except (TypeError, ValueError):
        return default


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file")
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--api-key-file", required=True)
    ap.add_argument("--batch", default="naive")
    ap.add_argument("--out")
    args = ap.parse_args()
    with open(args.api_key_file) as f:
        api_key = f.read().strip()

    t0 = time.monotonic()
    results = []
    n429 = retries = 0
    with open(args.file, newline="") as f:
        for row in csv.DictReader(f):
            ref = row["reference"]
            key = f"naive-{args.batch}-{ref}"[:255]
            body = body_of(row, args.batch)
            pause = 0.5
            while True:
                try:
                    status, headers, answer = send(args.base_url, api_key, key, body)
                except (urllib.error.URLError, OSError):
                    status, headers, answer = None, {}, None
                kind = answer.get("type") if isinstance(answer, dict) else None
                if status == 200 and isinstance(answer, dict) and answer.get("status"):
                    results.append((ref, answer["status"], answer.get("id", ""), ""))
                    break
                if status == 429:
                    n429 += 1
                    time.sleep(retry_after(headers, 5.0))
                    continue
                if status is None or status >= 500 or kind == "idempotency_in_progress":
                    retries += 1
                    time.sleep(retry_after(headers, pause))
                    pause = min(pause * 2, 30.0)
                    continue
                results.append((ref, "REJECTED", "", f"{status} {kind or ''}".strip()))
                break
    took = time.monotonic() - t0

    if args.out:
        with open(args.out, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["reference", "status", "order_id", "error"])
            w.writerows(results)
    done = sum(1 for r in results if r[1] == "COMPLETED")
    rejected = sum(1 for r in results if r[1] == "REJECTED")
    print(
        f"naive: rows={len(results)} completed={done} rejected={rejected} "
        f"429s={n429} retries={retries} took={took:.2f}s"
    )
    return 0 if done == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
