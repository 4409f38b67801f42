package ledger

import (
	"context"
	"os"
	"strings"
	"testing"
)

func init() {
	expHook = func(s *Store) {
		for _, q := range strings.Split(os.Getenv("LEDGER_EXP_SQL"), ";") {
			if strings.TrimSpace(q) == "" {
				continue
			}
			if _, err := s.wconn.ExecContext(context.Background(), q); err != nil {
				panic(err)
			}
		}
	}
}

var _ = testing.Short

func init() {
	if v := os.Getenv("LEDGER_EXP_SKIP"); v != "" {
		expSkip = int(v[0] - '0')
	}
}

func init() {
	if v := os.Getenv("LEDGER_EXP_YIELDS"); v != "" {
		maxYields = int(v[0] - '0')
	}
}
