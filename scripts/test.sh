#!/usr/bin/env bash
# The whole test suite: set up .venv, then lint, type-check and run pytest.
# Extra arguments go to pytest (e.g. -k thrift, -x).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/env.sh" "test,demo"
cd "$root"
echo "== ruff" && .venv/bin/ruff check src tests bench scripts
echo "== mypy --strict" && .venv/bin/mypy
echo "== pytest" && exec .venv/bin/python -m pytest "$@"
