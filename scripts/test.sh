#!/usr/bin/env bash
# The whole test suite: set up .venv, then lint, type-check and run pytest.
# Extra arguments go to pytest (e.g. -k thrift, -x).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/env.sh" "test,demo"
cd "$root"
# Azurite (Azure Blob emulator, npm) for tests/test_azure.py: ~20 s once, into
# .venv/node. Without node/npm, or if the install fails, those tests skip.
azurite_version="3.35.0"
if command -v npm >/dev/null 2>&1 && command -v node >/dev/null 2>&1 \
        && [ ! -x .venv/node/node_modules/.bin/azurite-blob ]; then
    echo "pqindex: installing azurite@$azurite_version into .venv/node (npm)" >&2
    timeout 300 npm install --prefix .venv/node --no-audit --no-fund --silent \
        "azurite@$azurite_version" >&2 || echo "pqindex: npm install azurite failed: test_azure.py will skip" >&2
fi
echo "== ruff" && .venv/bin/ruff check src tests bench scripts
echo "== mypy --strict" && .venv/bin/mypy
# One worker per core; tests that need Spark share one worker and one SparkSession
# (tests/conftest.py). PQINDEX_TEST_WORKERS=0 runs in this process.
echo "== pytest" && exec .venv/bin/python -m pytest -n "${PQINDEX_TEST_WORKERS:-auto}" --dist loadgroup "$@"
