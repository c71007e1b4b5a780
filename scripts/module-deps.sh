#!/usr/bin/env bash
# Lists which top-level modules of a crate (the crypto crate unless a src folder is given;
# its lib.rs, or main.rs for a binary) use which (every `crate::X` path in
# their files, `use` or not, including grouped imports, `$crate::` in macros and paths
# that climb to the crate root through `super::`; names the crate root re-exports count
# as the module they come from; the public facades written inline in lib.rs, such as
# `aes`, count as modules of their own), then fails if the edges form a cycle.
#
# Usage: scripts/module-deps.sh [path/to/src] [--dot]
set -euo pipefail
cd "$(dirname "$0")/.."
src="crates/crypto/src"
dot=0
for a in "$@"; do
    case "$a" in
    --dot) dot=1 ;;
    *) src="$a" ;;
    esac
done

SCRIPTS="$(cd "$(dirname "$0")" && pwd)" python3 - "$src" "$dot" <<'PY'
import os
import re
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.environ["SCRIPTS"])
from use_groups import split_group

src, dot = sys.argv[1], sys.argv[2] == "1"


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return "\n".join(re.sub(r"//.*", "", line) for line in text.splitlines())


def braced(text, start):
    """The text from the `{` at `start` to its matching `}`."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start + 1 : i]
    raise SystemExit(f"unbalanced braces in lib.rs from offset {start}")


root = os.path.join(src, "lib.rs")
if not os.path.exists(root):
    root = os.path.join(src, "main.rs")
lib = strip_comments(open(root).read())
modules = {}  # name -> list of (file, module path inside the crate)
inline = {}  # facade name -> its text
for m in re.finditer(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*([;{])", lib, re.M):
    name = m.group(1)
    if m.group(2) == "{":
        inline[name] = braced(lib, m.end() - 1)
        continue
    files = []
    single = os.path.join(src, name + ".rs")
    if os.path.exists(single):
        files.append(single)
    folder = os.path.join(src, name)
    if os.path.isdir(folder):
        for root, _, names in os.walk(folder):
            files += [os.path.join(root, n) for n in names if n.endswith(".rs")]
    modules[name] = sorted(files)

# Names the crate root re-exports: `pub use module::{A, B as C}` -> the module.
reexport = {}
top_level = re.sub(r"\bmod\s+\w+\s*\{", "mod {", lib)
for name, body in inline.items():
    top_level = top_level.replace(body, "")
for m in re.finditer(r"\bpub\s+use\s+([^;]+);", top_level):
    path = m.group(1).replace(" ", "").replace("\n", "")
    head, _, rest = path.partition("::")
    head = rest.partition("::")[0] if head == "crate" else head
    items = rest.strip("{}").split(",") if rest.startswith("{") else [path.split("::")[-1]]
    for item in items:
        alias = item.split(" as ")[-1].split("::")[-1].strip()
        if alias:
            reexport[alias] = head


def first_segments(group):
    """The first path segment of each item of a `{...}` use group."""
    return [re.split(r"::|\s|\{", s.strip())[0] for s in split_group(group) if s.strip()]


def module_depth(file):
    rel = os.path.relpath(file, src)[:-3].split(os.sep)
    if rel[-1] == "mod":
        rel = rel[:-1]
    return len(rel)


def targets(text, depth):
    """The crate-root names a text reaches: `crate::X`, `$crate::X`, `super::...::X`."""
    found = []
    for m in re.finditer(r"(?<![\w])\$?crate::(\{|\w+)", text):
        if m.group(1) == "{":
            found += first_segments(braced(text, m.end() - 1))
        else:
            found.append(m.group(1))
    for m in re.finditer(r"(?<![\w:])((?:super::)+)(\{|\w+)", text):
        if m.group(1).count("super::") != depth:
            continue
        if m.group(2) == "{":
            found += first_segments(braced(text, m.end() - 1))
        else:
            found.append(m.group(2))
    return found


nodes = sorted(set(modules) | set(inline))
edges = {}
for name in nodes:
    texts = (
        [(inline[name], 1)]
        if name in inline
        else [(strip_comments(open(f).read()), module_depth(f)) for f in modules[name]]
    )
    for text, depth in texts:
        for t in targets(text, depth):
            to = t if t in nodes else reexport.get(t)
            if to and to != name:
                edges.setdefault(name, {}).setdefault(to, 0)
                edges[name][to] += 1

if dot:
    print("digraph crypto {")
    for a in sorted(edges):
        for b in sorted(edges[a]):
            print(f'  "{a}" -> "{b}";')
    print("}")
else:
    print(f"top-level modules of {src} (inline facades in lib.rs: {', '.join(sorted(inline))})")
    for a in nodes:
        outs = ", ".join(f"{b} ({n})" for b, n in sorted(edges.get(a, {}).items()))
        print(f"  {a:<9} -> {outs or '-'}")

# Cycles: strongly connected components of more than one module (Tarjan).
index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]


def visit(v):
    index[v] = low[v] = counter[0]
    counter[0] += 1
    stack.append(v)
    on.add(v)
    for w in edges.get(v, {}):
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
            sccs.append(sorted(comp))


for v in nodes:
    if v not in index:
        visit(v)
if sccs:
    for c in sccs:
        print("CYCLE among: " + ", ".join(c), file=sys.stderr)
    sys.exit(1)
if not dot:
    print("no cycle")
PY
