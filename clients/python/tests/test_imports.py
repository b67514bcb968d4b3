"""The package's modules import alone, and import one another without a
circle: the graph of imports within `slidewin/` (read from the source, with
the imports inside functions, which would hide a circle) has no cycle, and
no module imports inside a function. No server needed."""

import ast
import os
import subprocess
import sys

import slidewin

PACKAGE = os.path.dirname(os.path.abspath(slidewin.__file__))


def modules():
    return sorted(f[:-3] for f in os.listdir(PACKAGE) if f.endswith(".py"))


def imported(name: str):
    """The package's modules that module `name` imports, and the imports
    made inside a function or class (as (line, text))."""
    path = os.path.join(PACKAGE, name + ".py")
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    known = set(modules())
    edges, nested = set(), []
    top = set(map(id, tree.body))
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.ImportFrom):
            if node.level == 1 or node.module == "slidewin" or (node.module or "").startswith("slidewin."):
                base = (node.module or "") if node.level == 1 else node.module[len("slidewin"):].lstrip(".")
                if base:
                    targets.append(base.split(".")[0])
                else:  # from . import x: the module x, else the package itself
                    targets += [a.name if a.name in known else "__init__" for a in node.names]
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "slidewin":
                    targets.append("__init__")
                elif a.name.startswith("slidewin."):
                    targets.append(a.name.split(".")[1])
        else:
            continue
        if targets and id(node) not in top:
            nested.append((node.lineno, ast.unparse(node)))
        edges.update(t for t in targets if t != name)
    return edges, nested


def cycle(graph):
    """A cycle of `graph` ({node: set of nodes}) as a list of nodes, or None."""
    state, path = {}, []

    def visit(n):
        state[n] = "open"
        path.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == "open":
                return path[path.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        state[n] = "done"
        path.pop()
        return None

    for n in sorted(graph):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def test_the_cycle_finder_finds_cycles():
    assert cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"a2"}, "a2": set(), "x": {"y"}, "y": {"x"}}) == ["x", "y", "x"]


def test_the_package_has_no_import_circle():
    graph = {}
    for name in modules():
        edges, _ = imported(name)
        # Every module imports the package first (Python runs __init__
        # before a submodule): only the edges into __init__ can close a
        # circle through it.
        graph[name] = edges
    assert "limiter" in graph and "reservation" in graph["limiter"], "the graph is read"
    assert cycle(graph) is None, f"an import circle: {' -> '.join(cycle(graph))}"


def test_no_module_imports_inside_a_function():
    for name in modules():
        _, nested = imported(name)
        assert not nested, f"{name}.py imports the package's modules inside a function (a circle dodged?): {nested}"


def test_every_module_imports_alone():
    # A fresh interpreter per module: nothing imported before it helps.
    for name in modules():
        target = "slidewin" if name == "__init__" else f"slidewin.{name}"
        out = subprocess.run([sys.executable, "-c", f"import {target}"], capture_output=True, text=True, cwd="/")
        assert out.returncode == 0, f"import {target} failed alone:\n{out.stderr}"
