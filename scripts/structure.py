#!/usr/bin/env python3
"""Measures the structure of src/ and of the crates under crates/: import circles between files,
the share of each top-level part, the longest functions, and where exit codes are used.

    python3 scripts/structure.py [--max-lines 80]

Reads the Rust files as text (no build needed). A file imports another when it names it in a
`use crate::...`/`use super::...` path or in a `crate::a::b::` path in its code; `mod.rs` is its
folder. The files of `crates/paybatch-X/src` are the modules `X::...` (a `paybatch_X::` path
names them; the tool's `pub use paybatch_X::name;` makes `crate::name` one of them). Functions
are counted from their `fn` line to the line of their closing brace, tests
(`#[cfg(test)]` modules) left out.
"""

import argparse
import os
import re
import sys
from collections import defaultdict

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
CRATES = os.path.join(SRC, "..", "crates")


def crate_roots():
    """(prefix, folder) of the tool's src/ ("") and of each crate's src/ ("api" for paybatch-api)."""
    roots = [("", SRC)]
    if os.path.isdir(CRATES):
        for name in sorted(os.listdir(CRATES)):
            if name.startswith("paybatch-") and os.path.isdir(os.path.join(CRATES, name, "src")):
                roots.append((name[len("paybatch-"):], os.path.join(CRATES, name, "src")))
    return roots


def aliases():
    """What the tool's lib.rs re-exports of the crates: `pub use paybatch_api::files;` -> files."""
    text = open(os.path.join(SRC, "lib.rs"), encoding="utf-8").read()
    return {m.group(2): f"{m.group(1)}::{m.group(2)}"
            for m in re.finditer(r"pub use paybatch_(\w+)::(\w+);", text)}


def module_of(path):
    prefix, root = next((p, r) for p, r in reversed(crate_roots()) if path.startswith(r + os.sep))
    parts = os.path.relpath(path, root)[:-3].split(os.sep)
    if parts[-1] == "mod":
        parts = parts[:-1]
    if prefix:
        return "::".join([prefix] + [p for p in parts if p != "lib"])
    if parts in (["lib"], ["main"]):
        return parts[0]
    return "::".join(parts)


ALIASES = aliases()


def strip_tests(text):
    """Drops `#[cfg(test)] mod ... { ... }` blocks and comments."""
    text = re.sub(r"//[^\n]*", "", text)
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{", text):
        if m.start() < i:
            continue
        out.append(text[i : m.start()])
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j
    out.append(text[i:])
    return "".join(out)


def files():
    for _, src in crate_roots():
        for root, _, names in os.walk(src):
            for n in names:
                if n.endswith(".rs"):
                    yield os.path.join(root, n)


def resolve(mod, path, modules):
    """The longest known module that `path` (a::b::c) names, from module `mod`."""
    parts = path.split("::")
    if parts[0] == "crate":
        own = mod.split("::")[0]
        parts = parts[1:]
        if own in {p for p, _ in crate_roots() if p}:
            parts = [own] + parts
        elif parts and parts[0] in ALIASES:
            parts = ALIASES[parts[0]].split("::") + parts[1:]
    elif parts[0].startswith("paybatch_"):
        parts = [parts[0][len("paybatch_"):]] + parts[1:]
    elif parts[0] == "super":
        base = mod.split("::")
        while parts and parts[0] == "super":
            parts = parts[1:]
            base = base[:-1]
        parts = base + parts
    elif parts[0] == "self":
        parts = mod.split("::") + parts[1:]
    else:
        return None
    for n in range(len(parts), 0, -1):
        cand = "::".join(parts[:n])
        if cand in modules:
            return cand
    return None


def imports(mod, text, modules):
    found = set()
    for m in re.finditer(r"\buse\s+((?:crate|super|self|paybatch_\w+)(?:::\w+)*)(?:::\{([^;]*)\})?", text):
        base = m.group(1)
        names = [base]
        if m.group(2):
            names += [base + "::" + n.strip().split(" ")[0].split("::{")[0]
                      for n in m.group(2).replace("\n", " ").split(",") if n.strip()]
        for n in names:
            r = resolve(mod, n.replace("::*", ""), modules)
            if r and r != mod:
                found.add(r)
    for m in re.finditer(r"\b((?:crate|paybatch_[a-z]+)(?:::\w+)+)", text):
        r = resolve(mod, m.group(1), modules)
        if r and r != mod:
            found.add(r)
    for m in re.finditer(r"\b(super(?:::\w+)+)", text):
        r = resolve(mod, m.group(1), modules)
        if r and r != mod:
            found.add(r)
    # A parent module declaring its children is not an import.
    return {f for f in found if not f.startswith(mod + "::")}


def cycles(graph):
    """Strongly connected components of more than one file (Tarjan)."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def functions(text):
    """(name, lines) of every function with a body."""
    lines = text.split("\n")
    out = []
    for i, line in enumerate(lines):
        m = re.match(r"\s*(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?fn\s+(\w+)", line)
        if not m:
            continue
        depth, started, j = 0, False, i
        while j < len(lines):
            for c in lines[j]:
                if c == "{":
                    depth += 1
                    started = True
                elif c == "}":
                    depth -= 1
            if started and depth <= 0:
                break
            if not started and lines[j].rstrip().endswith(";"):
                break
            j += 1
        if started:
            out.append((m.group(1), j - i + 1, i + 1))
    return out


def input_layer(graph):
    """(module, part) for each module of the input stage (src/input) that imports the batch
    stages or the ledger: the input stage is below both."""
    return sorted(
        (m, to)
        for m, targets in graph.items()
        if m == "input" or m.startswith("input::")
        for to in targets
        if to.split("::")[0] in ("batch", "ledger")
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--max-lines", type=int, default=80)
    args = ap.parse_args()
    modules = {module_of(p): p for p in files()}
    texts = {m: strip_tests(open(p, encoding="utf-8").read()) for m, p in modules.items()}
    graph = {m: imports(m, t, modules) for m, t in texts.items()}

    found = cycles(graph)
    print(f"import circles between files: {len(found)}")
    for c in found:
        print("  " + " <-> ".join(c))

    total = sum(len(open(p, encoding="utf-8").read().splitlines()) for p in modules.values())
    parts = defaultdict(int)
    for m, p in modules.items():
        parts[m.split("::")[0]] += len(open(p, encoding="utf-8").read().splitlines())
    print(f"lines of src/: {total}; per top-level part:")
    for name, n in sorted(parts.items(), key=lambda kv: -kv[1]):
        print(f"  {name:<14} {n:>6}  {100.0 * n / total:5.1f} %")

    upward = input_layer(graph)
    print(f"imports of the batch stages or the ledger by the input stage: {len(upward)}")
    for m, to in upward:
        print(f"  {m} -> {to}")

    long = []
    for m, t in texts.items():
        for name, n, line in functions(t):
            if n > args.max_lines:
                long.append((n, f"{os.path.relpath(modules[m], os.path.join(SRC, '..'))}:{line} {name}"))
    long.sort(reverse=True)
    print(f"non-test functions over {args.max_lines} lines: {len(long)}")
    for n, where in long:
        print(f"  {n:>4}  {where}")

    users = sorted(
        os.path.relpath(modules[m], os.path.join(SRC, ".."))
        for m, t in texts.items()
        if re.search(r"\bexit::(?!ExitCode)[A-Z_]+\b|crate::exit\b|std::process::exit", t)
    )
    print(f"files that use exit codes: {len(users)}")
    for u in users:
        print(f"  {u}")
    if upward:
        sys.exit(1)


if __name__ == "__main__":
    main()
