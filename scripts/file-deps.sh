#!/usr/bin/env bash
# Lists which source files of a crate import which (every path in the file's code that
# names a module of the crate: `crate::a::b`, `super::x`, `self::x`, a child module by its
# name, grouped imports expanded, `$crate::` in macros; a name a module re-exports with
# `pub use` counts as the file it comes from), then fails if the imports between files form
# a circle. scripts/module-deps.sh does the same for a crate's top-level modules only; this
# check also sees two files inside one module that import each other.
#
# A file's imports of its own enclosing modules (a child naming `super::Type`) and of the
# modules below it are the module tree itself, not a circle, and are left out.
#
# Usage: scripts/file-deps.sh [path/to/src ...] [--edges]
# Without a path: every crates/*/src. `--edges` prints every file's imports.
set -euo pipefail
cd "$(dirname "$0")/.."
srcs=()
edges=0
for a in "$@"; do
    case "$a" in
    --edges) edges=1 ;;
    *) srcs+=("$a") ;;
    esac
done
if [ "${#srcs[@]}" = 0 ]; then
    srcs=(crates/*/src)
fi

SCRIPTS="$(cd "$(dirname "$0")" && pwd)" python3 - "$edges" "${srcs[@]}" <<'PY'
import os
import re
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.environ["SCRIPTS"])
from use_groups import split_group

show_edges, srcs = sys.argv[1] == "1", sys.argv[2:]

# Known circles, each allowed by name until the code that makes it is changed. When one is
# gone, the check says so: remove its entry then. None at present.
KNOWN = {}


def strip(text):
    """The code without comments, strings and char literals (their text may hold paths)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == "r" and re.match(r'r#*"', text[i:]) and not re.match(r"\w", text[i - 1 : i] or " "):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            end = text.find('"' + hashes, i + 2 + len(hashes))
            i = n if end < 0 else end + 1 + len(hashes)
            out.append('""')
        elif c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
            out.append('""')
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:]):
            i += len(re.match(r"'(\\[^']*|[^\\'])'", text[i:]).group(0))
            out.append("' '")
        else:
            out.append(c)
            i += 1
    return "".join(out)


def braced(text, start):
    """The index just past the `}` matching the `{` at `start`."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)


def expand(path):
    """`a::{b, c::{d, e}}` -> [a::b, a::c::d, a::c::e] (spaces removed, `as` dropped)."""
    path = re.sub(r"\s+as\s+\w+", "", path)
    path = re.sub(r"\s+", "", path)
    i = path.find("{")
    if i < 0:
        return [path]
    head, body = path[:i], path[i + 1 : path.rfind("}")]
    parts = split_group(body)
    out = []
    for p in parts:
        if p == "self":
            out.append(head.rstrip(":"))
        elif p:
            out += expand(head + p)
    return out


class Crate:
    def __init__(self, src):
        self.src = src
        self.files = {}  # module path (tuple) -> file
        self.text = {}  # file -> stripped code
        self.inline = {}  # file -> [(start, end, module path)] of its inline `mod x { }`
        self.children = {}  # module path -> set of child names
        root = os.path.join(src, "lib.rs")
        if not os.path.exists(root):
            root = os.path.join(src, "main.rs")
        self.load((), root, src)

    def load(self, mod, file, folder):
        """Reads `file`, the module `mod` whose children live in `folder`."""
        self.files[mod] = file
        text = strip(open(file).read())
        self.text[file] = text
        self.inline[file] = []
        self.children.setdefault(mod, set())
        stack = []  # (end, module path, folder) of the inline modules around a position
        for m in re.finditer(r"\bmod\s+(\w+)\s*([;{])", text):
            while stack and stack[-1][0] <= m.start():
                stack.pop()
            cur, cur_folder = (stack[-1][1], stack[-1][2]) if stack else (mod, folder)
            name = m.group(1)
            self.children.setdefault(cur, set()).add(name)
            if m.group(2) == "{":
                end = braced(text, m.end() - 1)
                sub = cur + (name,)
                self.inline[file].append((m.end(), end, sub))
                self.children.setdefault(sub, set())
                stack.append((end, sub, os.path.join(cur_folder, name)))
                continue
            for cand in (
                os.path.join(cur_folder, name + ".rs"),
                os.path.join(cur_folder, name, "mod.rs"),
            ):
                if os.path.exists(cand):
                    self.load(cur + (name,), cand, os.path.join(cur_folder, name))
                    break

    def module_at(self, file, mod, pos):
        """The module a position of `file` (the module `mod`) is in: the innermost inline
        module around it, else the file's."""
        best = mod
        for start, end, sub in self.inline[file]:
            if start <= pos < end and len(sub) > len(best):
                best = sub
        return best

    def reexports(self, mod):
        """Names module `mod` re-exports: name -> the path it comes from (in `mod`)."""
        file = self.files.get(mod)
        if file is None:
            return {}
        out = {}
        for m in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);", self.text[file]):
            for full, alias in self.use_items(m.group(1)):
                out[alias] = full
        return out

    @staticmethod
    def use_items(raw):
        """(path, the name it binds) for each item of a use tree."""
        items = []
        flat = re.sub(r"\s+", " ", raw)
        for p in expand(flat):
            alias = p.split("::")[-1]
            items.append((p, alias))
        # `x as y`: expand() dropped the alias; find them for the names they bind.
        for m in re.finditer(r"(\w+)\s+as\s+(\w+)", raw):
            for i, (p, a) in enumerate(items):
                if a == m.group(1):
                    items[i] = (p, m.group(2))
        return items

    def resolve(self, mod, segs, depth=0):
        """The module a path (from inside `mod`) lands in, or None for another crate's."""
        if not segs or depth > 8:
            return None
        first = segs[0]
        if first in ("crate", "$crate"):
            cur, rest = (), segs[1:]
        elif first == "self":
            cur, rest = mod, segs[1:]
        elif first == "super":
            cur, rest = mod, segs
            while rest and rest[0] == "super":
                cur, rest = cur[:-1], rest[1:]
        elif first in self.children.get(mod, ()):
            cur, rest = mod, segs
        else:
            return None
        for i, s in enumerate(rest):
            if s in self.children.get(cur, ()):
                cur = cur + (s,)
                continue
            again = self.reexports(cur).get(s)
            if again and cur != mod:
                target = self.resolve(cur, again.split("::"), depth + 1)
                if target is not None:
                    return target
            break
        return cur

    def home(self, mod):
        """The file a module's code is in (an inline module's: its file's)."""
        while mod not in self.files:
            mod = mod[:-1]
        return self.files[mod]

    def edges(self):
        out = {}
        path_re = re.compile(r"(?<![\w:])(\$?crate|self|super|\w+)((?:\s*::\s*(?:\w+|\{))+)")
        by_file = {f: m for m, f in self.files.items()}
        for file, text in self.text.items():
            mod = by_file[file]
            for m in path_re.finditer(text):
                start = m.start()
                tail = m.group(2)
                if tail.rstrip().endswith("{"):
                    end = braced(text, m.end() - 1)
                    full = text[start:end]
                else:
                    full = m.group(0)
                at = self.module_at(file, mod, start)
                for p in expand(full):
                    segs = [s for s in p.split("::") if s]
                    target = self.resolve(at, segs)
                    if target is None:
                        continue
                    to = self.home(target)
                    tmod = by_file[to]
                    # The module tree itself: a file and its enclosing or enclosed modules.
                    if to == file or tmod[: len(mod)] == mod or mod[: len(tmod)] == tmod:
                        continue
                    out.setdefault(file, set()).add(to)
        return out


def circles(edges, nodes):
    """Strongly connected components of more than one file (Tarjan, iterative)."""
    index, low, on, stack, found, counter = {}, {}, set(), [], [], [0]
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


failed = False
for src in srcs:
    src = os.path.normpath(src)
    crate = Crate(src)
    edges = crate.edges()
    rel = lambda f: os.path.relpath(f, src)
    if show_edges:
        print(f"files of {src}:")
        for f in sorted(crate.text):
            outs = ", ".join(sorted(rel(t) for t in edges.get(f, ())))
            print(f"  {rel(f)} -> {outs or '-'}")
    known_here = {n: files for n, (s, files) in KNOWN.items() if os.path.normpath(s) == src}
    seen = set()
    for comp in circles(edges, sorted(crate.text)):
        files = {rel(f) for f in comp}
        name = next((n for n, k in known_here.items() if files == k), None)
        if name:
            seen.add(name)
            print(f"{src}: known circle {name} (allowed until it is removed): " + ", ".join(sorted(files)), file=sys.stderr)
            continue
        failed = True
        print(f"{src}: CIRCLE among: " + ", ".join(sorted(files)), file=sys.stderr)
        for f in comp:
            for t in sorted(edges.get(f, ())):
                if t in comp:
                    print(f"    {rel(f)} imports {rel(t)}", file=sys.stderr)
    for name in sorted(set(known_here) - seen):
        print(f"{src}: the known circle {name} is gone: remove its entry from KNOWN in scripts/file-deps.sh", file=sys.stderr)
sys.exit(1 if failed else 0)
PY
