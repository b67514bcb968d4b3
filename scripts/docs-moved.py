#!/usr/bin/env python3
"""Checks that a move of the README into docs/ lost nothing: every line of
README.md at REV (default dd9ab4e, before the move) that is neither blank nor
a heading appears in README.md or a docs/*.md page now, with markdown links
reduced to their text and whitespace normalised. Prints the lines that do
not (the ones rewritten on purpose, to link a section that moved) and exits
1 if there are any.

    python3 scripts/docs-moved.py [REV]
"""
import glob
import re
import subprocess
import sys


def norm(s):
    s = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", s)
    return " ".join(s.split())


rev = sys.argv[1] if len(sys.argv) > 1 else "dd9ab4e"
old = subprocess.run(["git", "show", f"{rev}:README.md"], check=True,
                     capture_output=True, text=True).stdout.split("\n")
new = "\n".join(open(p, encoding="utf-8").read()
                for p in ["README.md"] + sorted(glob.glob("docs/*.md")))
new_lines = {norm(line) for line in new.split("\n")}
new_text = norm(new)
missing = []
fence = False
for i, line in enumerate(old, 1):
    if line.startswith("```"):
        fence = not fence
        continue
    if not line.strip() or (not fence and re.match(r"^#{1,6} ", line)):
        continue
    if norm(line) not in new_lines and norm(line) not in new_text:
        missing.append(f"{i}: {line}")
print("\n".join(missing))
print(f"{len(missing)} of {len(old)} lines of README.md at {rev} not found",
      file=sys.stderr)
sys.exit(1 if missing else 0)
