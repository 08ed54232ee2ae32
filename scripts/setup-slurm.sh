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
APT=(apt-get -o DPkg::Lock::Timeout=600)
export DEBIAN_FRONTEND=noninteractive

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

start=$(date +%s)
if [ "${#missing[@]}" -gt 0 ]; then
  if ! apt-cache show "${missing[0]}" >/dev/null 2>&1; then
    "${APT[@]}" update -qq
  fi
  "${APT[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

echo "setup-slurm: slurm-wlm $(dpkg-query -W -f='${Version}' slurmctld)," \
  "munge $(dpkg-query -W -f='${Version}' munge), $(( $(date +%s) - start )) s"
