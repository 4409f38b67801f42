package integration

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestStartupLine: when a config starts serving, the gateway logs one
// structured info line that says which ledger it uses and how many
// providers and models it serves, and whether payments, SMTP, Redis and
// region rules are on.
func TestStartupLine(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	var found []map[string]any
	for _, line := range strings.Split(readLogs(t, g.logPath), "\n") {
		var e map[string]any
		if json.Unmarshal([]byte(line), &e) == nil && e["msg"] == "modelgate serving" {
			found = append(found, e)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d startup lines, want 1: %v", len(found), found)
	}
	e := found[0]
	if e["level"] != "info" || e["ledger"] != "sqlite "+g.dbPath || e["providers"].(float64) < 1 || e["models"].(float64) < 1 ||
		e["payments"] != false || e["smtp"] != false || e["redis"] != false || e["region_rules"] != false {
		t.Fatalf("startup line %v", e)
	}
}
