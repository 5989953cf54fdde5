#!/usr/bin/env bash
# Builds (once per machine) and prints the path of the Debian root filesystem the systemd
# e2e test (e2e/systemd_test.go) boots with systemd-nspawn: Debian bookworm, minbase, with
# systemd as PID 1 and what the packages' scripts and docs/install.md use (curl, jq,
# iproute2, ca-certificates, procps).
#
#   .ci/rootfs.sh          build if needed, print the rootfs directory
#   .ci/rootfs.sh --key    print the cache key only (no build)
#
# Cached under the user cache dir, keyed by a hash of this script (the suite, the package
# list and the tweaks below are in it) and the machine's architecture, like Traefik's
# binary (e2e/build-traefik.sh). The test never boots this directory: it boots an overlay
# (or a copy) of it per container, so the cache stays pristine. SCAFO_ROOTFS overrides
# everything. Needs root, debootstrap and network access to the Debian mirror
# (SCAFO_DEBIAN_MIRROR, default http://deb.debian.org/debian).
set -euo pipefail

if [[ -n "${SCAFO_ROOTFS:-}" && "${1:-}" != "--key" ]]; then
	echo "$SCAFO_ROOTFS"
	exit 0
fi
SUITE=bookworm
INCLUDE=systemd,systemd-sysv,dbus,libpam-systemd,curl,jq,ca-certificates,iproute2,procps
MIRROR="${SCAFO_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
ARCH="$(dpkg --print-architecture)"
KEY="$( { cat "$0"; echo "$ARCH"; } | sha256sum | cut -c1-16)"
if [[ "${1:-}" == "--key" ]]; then
	echo "$KEY"
	exit 0
fi
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/scafo/rootfs/$KEY"
ROOTFS="$CACHE/rootfs"
if [[ -f "$CACHE/done" ]]; then
	echo "$ROOTFS"
	exit 0
fi
if [[ "$(id -u)" != 0 ]]; then
	echo ".ci/rootfs.sh: debootstrap needs root" >&2
	exit 1
fi
command -v debootstrap >/dev/null || { echo ".ci/rootfs.sh: debootstrap not found (apt-get install debootstrap)" >&2; exit 1; }
mkdir -p "$CACHE"
rm -rf "$CACHE/tmp"
echo "building a Debian $SUITE rootfs into $ROOTFS (debootstrap, once per machine: ~2-4 minutes)..." >&2
debootstrap --variant=minbase --include="$INCLUDE" "$SUITE" "$CACHE/tmp" "$MIRROR" >&2
# No login prompts on a console nobody reads; no network configuration of its own (the
# test gives each container its interfaces); an empty machine-id, so every boot mints one.
for u in console-getty.service getty@.service systemd-networkd-wait-online.service; do
	ln -sfn /dev/null "$CACHE/tmp/etc/systemd/system/$u"
done
: >"$CACHE/tmp/etc/machine-id"
rm -f "$CACHE/tmp/var/cache/apt/archives/"*.deb
rm -rf "$CACHE/tmp/var/lib/apt/lists/"*
rm -rf "$ROOTFS"
mv "$CACHE/tmp" "$ROOTFS"
touch "$CACHE/done"
echo "$ROOTFS"
