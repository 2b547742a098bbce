#!/usr/bin/env bash
# Creates or reuses .venv and installs pqindex with the given extras.
# Re-installs only when pyproject.toml, setup.py or a C source changed since the
# last install.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
extras="${1:-test}"
venv="$root/.venv"
py="${PYTHON:-python3.11}"
command -v "$py" >/dev/null 2>&1 || py=python3
if [ ! -x "$venv/bin/python" ]; then
    echo "pqindex: creating $venv" >&2
    "$py" -m venv "$venv"
fi
stamp="$venv/.pqindex-installed-$extras"
# The C modules are built by the install: a changed setup.py or .c file also
# re-installs (the modules are optional, so a stale build would fall back silently).
want="$(cd "$root" && cat pyproject.toml setup.py $(find src -name '*.c' | sort) | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "pqindex: installing dependencies ($extras) into $venv" >&2
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    "$venv/bin/python" -m pip install --quiet -e "$root[$extras]"
    echo "$want" > "$stamp"
fi
