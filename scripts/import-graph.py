#!/usr/bin/env python3
"""The module graph of src/ (make imports, run by make lint): import circles
and imports that point back up.

Reads the crate from src/lib.rs down (`mod name;`, `#[path = "..."]`,
inline `mod name { ... }`), and every path of the code, in `use` items and
in expressions alike (`crate::...`, `super::...`, `self::...`, and a path
starting with a module the current one declares); comments and string
literals are left out. A module's test module (declared under
`#[cfg(test)]`) counts as part of the module it tests: its `use super::*`
is the module's own items.

Three things are faults, and the script exits 1 when it finds any:

- a *circle*: for the children of any one module (the crate's top-level
  modules, the files of a folder), a cycle among them, counting an import
  from anywhere inside one child to anywhere inside another. A cycle between
  two files shows where they sit side by side; a cycle between two folders,
  or a file and a folder, shows as well (`config` <-> `top`);
- an *upward import*: a module importing an item of one of its ancestors
  (the items a parent's own file defines or re-exports, the crate root's
  too), or an ancestor module as a whole (`use super::*`,
  `use crate::ffi::{self}` from inside ffi/). A child imports its siblings
  by their own paths (`super::run::Run`), never through its parent.

A third: a *layer break*, an import by one of the crate's bottom modules
(ONLY_IMPORTS below: the server bindings `ffi`, and the leaves) of a
top-level module it may not import, such as `ffi` importing the command
layer (`command_info`, `args`): no circle yet, but the bindings would sit
above what they serve.

Usage: scripts/import-graph.py [--src src] [--dot]   (prints the findings; --dot: the file graph as Graphviz)
"""

import argparse
import os
import re
import sys
from collections import defaultdict

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"

# The crate's bottom modules and the only top-level modules each may import.
ONLY_IMPORTS = {
    "ffi": {"relocate"},
    "relocate": set(),
    "counters": set(),
    "member": set(),
}


