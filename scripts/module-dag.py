#!/usr/bin/env python3
"""The module-DAG check: the import graph among one crate's modules, and its cycles.

    module-dag.py SRC_DIR [--known FILE] [--write-known FILE] [--graph]

SRC_DIR is a crate's `src/` (lib.rs or main.rs at its root). A module is a file: `lib.rs` is the
crate root (named `crate`), `a.rs` and `a/mod.rs` are `a`, `a/b.rs` is `a::b`. Module `m` imports
module `n` where a path in `m` names `n` or an item of it: `use crate::n::...`, `crate::n::f()` in
code, `super::...` and `self::...`, and a path that starts with a child module's name. A path to
an item the target imports (`use x::Item`, `pub use x::Item`) counts as a path to where the item
is defined: no arrow at all when that is another crate (`crate::Errno` for `use stack::Errno`). Comments, strings and `#[cfg(test)]` modules are left out (a test may import what it
checks). Method calls are not paths: an `impl` block in another file adds no arrow.

An import arrow m -> n is cyclic when n imports m, directly or through others. The check:
- every cyclic arrow is printed with a cycle it closes;
- with --known FILE (lines `m -> n`, `#` comments), it fails (exit 1) on a cyclic arrow the file
  does not list (a new cycle), and on a listed arrow that is no longer cyclic (say what to
  remove from the list, so the list only shrinks);
- with --write-known FILE, it writes today's cyclic arrows there and passes.
Without either, it fails when there is any cycle. --graph prints every module's arrows first.
"""

import argparse
import os
import re
import sys
from collections import defaultdict, deque

ROOT = "crate"


def module_files(src):
    """{module name: file path} of the crate under `src`."""
    modules = {}
    for dirpath, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, f), src)
            parts = rel[:-3].split(os.sep)
            if parts in (["lib"], ["main"]):
                name = ROOT
            else:
                if parts[-1] == "mod":
                    parts = parts[:-1]
                name = "::".join(parts)
            modules[name] = os.path.join(dirpath, f)
    return modules


def strip_code(text):
    """The text with comments and string/char literals blanked (newlines kept)."""
    out = []
    i, n = 0, len(text)
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
                    out.append("\n" if text[i] == "\n" else "")
                    i += 1
        elif c == "r" and re.match(r'r#*"', text[i:i + 260]) and not (i and (text[i - 1].isalnum() or text[i - 1] == "_") and text[i - 1] != "b"):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            end = text.find('"' + hashes, i + 2 + len(hashes))
            end = n if end < 0 else end + 1 + len(hashes)
            out.append('""' + "\n" * text.count("\n", i, end))
            i = end
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j + 1
        elif c == "'" and re.match(r"'(\\.|[^\\'])'|'\\u\{[0-9a-fA-F]+\}'|'\\x[0-9a-fA-F]{2}'", text[i:i + 12]):
            m = re.match(r"'(\\.|[^\\'])'|'\\u\{[0-9a-fA-F]+\}'|'\\x[0-9a-fA-F]{2}'", text[i:i + 12])
            out.append("' '")
            i += len(m.group(0))
        else:
            out.append(c)
            i += 1
    return "".join(out)


