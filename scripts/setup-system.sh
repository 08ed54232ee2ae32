#!/usr/bin/env bash
# System packages the test suite needs on Debian 12, installed as root (idempotent):
# python3-venv, shellcheck, the real Slurm daemons with munge, and Debian's python3-nova.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" != 0 ]; then
  echo "scripts/setup-system.sh: run as root (apt-get)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
APT=(apt-get -o DPkg::Lock::Timeout=600)
missing=()
for pkg in python3-venv shellcheck; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
  "${APT[@]}" update -qq
  "${APT[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
scripts/setup-slurm.sh
scripts/setup-nova.sh
