#!/bin/sh
# render-config.sh TEMPLATE OUTPUT
#
# Writes OUTPUT: TEMPLATE with every ${SCAFO_INGRESS_TOKEN} replaced by the value of the
# SCAFO_INGRESS_TOKEN environment variable, and every ${SCAFO_INGRESS_NAME} by this
# ingress's name in the nodes' reports (SCAFO_INGRESS_NAME, default the host name,
# lowercased, its first label when longer than 63 bytes). Traefik's static configuration
# file does not expand environment variables, so traefik.service runs this before
# Traefik starts and points Traefik at the rendered copy.
#
# - The token never appears on a command line (awk reads it from ENVIRON).
# - OUTPUT is written mode 0600 through a temp file and a rename.
# - A missing token, a token with characters outside [A-Za-z0-9._~+/=-] (nothing a YAML
#   string or awk needs escaped), or a template without the placeholder is an error:
#   Traefik never starts with a half-rendered file.
# - The name must be 1..63 bytes of [a-z0-9.-], starting and ending with a letter or
#   digit (the nodes refuse other names).
set -eu

if [ "$#" -ne 2 ]; then
	echo "usage: $0 TEMPLATE OUTPUT" >&2
	exit 2
fi
template=$1
output=$2

if [ -z "${SCAFO_INGRESS_TOKEN:-}" ]; then
	echo "render-config: SCAFO_INGRESS_TOKEN is not set" >&2
	exit 1
fi
case $SCAFO_INGRESS_TOKEN in
*[!A-Za-z0-9._~+/=-]*)
	echo "render-config: SCAFO_INGRESS_TOKEN has characters outside [A-Za-z0-9._~+/=-]" >&2
	exit 1
	;;
esac
if ! grep -q '${SCAFO_INGRESS_TOKEN}' "$template"; then
	echo "render-config: $template has no \${SCAFO_INGRESS_TOKEN} placeholder" >&2
	exit 1
fi

name=${SCAFO_INGRESS_NAME:-}
if [ -z "$name" ]; then
	name=$(hostname | tr 'A-Z' 'a-z')
	if [ "${#name}" -gt 63 ]; then
		name=${name%%.*}
	fi
fi
if [ "${#name}" -gt 63 ] || ! printf '%s' "$name" | grep -Eqx '[a-z0-9]([a-z0-9.-]*[a-z0-9])?'; then
	echo "render-config: ingress name \"$name\" (SCAFO_INGRESS_NAME, default the host name): want 1..63 bytes of [a-z0-9.-], starting and ending with a letter or digit" >&2
	exit 1
fi

umask 077
tmp=$(mktemp "$output.XXXXXX")
trap 'rm -f "$tmp"' EXIT
SCAFO_INGRESS_NAME=$name awk 'BEGIN { tok = ENVIRON["SCAFO_INGRESS_TOKEN"]; name = ENVIRON["SCAFO_INGRESS_NAME"] }
{ gsub(/\$\{SCAFO_INGRESS_TOKEN\}/, tok); gsub(/\$\{SCAFO_INGRESS_NAME\}/, name); print }' "$template" >"$tmp"
mv "$tmp" "$output"
trap - EXIT
