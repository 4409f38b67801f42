package gateway

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
)

// testApp is a modelgate app of one provider and one model, in a health
// scope of the test's own, with the ledger ledger.
func testApp(t *testing.T, ledger LedgerConfig) *App {
	t.Helper()
	return &App{
		Ledger:      &ledger,
		HealthScope: t.Name(),
		Providers:   []*ProviderConfig{{Name: "p", Format: "openai", BaseURL: "http://127.0.0.1:1", Keys: []string{"sk-test"}}},
		Models: []*ModelConfig{{ID: "m", Routes: []RouteConfig{{Provider: "p", Model: "up-m"}},
			Price: PriceConfig{Input: "1", Output: "2"}}},
	}
}

// TestValidateOpensNoLedger: validating a configuration (caddy.Validate,
// what `caddy validate` runs) provisions the app but never starts it, and
// provisioning checks the ledger settings without creating a database
// file or connecting to a database or to Redis.
func TestValidateOpensNoLedger(t *testing.T) {
	// a stand-in PostgreSQL and Redis server that counts the connections
	// it gets
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var conns atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			c.Close()
		}
	}()
	dir := t.TempDir()
	sqlitePath := filepath.Join(dir, "sub", "ledger.db")
	for _, tc := range []struct {
		name   string
		ledger LedgerConfig
	}{
		{"sqlite", LedgerConfig{Path: sqlitePath}},
		{"postgres", LedgerConfig{Driver: "postgres", DSN: "postgres://modelgate:secret@" + ln.Addr().String() + "/modelgate?sslmode=disable"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := testApp(t, tc.ledger)
			a.Redis = &RedisConfig{URL: "redis://" + ln.Addr().String()}
			app, err := json.Marshal(a)
			if err != nil {
				t.Fatal(err)
			}
			cfg := &caddy.Config{Admin: &caddy.AdminConfig{Disabled: true}, AppsRaw: caddy.ModuleMap{"modelgate": app}}
			if err := caddy.Validate(cfg); err != nil {
				t.Fatalf("validate: %v", err)
			}
			if _, err := os.Stat(filepath.Dir(sqlitePath)); !os.IsNotExist(err) {
				t.Errorf("validating created the ledger's directory (%v)", err)
			}
			if n := conns.Load(); n != 0 {
				t.Errorf("validating made %d connections to the database or Redis", n)
			}
			if RunningLedger(sqlitePath) != nil {
				t.Error("validating left a ledger open")
			}
		})
	}

	// a connection counts when the stand-in accepts it, perhaps after
	// Validate returned
	time.Sleep(100 * time.Millisecond)
	if n := conns.Load(); n != 0 {
		t.Errorf("validating made %d connections to the database or Redis", n)
	}

	// a path that cannot be a ledger still fails validation
	app, _ := json.Marshal(testApp(t, LedgerConfig{Path: dir}))
	err = caddy.Validate(&caddy.Config{Admin: &caddy.AdminConfig{Disabled: true}, AppsRaw: caddy.ModuleMap{"modelgate": app}})
	if err == nil || !strings.Contains(err.Error(), dir+" is not a file") {
		t.Fatalf("validating a directory for a ledger: %v", err)
	}
}

// TestNotServingBeforeStart: between Provision and Start the app has no
// ledger, and its handler answers 503 (529 for Anthropic clients) in the
// client's wire format, or a short JSON error on the routes without one;
// once started it serves.
func TestNotServingBeforeStart(t *testing.T) {
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	path := filepath.Join(t.TempDir(), "ledger.db")
	app := testApp(t, LedgerConfig{Path: path})
	if err := app.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := app.Cleanup(); err != nil {
			t.Error(err)
		}
	}()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("provisioning created the ledger (%v)", err)
	}
	h := &APIHandler{app: app, logger: zap.NewNop()}
	serve := func(method, target string, hdr map[string]string) *httptest.ResponseRecorder {
		t.Helper()
		r := httptest.NewRequest(method, target, strings.NewReader(`{}`))
		for k, v := range hdr {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		if err := h.ServeHTTP(w, r, nil); err != nil {
			t.Fatal(err)
		}
		return w
	}
	for _, tc := range []struct {
		name, method, target string
		hdr                  map[string]string
		status               int
		body                 string // a part of the body
	}{
		{"openai chat", "POST", "/v1/chat/completions", nil, 503, `"type":"server_error"`},
		{"anthropic messages", "POST", "/v1/messages", map[string]string{"Anthropic-Version": "2023-06-01"}, 529, `"type":"overloaded_error"`},
		{"anthropic model list", "GET", "/v1/models", map[string]string{"Anthropic-Version": "2023-06-01"}, 529, `"type":"overloaded_error"`},
		{"gemini", "POST", "/v1beta/models/m:generateContent", nil, 503, `"status":"UNAVAILABLE"`},
		{"usage", "GET", "/api/usage", nil, 503, notServingMessage},
		{"index", "GET", "/", nil, 503, `{"error":{"type":"unavailable"`},
		{"payment notification", "POST", "/api/payments/stripe", nil, 503, `{"error":{"type":"unavailable"`},
	} {
		w := serve(tc.method, tc.target, tc.hdr)
		if w.Code != tc.status || !strings.Contains(w.Body.String(), tc.body) || !strings.Contains(w.Body.String(), notServingMessage) {
			t.Errorf("%s before start: %d %s; want %d with %s", tc.name, w.Code, w.Body, tc.status, tc.body)
		}
		if w.Header().Get("Retry-After") != "1" {
			t.Errorf("%s before start: Retry-After %q", tc.name, w.Header().Get("Retry-After"))
		}
	}

	if err := app.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := app.Stop(); err != nil {
			t.Error(err)
		}
	}()
	if w := serve("GET", "/", nil); w.Code != http.StatusOK {
		t.Fatalf("index after start: %d %s", w.Code, w.Body)
	}
	if w := serve("GET", "/v1/models", nil); w.Code != http.StatusUnauthorized {
		t.Fatalf("model list without a key after start: %d %s", w.Code, w.Body)
	}
	if RunningLedger(path) == nil {
		t.Fatal("start did not open the ledger")
	}
}
