package gateway

import (
	"strings"
	"testing"
)

func TestRedactDSN(t *testing.T) {
	for _, tt := range []struct{ dsn, want string }{
		{"postgres://mg:s3cret@db.internal:5432/modelgate?sslmode=require", "postgres://mg:xxxxx@db.internal:5432/modelgate?sslmode=require"},
		{"postgresql://mg@db/modelgate?password=s3cret&sslmode=disable", "postgresql://mg@db/modelgate?password=xxxxx&sslmode=disable"},
		{"host=db user=mg password=s3cret dbname=modelgate", "host=db user=mg password=xxxxx dbname=modelgate"},
		{"postgres://db/modelgate", "postgres://db/modelgate"},
	} {
		got := redactDSN(tt.dsn)
		if got != tt.want || strings.Contains(got, "s3cret") {
			t.Errorf("redactDSN(%q) = %q, want %q", tt.dsn, got, tt.want)
		}
	}
}
