// Package integration holds the end-to-end tests: each starts a real Caddy
// from a Caddyfile (caddytest), in front of mockupstream as the upstream
// provider, or builds and runs the gateway binary, and checks what a
// client, an operator or the ledger sees.
package integration

// Every module of the plugin, registered as `xcaddy build --with
// github.com/modelgate/modelgate` registers them.
import _ "github.com/modelgate/modelgate"
