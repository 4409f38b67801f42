package gateway

import (
	"os"
	"slices"
	"strings"
	"sync"
)

// validatingOnly reports whether this process is `caddy validate` or
// `caddy adapt --validate`. Caddy provisions a configuration it only
// validates just as one it is about to run, and tells its modules nothing
// of the difference (caddyserver/caddy#8004), so the command line is the
// only sign. Validating checks the ledger's settings but neither creates,
// migrates nor writes to the ledger (#22).
var validatingOnly = sync.OnceValue(func() bool { return validateCommand(os.Args) })

// validateCommand reports whether args, a caddy command line, runs a
// validation: the subcommand is the first argument that is not a flag.
func validateCommand(args []string) bool {
	if len(args) < 2 {
		return false
	}
	rest := args[1:]
	for len(rest) > 0 && strings.HasPrefix(rest[0], "-") {
		rest = rest[1:]
	}
	if len(rest) == 0 {
		return false
	}
	switch rest[0] {
	case "validate":
		return true
	case "adapt":
		return slices.ContainsFunc(rest[1:], func(a string) bool {
			return a == "--validate" || a == "-validate" || strings.HasPrefix(a, "--validate=") && a != "--validate=false"
		})
	}
	return false
}
