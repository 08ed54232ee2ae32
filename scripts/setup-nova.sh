#!/bin/bash
# Install the real in-process Nova used by the adapter tests (Debian 12, run as root).
#
# Idempotent: packages already installed are skipped without touching apt, and the
# api-paste.ini (the noauth2 pipelines live in nova-common, which we do not install because
# it adds users, sudoers and dbconfig) is extracted into the cache dir only once.
#
#   SCOCTL_NOVA_CACHE   where api-paste.ini goes (default /var/cache/scoctl-test/nova)
set -euo pipefail

CACHE="${SCOCTL_NOVA_CACHE:-/var/cache/scoctl-test/nova}"
PACKAGES=(python3-nova python3-placement python3-oslotest python3-wsgi-intercept)
APT=(apt-get -o DPkg::Lock::Timeout=600)
start=$(date +%s)
"$(dirname "$0")/apt-install.sh" "${PACKAGES[@]}"

mkdir -p "$CACHE"
if [ ! -s "$CACHE/api-paste.ini" ]; then
  tmp=$(mktemp -d)
  chmod 755 "$tmp"  # apt downloads as the _apt user
  trap 'rm -rf "$tmp"' EXIT
  version=$(dpkg-query -W -f='${Version}' python3-nova)
  (cd "$tmp" \
    && { "${APT[@]}" download -qq "nova-common=$version" >/dev/null 2>&1 \
         || "${APT[@]}" download -qq nova-common >/dev/null; } \
    && dpkg-deb -x nova-common_*.deb x)
  cp "$tmp/x/usr/share/nova-common/api-paste.ini" "$CACHE/api-paste.ini.part"
  mv "$CACHE/api-paste.ini.part" "$CACHE/api-paste.ini"
fi

echo "setup-nova: python3-nova $(dpkg-query -W -f='${Version}' python3-nova)," \
  "api-paste.ini in $CACHE, $(( $(date +%s) - start )) s"
