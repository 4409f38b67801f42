package upstream

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// failingTransport answers every request with err.
type failingTransport struct{ err error }

func (f failingTransport) RoundTrip(*http.Request) (*http.Response, error) { return nil, f.err }

func TestProberOutcomes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		status    int   // the upstream's answer
		transport error // or no answer at all
		want      ProbeResult
		keyState  KeyState
	}{
		{name: "expected answer", status: http.StatusOK, want: ProbeResult{OK: true, Status: 200}, keyState: KeyOK},
		{name: "server error", status: http.StatusInternalServerError, want: ProbeResult{Cause: CauseServer, Status: 500}, keyState: KeyCooling},
		{name: "refused key", status: http.StatusUnauthorized, want: ProbeResult{Cause: CauseAuth, Status: 401}, keyState: KeyAuthFailed},
		{name: "unexpected but not failed", status: http.StatusNotFound, want: ProbeResult{Cause: CauseServer, Status: 404}, keyState: KeyCooling},
		{name: "no answer", transport: errors.New("dial tcp: refused"), want: ProbeResult{Cause: CauseConnect}, keyState: KeyCooling},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got *http.Request
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got = r
				w.WriteHeader(tc.status)
			}))
			defer srv.Close()
			p, err := NewProvider("p", FormatAnthropic, srv.URL+"/prefix", []string{"sk-1"})
			if err != nil {
				t.Fatal(err)
			}
			var rt http.RoundTripper = srv.Client().Transport
			if tc.transport != nil {
				rt = failingTransport{tc.transport}
			}
			var results []ProbeResult
			pr := &Prober{
				Provider:       p,
				Check:          DefaultProbeCheck(p.Format),
				Transport:      rt,
				Authorize:      func(h http.Header, secret string) { h.Set("X-Api-Key", secret) },
				UserAgent:      "modelgate-test",
				TransportCause: func(error, bool) Cause { return CauseConnect },
				Report:         func(r ProbeResult) { results = append(results, r) },
			}
			k := p.Keys()[0]
			pr.probe(context.Background(), k)

			tc.want.Provider, tc.want.KeyID = "p", k.ID
			if len(results) != 1 || results[0] != tc.want {
				t.Fatalf("results %+v, want %+v", results, tc.want)
			}
			if st := p.Status(time.Now()).Keys[0].State; st != tc.keyState {
				t.Errorf("key state %s, want %s", st, tc.keyState)
			}
			if tc.transport != nil {
				return
			}
			if got.URL.Path != "/prefix/v1/models" || got.Method != http.MethodGet ||
				got.Header.Get("X-Api-Key") != "sk-1" || got.Header.Get("User-Agent") != "modelgate-test" {
				t.Errorf("probe sent %s %s with headers %v", got.Method, got.URL.Path, got.Header)
			}
		})
	}
}

func TestDefaultProbeCheckPath(t *testing.T) {
	for _, tc := range []struct {
		format Format
		path   string
	}{
		{FormatOpenAI, "/v1/models"},
		{FormatAnthropic, "/v1/models"},
		{FormatGemini, "/v1beta/models"},
	} {
		if got := DefaultProbeCheck(tc.format).Path; got != tc.path {
			t.Errorf("%s: path %s, want %s", tc.format, got, tc.path)
		}
	}
}
