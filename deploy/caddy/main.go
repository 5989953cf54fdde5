// Command caddy is Caddy with scafo's modules: what
// `xcaddy build v2.11.9 --with github.com/scafo/ingress/deploy/caddy/scafo` produces.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/scafo/ingress/deploy/caddy/scafo"
)

func main() { caddycmd.Main() }
