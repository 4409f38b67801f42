package gateway

import "testing"

func TestValidateCommand(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"caddy"}, false},
		{[]string{"caddy", "run", "--config", "Caddyfile"}, false},
		{[]string{"caddy", "validate"}, true},
		{[]string{"caddy", "validate", "--config", "Caddyfile", "--adapter", "caddyfile"}, true},
		{[]string{"caddy", "adapt", "--config", "Caddyfile"}, false},
		{[]string{"caddy", "adapt", "--config", "Caddyfile", "--validate"}, true},
		{[]string{"caddy", "adapt", "--validate=true"}, true},
		{[]string{"caddy", "adapt", "--validate=false"}, false},
		{[]string{"caddy", "modelgate", "validate"}, false},
		{[]string{"caddy", "run", "--config", "validate"}, false},
		{[]string{"/usr/bin/caddy", "-v", "validate"}, true},
	} {
		if got := validateCommand(tc.args); got != tc.want {
			t.Errorf("validateCommand(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
}
