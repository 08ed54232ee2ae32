#!/usr/bin/env bash
# Create or refresh .venv with scoctl and its dev tools (idempotent; re-installs when
# pyproject.toml changes). Needs Python >= 3.11 (Debian 12's python3 is 3.11).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "scripts/venv.sh: $PYTHON is missing or older than 3.11" >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  if ! "$PYTHON" -m venv .venv 2>/dev/null; then
    rm -rf .venv
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      export DEBIAN_FRONTEND=noninteractive
      apt-get -o DPkg::Lock::Timeout=600 update -qq
      apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends python3-venv >/dev/null
      "$PYTHON" -m venv .venv
    else
      echo "scripts/venv.sh: '$PYTHON -m venv' failed; install python3-venv" >&2
      exit 1
    fi
  fi
fi
stamp=.venv/.scoctl-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
  .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev]'
  echo "$want" > "$stamp"
fi