def strip_code(text):
    """The text with comments, string and char literals blanked out (same
    length, newlines kept, so offsets and line numbers stay true)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:]) and (i == 0 or not re.match(r"\w", text[i - 1])):
            m = re.match(r'r(#*)"', text[i:])
            end = '"' + m.group(1)
            j = text.find(end, i + len(m.group(0)))
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'":
            # A char literal ('a', '\n', '\''), else a lifetime ('a).
            m = re.match(r"'(\\.[^']*|[^\\'])'", text[i:])
            if m:
                out.append(" " * len(m.group(0)))
                i += len(m.group(0))
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def expand_use(tree):
    """The paths of a use tree (`a::{b, c::{self, D as E}}`), each a list
    of segments (`self` kept as the last one when written)."""
    tree = re.sub(r"\s+as\s+", "@", tree)
    tree = re.sub(r"\s+", "", tree)

    def parse(s, pos):
        # -> (list of paths, pos)
        prefix = []
        while True:
            m = re.match(r"(" + IDENT + r"|\*)", s[pos:])
            if s.startswith("{", pos):
                items, pos = [], pos + 1
                while not s.startswith("}", pos):
                    sub, pos = parse(s, pos)
                    items.extend(sub)
                    if s.startswith(",", pos):
                        pos += 1
                return [prefix + p for p in items], pos + 1
            if not m:
                return [prefix], pos
            seg = m.group(1)
            pos += len(seg)
            prefix.append(seg)
            if s.startswith("::", pos):
                pos += 2
                continue
            # `X as Y`, written `X@Y` above: the path is X's.
            m2 = re.match(r"@" + IDENT, s[pos:])
            if m2:
                pos += len(m2.group(0))
            return [prefix], pos

    paths, _ = parse(tree, 0)
    return [p for p in paths if p]


class Module:
    def __init__(self, path, file, node, test):
        self.path = path  # logical path, a tuple (() is the crate)
        self.file = file  # the file it is written in
        self.node = node  # the graph node it counts as (tuple)
        self.test = test
        self.children = {}


class Crate:
    def __init__(self, src):
        self.src = src
        self.modules = {}  # logical path -> Module
        self.files = {}  # file -> Module (the file's own module)
        self.load(os.path.join(src, "lib.rs"), (), (), False)

    def load(self, file, path, node, test):
        mod = Module(path, file, node, test)
        self.modules[path] = mod
        self.files[file] = mod
        text = strip_code(open(file, encoding="utf-8").read())
        mod.text = text
        if os.path.basename(file) in ("lib.rs", "mod.rs"):
            child_dir = os.path.dirname(file)
        else:
            child_dir = os.path.splitext(file)[0]
        self.scan_mods(text, file, path, node, child_dir, os.path.dirname(file), test, top=True)

    def scan_mods(self, text, file, path, node, child_dir, path_dir, test, top):
        """Declares the modules `text` declares (file and inline ones)."""
        decl = re.compile(
            r"((?:#\[[^\]]*\]\s*)*)(?:pub(?:\([^)]*\))?\s+)?mod\s+(" + IDENT + r")\s*([;{])"
        )
        pos = 0
        while True:
            m = decl.search(text, pos)
            if not m:
                break
            attrs, name, kind = m.group(1), m.group(2), m.group(3)
            is_test = test or "cfg(test)" in attrs.replace(" ", "")
            cpath = path + (name,)
            cnode = node if is_test else cpath
            parent = self.modules[path]
            if kind == ";":
                pm = re.search(r"#\[path\s*=", attrs)
                if pm:
                    # strip_code blanked the literal: read it from the file.
                    raw = open(file, encoding="utf-8").read()[m.start():m.end()]
                    pm = re.search(r'#\[path\s*=\s*"([^"]*)"\]', raw)
                    cfile = os.path.join(path_dir, pm.group(1))
                else:
                    cfile = os.path.join(child_dir, name + ".rs")
                    if not os.path.exists(cfile):
                        cfile = os.path.join(child_dir, name, "mod.rs")
                parent.children[name] = cpath
                self.load(cfile, cpath, cnode, is_test)
                pos = m.end()
            else:
                # An inline module: part of this file; its body is scanned
                # for modules of its own, its paths resolved from it.
                end = matching_brace(text, m.end() - 1)
                inner = Module(cpath, file, cnode, is_test)
                inner.span = (m.end(), end)
                self.modules[cpath] = inner
                parent.children[name] = cpath
                body = " " * m.end() + text[m.end() : end]
                self.scan_mods(body, file, cpath, cnode, os.path.join(child_dir, name), path_dir, is_test, top=False)
                pos = end

    def module_at(self, file, offset):
        """The innermost module of `file` whose text holds `offset`."""
        best = self.files[file]
        for mod in self.modules.values():
            span = getattr(mod, "span", None)
            if mod.file == file and span and span[0] <= offset < span[1]:
                if len(mod.path) > len(best.path):
                    best = mod
        return best


def matching_brace(text, open_at):
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    return len(text)


def resolve(crate, mod, segs):
    """A path written in `mod` -> (the module it reaches, the rest), or None
    when it names nothing of the crate (std, a dependency, a local)."""
    if segs[0] == "crate":
        base, rest = (), segs[1:]
    elif segs[0] in ("super", "self"):
        base, rest = mod.path, segs
        while rest and rest[0] in ("super", "self"):
            if rest[0] == "super":
                base = base[:-1]
            rest = rest[1:]
    elif segs[0] in crate.modules[mod.path].children:
        base, rest = mod.path, segs
    else:
        return None
    # Descend while the next segment is a child module.
    while rest and rest[0] in crate.modules[base].children:
        base, rest = crate.modules[base].children[rest[0]], rest[1:]
    if rest and rest[0] == "self":
        rest = rest[1:]
    return base, rest


def imports(crate):
    """Every import: (source node, target node, target path, what, file, line)."""
    out = []
    use_re = re.compile(r"\buse\s+([^;]*);")
    path_re = re.compile(r"(?<![\w:])(" + IDENT + r"(?:::(?:" + IDENT + r"))+)")
    for file, fmod in crate.files.items():
        text = fmod.text
        rel = os.path.relpath(file, os.path.dirname(crate.src))
        used_spans = []
        found = []
        for m in use_re.finditer(text):
            used_spans.append((m.start(), m.end()))
            where = crate.module_at(file, m.start())
            for segs in expand_use(m.group(1)):
                found.append((where, segs, m.start()))
        for m in path_re.finditer(text):
            if any(a <= m.start() < b for a, b in used_spans):
                continue
            if re.search(r"pub\(\s*in\s+$", text[max(0, m.start() - 16) : m.start()]):
                continue  # `pub(in crate::a::b)`: a visibility, not an import
            where = crate.module_at(file, m.start())
            segs = m.group(1).split("::")
            found.append((where, segs, m.start()))
        for where, segs, offset in found:
            r = resolve(crate, where, segs)
            if r is None:
                continue
            target, rest = r
            line = text.count("\n", 0, offset) + 1
            out.append((where, target, rest, "::".join(segs), rel, line))
    return out


def display(path):
    return "::".join(path) if path else "crate"


def cycles(nodes, edges):
    """The strongly connected components of more than one node (Tarjan)."""
    index, low, on, stack, comps, counter = {}, {}, set(), [], [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
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
                comps.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return comps


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", default=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))
    ap.add_argument("--dot", action="store_true", help="print the file graph as Graphviz and stop")
    args = ap.parse_args()
    crate = Crate(args.src)
    found = imports(crate)

    # The graph of nodes (a module, its test modules folded in).
    node_of = {p: m.node for p, m in crate.modules.items()}
    edges = defaultdict(dict)  # source node -> target node -> first evidence
    upward = []
    for where, target, rest, text, rel, line in found:
        src, dst = where.node, node_of[target]
        if src == dst:
            continue
        edges[src].setdefault(dst, f"{rel}:{line} {text}")
        if len(dst) < len(src) and src[: len(dst)] == dst:
            what = f"the item {rest[0]} of" if rest else "the module"
            upward.append(f"{rel}:{line}: {text} ({what} {display(dst)}, an ancestor of {display(src)})")

    layer_breaks = []
    for s_node, ds in sorted(edges.items()):
        if not s_node or s_node[0] not in ONLY_IMPORTS:
            continue
        for d, ev in sorted(ds.items()):
            if d and d[0] != s_node[0] and d[0] not in ONLY_IMPORTS[s_node[0]]:
                layer_breaks.append(f"{ev} ({s_node[0]} may import only {sorted(ONLY_IMPORTS[s_node[0]]) or 'nothing of the crate'})")

    if args.dot:
        print("digraph src {")
        for s, ds in sorted(edges.items()):
            for d in sorted(ds):
                print(f'  "{display(s)}" -> "{display(d)}";')
        print("}")
        return 0

    # Circles among the children of each module, each child standing for
    # everything under it.
    nodes = sorted({m.node for m in crate.modules.values()})
    circles = []
    for parent in nodes:
        kids = [n for n in nodes if len(n) == len(parent) + 1 and n[: len(parent)] == parent]
        if len(kids) < 2:
            continue
        kid_of = lambda n: n[: len(parent) + 1] if len(n) > len(parent) and n[: len(parent)] == parent else None
        level = defaultdict(dict)
        for s, ds in edges.items():
            ks = kid_of(s)
            if ks is None:
                continue
            for d, ev in ds.items():
                kd = kid_of(d)
                if kd is not None and kd != ks:
                    level[ks].setdefault(kd, ev)
        for comp in cycles(kids, level):
            lines = [f"{display(a)} -> {display(b)}: {level[a][b]}" for a in comp for b in comp if b in level.get(a, {})]
            circles.append((comp, lines))

    n_edges = sum(len(d) for d in edges.values())
    print(f"import graph of {os.path.relpath(args.src)}: {len(nodes)} modules, {n_edges} imports between them")
    print(f"circles: {len(circles)}")
    for comp, lines in circles:
        print("  " + " <-> ".join(display(c) for c in comp))
        for l in lines:
            print("    " + l)
    print(f"upward imports: {len(upward)}")
    for u in upward:
        print("  " + u)
    print(f"layer breaks: {len(layer_breaks)}")
    for b in layer_breaks:
        print("  " + b)
    return 1 if circles or upward or layer_breaks else 0


if __name__ == "__main__":
    sys.exit(main())
