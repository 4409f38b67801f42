package upstream

import (
	"testing"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/rawjson"
)

func TestStatusError(t *testing.T) {
	for _, tc := range []struct {
		status  int
		message string
		kind    formats.ErrorKind
		want    string
	}{
		{401, "x", formats.KindUpstream, "The upstream provider refused the gateway's credentials (HTTP 401)."},
		{403, "", formats.KindUpstream, "The upstream provider refused the gateway's credentials (HTTP 403)."},
		{404, "", formats.KindUpstream, "The upstream provider does not serve the routed model (HTTP 404)."},
		{408, "", formats.KindTimeout, "The upstream provider timed out."},
		{504, "", formats.KindTimeout, "The upstream provider timed out."},
		{413, "", formats.KindRequestTooLarge, "The request is too large for the upstream provider."},
		{413, "prompt too long", formats.KindRequestTooLarge, "prompt too long"},
		{429, "slow down", formats.KindOverloaded, "The upstream provider is overloaded; retry later."},
		{503, "", formats.KindOverloaded, "The upstream provider is overloaded; retry later."},
		{529, "", formats.KindOverloaded, "The upstream provider is overloaded; retry later."},
		{500, "boom", formats.KindUpstream, "The upstream provider failed (HTTP 500)."},
		{502, "", formats.KindUpstream, "The upstream provider failed (HTTP 502)."},
		{409, "", formats.KindUpstream, "The upstream provider rejected the request (HTTP 409)."},
	} {
		e := StatusError(tc.status, tc.message)
		if e.Kind != tc.kind || e.Message != tc.want || e.Param != "" || e.Code != "" {
			t.Errorf("StatusError(%d, %q) = %+v, want kind %d %q", tc.status, tc.message, e, tc.kind, tc.want)
		}
		_, known := KnownStatus(tc.status, tc.message)
		if wantKnown := tc.status != 500 && tc.status != 502 && tc.status != 409; known != wantKnown {
			t.Errorf("KnownStatus(%d) known = %v", tc.status, known)
		}
	}
}

func TestRejectedReported(t *testing.T) {
	e := Rejected("", "messages", "bad")
	if e.Kind != formats.KindInvalidRequest || e.Message != "The upstream provider rejected the request as invalid." || e.Param != "messages" || e.Code != "bad" {
		t.Errorf("Rejected = %+v", e)
	}
	if e := Rejected("too long", "", ""); e.Message != "too long" {
		t.Errorf("Rejected kept %q", e.Message)
	}
	if e := Reported(formats.KindOverloaded, "busy"); e.Kind != formats.KindOverloaded || e.Message != "The upstream provider reported an error: busy" {
		t.Errorf("Reported = %+v", e)
	}
}

func TestObject(t *testing.T) {
	for in, want := range map[string]string{
		" {\"a\":1}\n": `{"a":1}`,
		`{"a":}`:       "",
		`[1]`:          "",
		``:             "",
	} {
		got, ok := Object([]byte(in))
		if ok != (want != "") || ok && string(got) != want {
			t.Errorf("Object(%q) = %q, %v", in, got, ok)
		}
	}
}

func TestModel(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"replaced", `{"id":"x","model":"up-1","n":1}`, `{"id":"x","model":"svc","n":1}`},
		{"inserted", `{"id":"x"}`, `{"id":"x","model":"svc"}`},
		{"into empty", `{ }`, `{"model":"svc" }`},
		{"spaced", `{"model" : "up" }`, `{"model" : "svc" }`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := []byte(tc.in)
			var m Model
			it := rawjson.Object(body, 0)
			for it.Next() {
				if it.NameIs("model") {
					m.Found(it.Member())
				}
			}
			if got := m.Append([]byte("<"), body, &it, "model", "svc"); string(got) != "<"+tc.want {
				t.Errorf("Append = %s, want <%s", got, tc.want)
			}
		})
	}
}

func TestParseUsage(t *testing.T) {
	for _, tc := range []struct {
		name  string
		names *UsageNames
		in    string
		want  formats.Usage
		ok    bool
	}{
		{"chat", &ChatUsage, `{"prompt_tokens":120,"completion_tokens":30,"total_tokens":150,"prompt_tokens_details":{"cached_tokens":100,"cache_write_tokens":5},"completion_tokens_details":{"reasoning_tokens":8}}`,
			formats.Usage{Input: 120, CacheRead: 100, CacheWrite: 5, Output: 30, Reasoning: 8}, true},
		{"responses", &ResponsesUsage, `{"input_tokens":120,"input_tokens_details":{"cached_tokens":100,"cache_creation_tokens":7},"output_tokens":30,"output_tokens_details":{"reasoning_tokens":8}}`,
			formats.Usage{Input: 120, CacheRead: 100, CacheWrite: 7, Output: 30, Reasoning: 8}, true},
		{"other family's names", &ResponsesUsage, `{"prompt_tokens":120}`, formats.Usage{}, false},
		{"disjoint cache", &ChatUsage, `{"prompt_tokens":10,"prompt_tokens_details":{"cached_tokens":100}}`,
			formats.Usage{Input: 110, CacheRead: 100}, true},
		{"bad count", &ChatUsage, `{"prompt_tokens":-3,"completion_tokens":"7"}`, formats.Usage{}, true},
		{"malformed", &ChatUsage, `{"prompt_tokens":1,`, formats.Usage{}, false},
		{"not an object", &ChatUsage, `null`, formats.Usage{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, ok := ParseUsage([]byte(tc.in), tc.names)
			if u != tc.want || ok != tc.ok {
				t.Errorf("ParseUsage = %+v, %v; want %+v, %v", u, ok, tc.want, tc.ok)
			}
		})
	}
}
