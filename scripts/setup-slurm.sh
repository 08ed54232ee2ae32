#!/bin/bash
# Install the real Slurm daemons used by the adapter tests (Debian 12, slurm-wlm 22.05, as root).
#
# Idempotent: when every package is already installed, apt is not touched at all.
# slurm-wlm-jwt-plugin is listed explicitly: --no-install-recommends would leave out
# auth_jwt.so, and slurmrestd needs it for token authentication over TCP.
#
# The packages' own daemons are not used: scripts/slurm-start.sh starts private ones
# (munged included) in a directory of its own and stops them by PID.
set -euo pipefail

PACKAGES=(slurmctld slurmd slurm-client slurmrestd slurm-wlm-jwt-plugin munge)
start=$(date +%s)
"$(dirname "$0")/apt-install.sh" "${PACKAGES[@]}"

echo "setup-slurm: slurm-wlm $(dpkg-query -W -f='${Version}' slurmctld)," \
  "munge $(dpkg-query -W -f='${Version}' munge), $(( $(date +%s) - start )) s"
