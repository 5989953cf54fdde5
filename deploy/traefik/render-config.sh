#!/bin/sh
# render-config.sh TEMPLATE OUTPUT
#
# Writes OUTPUT: TEMPLATE with every ${SCAFO_INGRESS_TOKEN} replaced by the value of the
# SCAFO_INGRESS_TOKEN environment variable. Traefik's static configuration file does not
# expand environment variables, so traefik.service runs this before Traefik starts and
# points Traefik at the rendered copy.
#
# - The token never appears on a command line (awk reads it from ENVIRON).
# - OUTPUT is written mode 0600 through a temp file and a rename.
# - A missing token, a token with characters outside [A-Za-z0-9._~+/=-] (nothing a YAML
#   string or awk needs escaped), or a template without the placeholder is an error:
#   Traefik never starts with a half-rendered file.
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

umask 077
tmp=$(mktemp "$output.XXXXXX")
trap 'rm -f "$tmp"' EXIT
awk 'BEGIN { tok = ENVIRON["SCAFO_INGRESS_TOKEN"] }
{ gsub(/\$\{SCAFO_INGRESS_TOKEN\}/, tok); print }' "$template" >"$tmp"
mv "$tmp" "$output"
trap - EXIT
