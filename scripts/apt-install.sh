#!/usr/bin/env bash
# apt-install.sh PKG...: install the Debian packages that are missing (as root, idempotent).
# When every package is installed, apt is not touched at all; the package lists are refreshed
# only when apt does not know a missing package yet (a bare machine has no lists).
set -euo pipefail

APT=(apt-get -o DPkg::Lock::Timeout=600)
export DEBIAN_FRONTEND=noninteractive

missing=()
for pkg in "$@"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done
[ "${#missing[@]}" -gt 0 ] || exit 0
for pkg in "${missing[@]}"; do
  if ! apt-cache show "$pkg" >/dev/null 2>&1; then
    "${APT[@]}" update -qq
    break
  fi
done
"${APT[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