def drop_test_modules(code):
    """The code without `#[cfg(test)] mod x { ... }` blocks."""
    while True:
        m = re.search(r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s+)?mod\s+\w+\s*\{", code)
        if not m:
            return code
        depth, j = 1, m.end()
        while j < len(code) and depth:
            depth += {"{": 1, "}": -1}.get(code[j], 0)
            j += 1
        code = code[:m.start()] + "\n" * code.count("\n", m.start(), j) + code[j:]


def expand_use_tree(tree):
    """`a::{b, c::{d, e}, self}` -> [["a","b"], ["a","c","d"], ["a","c","e"], ["a"]] (renames are
    stripped before)."""
    tree = re.sub(r"\s+", "", tree)

    def parse(s, prefix):
        paths = []
        depth, start = 0, 0
        items = []
        for k, ch in enumerate(s):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                items.append(s[start:k])
                start = k + 1
        items.append(s[start:])
        for item in items:
            if not item:
                continue
            brace = item.find("{")
            if brace >= 0:
                head = [p for p in item[:brace].split("::") if p]
                paths += parse(item[brace + 1:item.rindex("}")], prefix + head)
            else:
                segs = [p for p in item.split("::") if p]
                if segs == ["self"]:
                    paths.append(prefix)
                elif segs == ["*"]:
                    paths.append(prefix + ["*"])
                else:
                    paths.append(prefix + segs)
        return paths

    return parse(tree, [])


USE = re.compile(r"\b(pub(\([^)]*\))?\s+)?use\s+([^;]+);")


def parse_module(name, path):
    """(use statements as (is_pub, [segments]), other paths as [segments]) of one module file."""
    with open(path, encoding="utf-8") as f:
        code = drop_test_modules(strip_code(f.read()))
    uses = []
    for m in USE.finditer(code):
        tree = re.sub(r"\s+as\s+\w+", "", m.group(3))
        for segs in expand_use_tree(tree):
            uses.append((m.group(1) is not None, segs))
    rest = USE.sub(" ", code)
    paths = [p.split("::") for p in re.findall(r"\b(?:crate|super|self|[a-z_][a-z0-9_]*)(?:::[A-Za-z_][A-Za-z0-9_]*)+", rest)]
    return uses, paths


def parent(module):
    return ROOT if "::" not in module else module.rsplit("::", 1)[0]


def child(module, seg):
    return seg if module == ROOT else f"{module}::{seg}"


class Crate:
    def __init__(self, src):
        self.files = module_files(src)
        if ROOT not in self.files:
            raise SystemExit(f"module-dag: {src} has no lib.rs or main.rs")
        self.parsed = {m: parse_module(m, p) for m, p in self.files.items()}
        # Imports, which descendants may name through the module (`crate::Item` for the root's
        # `use x::Item`): module -> {item name: [segments of the path it imports]}.
        self.reexports = defaultdict(dict)
        for m, (uses, _) in self.parsed.items():
            for _, segs in uses:
                if segs and segs[-1] != "*":
                    self.reexports[m][segs[-1]] = segs

    def start(self, module, segs):
        """Where a path starts: (module, remaining segments), or None for another crate's path."""
        head = segs[0]
        if head == "crate":
            return ROOT, segs[1:]
        if head == "self":
            return module, segs[1:]
        if head == "super":
            at = module
            while segs and segs[0] == "super":
                at, segs = parent(at), segs[1:]
            return at, segs
        if child(module, head) in self.files:
            return child(module, head), segs[1:]
        return None

    def resolve(self, module, segs, depth=0):
        """The module a path in `module` lands in (None: not this crate's)."""
        started = self.start(module, segs) if segs else None
        if started is None:
            return None
        at, rest = started
        while rest:
            nxt = child(at, rest[0])
            if nxt in self.files:
                at, rest = nxt, rest[1:]
                continue
            reexported = self.reexports.get(at, {}).get(rest[0])
            if reexported is not None and depth < 8:
                return self.resolve(at, reexported, depth + 1)
            break
        return at

    def graph(self):
        """{module: set of modules it imports}."""
        edges = defaultdict(set)
        for m, (uses, paths) in self.parsed.items():
            for segs in [s for _, s in uses] + paths:
                target = self.resolve(m, segs)
                if target is not None and target != m:
                    edges[m].add(target)
        return edges


def cyclic_arrows(edges):
    """{(m, n): a cycle [m, n, ..., m]} for every arrow m -> n that n leads back from."""
    found = {}
    for m in sorted(edges):
        for n in sorted(edges[m]):
            path = shortest_path(edges, n, m)
            if path is not None:
                found[(m, n)] = [m] + path
    return found


def shortest_path(edges, src, dst):
    prev = {src: None}
    queue = deque([src])
    while queue:
        at = queue.popleft()
        if at == dst:
            path = []
            while at is not None:
                path.append(at)
                at = prev[at]
            return path[::-1]
        for nxt in sorted(edges.get(at, ())):
            if nxt not in prev:
                prev[nxt] = at
                queue.append(nxt)
    return None


def read_known(path):
    known = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            m, arrow, n = line.partition("->")
            if not arrow:
                raise SystemExit(f"module-dag: {path}: not an arrow `m -> n`: {line}")
            known.add((m.strip(), n.strip()))
    return known


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src")
    ap.add_argument("--known", help="the cyclic arrows accepted today (the check fails on others)")
    ap.add_argument("--write-known", help="write today's cyclic arrows to this file")
    ap.add_argument("--graph", action="store_true", help="print every module's arrows")
    args = ap.parse_args(argv)

    edges = Crate(args.src).graph()
    if args.graph:
        for m in sorted(edges):
            print(f"{m} -> {', '.join(sorted(edges[m]))}")
    cycles = cyclic_arrows(edges)
    label = args.src.rstrip("/")
    if args.write_known:
        with open(args.write_known, "w", encoding="utf-8") as f:
            f.write(f"# Import arrows of {label} that close a cycle, accepted by scripts/module-dag.py until\n"
                    "# they are broken (then the check asks for their line to go).\n")
            for m, n in sorted(cycles):
                f.write(f"{m} -> {n}\n")
        print(f"module-dag: {label}: {len(cycles)} cyclic arrows written to {args.write_known}")
        return 0
    known = read_known(args.known) if args.known else set()
    new = sorted(set(cycles) - known)
    gone = sorted(known - set(cycles))
    for m, n in new:
        print(f"module-dag: {label}: NEW cycle: {' -> '.join(cycles[(m, n)])} (arrow {m} -> {n})")
    for m, n in gone:
        print(f"module-dag: {label}: `{m} -> {n}` no longer closes a cycle: remove it from {args.known}")
    accepted = len(set(cycles) & known)
    if new or gone:
        return 1
    print(f"module-dag: {label}: no new cycle ({accepted} known cyclic arrows left)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
