// Command caddy is Caddy with its standard modules and modelgate:
//
//	go run ./cmd/caddy run --config Caddyfile.example
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/modelgate/modelgate"
)

func main() {
	caddycmd.Main()
}
