#!/bin/bash
# Install Debian's PostgreSQL 15 server and client for the PostgreSQL state tests (as root).
#
# Idempotent: when both packages are installed, apt is not touched at all. The package's own
# cluster is not used: tests/fixtures/postgres.py runs initdb in a temporary directory and
# starts a private postgres on loopback (its own port and socket directory), stopped by PID.
set -euo pipefail

PACKAGES=(postgresql-15 postgresql-client-15)
start=$(date +%s)
"$(dirname "$0")/apt-install.sh" "${PACKAGES[@]}"

echo "setup-postgres: postgresql-15 $(dpkg-query -W -f='${Version}' postgresql-15)," \
  "$(( $(date +%s) - start )) s"
