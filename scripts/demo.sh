#!/usr/bin/env bash
# The main job: set up .venv, generate TPC-H lineitem, write it indexed, inspect it.
# Extra arguments go to scripts/demo.py (e.g. --scale 0.1).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/env.sh" "test,demo"
exec "$root/.venv/bin/python" "$root/scripts/demo.py" "$@"
