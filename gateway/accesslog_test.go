package gateway

import (
	"testing"
)

func TestRedactQueryKey(t *testing.T) {
	for in, want := range map[string]string{
		"/v1beta/models/m:generateContent?key=mg-abc": "/v1beta/models/m:generateContent?key=REDACTED",
		"/x?alt=sse&key=mg-abc&key=mg-def":            "/x?alt=sse&key=REDACTED&key=REDACTED",
		"/x?%6Bey=mg-abc":                             "/x?%6Bey=REDACTED",
		"/x?monkey=1&key":                             "/x?monkey=1&key",
		"/x?apikey=mg-abc":                            "/x?apikey=mg-abc",
		"/x":                                          "/x",
		"/x?alt=sse":                                  "/x?alt=sse",
	} {
		if got := redactQueryParam(in, "key"); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}
