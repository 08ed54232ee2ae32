#!/usr/bin/env bash
# System packages the test suite needs on Debian 12, installed as root (idempotent):
# python3-venv, shellcheck, systemd (systemd-analyze for the unit tests), tmux (`scoctl top` seen
# in a real terminal), prometheus (promtool for the alert rules' tests), the real Slurm daemons
# with munge, Debian's python3-nova, and PostgreSQL 15 (postgresql-15, postgresql-client-15) for
# the PostgreSQL state tests.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" != 0 ]; then
  echo "scripts/setup-system.sh: run as root (apt-get)" >&2
  exit 1
fi
scripts/apt-install.sh python3-venv shellcheck systemd prometheus tmux
scripts/setup-slurm.sh
scripts/setup-nova.sh
scripts/setup-postgres.sh
