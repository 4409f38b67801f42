package upstream

import (
	"strings"
	"testing"
)

func TestNewProvider(t *testing.T) {
	for _, tc := range []struct {
		name, base                             string
		keys                                   []string
		wantErr                                string
		scheme, host, server, prefix, dialAddr string
	}{
		{name: "p", base: "https://api.openai.com", keys: []string{"a"}, scheme: "https", host: "api.openai.com", server: "api.openai.com", dialAddr: "api.openai.com:443"},
		{name: "p", base: "http://127.0.0.1:9081/", keys: []string{"a"}, scheme: "http", host: "127.0.0.1:9081", server: "127.0.0.1", dialAddr: "127.0.0.1:9081"},
		{name: "p", base: "https://openrouter.ai/api/", keys: []string{"a"}, scheme: "https", host: "openrouter.ai", server: "openrouter.ai", prefix: "/api", dialAddr: "openrouter.ai:443"},
		{name: "p", base: "ftp://x", keys: []string{"a"}, wantErr: "http:// or https://"},
		{name: "p", base: "https://u:pw@x", keys: []string{"a"}, wantErr: "without credentials"},
		{name: "p", base: "https://x?a=b", keys: []string{"a"}, wantErr: "without credentials, query"},
		{name: "p", base: "https://x", wantErr: "no keys"},
		{name: "p", base: "https://x", keys: []string{"a", "a"}, wantErr: "twice"},
		{name: "p", base: "https://x", keys: []string{""}, wantErr: "empty"},
	} {
		p, err := NewProvider(tc.name, FormatOpenAI, tc.base, tc.keys)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: err = %v, want %q", tc.base, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.base, err)
		}
		if p.Scheme != tc.scheme || p.Host != tc.host || p.ServerName != tc.server || p.PathPrefix != tc.prefix || p.DialAddress != tc.dialAddr {
			t.Errorf("%s: got %q %q %q %q %q", tc.base, p.Scheme, p.Host, p.ServerName, p.PathPrefix, p.DialAddress)
		}
	}
}

func TestErrorsNeverShowSecrets(t *testing.T) {
	_, err := NewProvider("p", FormatOpenAI, "https://x", []string{"sk-secret", "sk-secret"})
	if err == nil || strings.Contains(err.Error(), "sk-secret") {
		t.Fatalf("err = %v", err)
	}
}

func TestPickLeastInFlight(t *testing.T) {
	p, err := NewProvider("p", FormatOpenAI, "https://x", []string{"a", "b", "c"})
	if err != nil {
		t.Fatal(err)
	}
	held := []*Key{p.Pick(), p.Pick(), p.Pick()}
	seen := map[string]bool{}
	for _, k := range held {
		seen[k.ID] = true
	}
	if len(seen) != 3 {
		t.Fatalf("three picks used %d keys", len(seen))
	}
	held[1].Done()
	if k := p.Pick(); k != held[1] {
		t.Fatalf("picked %s, want the idle %s", k.ID, held[1].ID)
	}
	for _, k := range p.Keys() {
		if k.InFlight() != 1 {
			t.Fatalf("%s in flight %d", k.ID, k.InFlight())
		}
	}
}

func TestKeyIDStable(t *testing.T) {
	a, b := KeyID("p", "sk-1"), KeyID("p", "sk-1")
	if a != b || !strings.HasPrefix(a, "p/") || len(a) != len("p/")+8 || strings.Contains(a, "sk-1") {
		t.Fatalf("KeyID = %q", a)
	}
}

func TestRegistryNewProviderErrors(t *testing.T) {
	r := NewRegistry(nil)
	for _, tc := range []struct {
		name    string
		format  Format
		keys    []KeySpec
		hc      HealthConfig
		wantErr string
	}{
		{"format", "cohere", []KeySpec{{Secret: "a"}}, HealthConfig{}, "unknown format"},
		{"negative weight", FormatOpenAI, []KeySpec{{Secret: "a", Weight: -1}}, HealthConfig{}, "weight"},
		{"huge weight", FormatOpenAI, []KeySpec{{Secret: "a", Weight: MaxWeight + 1}}, HealthConfig{}, "weight"},
		{"health", FormatOpenAI, []KeySpec{{Secret: "a"}}, HealthConfig{FailureCooldown: -1}, "failure cooldown"},
		{"ok", FormatGemini, []KeySpec{{Secret: "a", Weight: 3}, {Secret: "b"}}, HealthConfig{}, ""},
	} {
		p, err := r.NewProvider("p-"+tc.name, tc.format, "https://x", tc.keys, tc.hc)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: err = %v, want %q", tc.name, err, tc.wantErr)
			}
			if _, made := r.providers["p-"+tc.name]; made {
				t.Errorf("%s: state created for a rejected provider", tc.name)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if w := []int{p.Keys()[0].Weight(), p.Keys()[1].Weight()}; w[0] != 3 || w[1] != 1 {
			t.Errorf("weights %v", w)
		}
		if p.Keys()[0].Secret() != "a" || p.HealthConfig().BreakerFailures != DefaultBreakerFailures {
			t.Error("secret or health config")
		}
	}
}
