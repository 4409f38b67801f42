package gemini

import (
	"testing"

	"github.com/modelgate/modelgate/formats"
)

// TestGated: built-in tools with fees and the state of the operator's
// project a generateContent request reaches.
func TestGated(t *testing.T) {
	req, ferr := ParseGenerateRequest([]byte(`{"cachedContent":"cachedContents/c","contents":[{"role":"user","parts":[`+
		`{"fileData":{"mimeType":"application/pdf","fileUri":"https://x/files/f"}},{"text":"hi"}]}],`+
		`"tools":[{"google_search":{},"functionDeclarations":[{"name":"f"}]},{"urlContext":{}},{"googleMaps":{}},{"fileSearch":{}},{"codeExecution":{}}]}`), "m", false)
	if ferr != nil {
		t.Fatal(ferr)
	}
	type want struct {
		state         formats.State
		hosted        formats.HostedKind
		param, member string
		tool          int
	}
	wants := []want{
		{formats.StateFiles, 0, "contents[0].parts[0].file_data.file_uri", "", -1},
		{0, formats.HostedWebSearch, "tools[0].google_search", "google_search", 0},
		{0, formats.HostedWebFetch, "tools[1].url_context", "urlContext", 1},
		{0, formats.HostedUnmetered, "tools[2].google_maps", "googleMaps", 2},
		{formats.StateFileSearch, 0, "tools[3].file_search", "fileSearch", 3},
		{formats.StateCachedContent, 0, "cached_content", "", -1},
	}
	g := req.Gated()
	if len(g) != len(wants) {
		t.Fatalf("%+v", g)
	}
	for i, w := range wants {
		if g[i].State != w.state || g[i].Hosted != w.hosted || g[i].Param != w.param || g[i].Member != w.member || g[i].Tool != w.tool || g[i].Forced {
			t.Errorf("%d: %+v, want %+v", i, g[i], w)
		}
	}
}

// TestGroundingCounted: each search query of groundingMetadata is a
// search (a grounded answer without queries is one), each urlMetadata
// entry a fetch; in whole answers and streams.
func TestGroundingCounted(t *testing.T) {
	for body, want := range map[string]formats.HostedUses{
		`{"candidates":[{"content":{"role":"model","parts":[{"text":"ok"}]},"finishReason":"STOP",` +
			`"groundingMetadata":{"webSearchQueries":["a","b"],"groundingChunks":[{}]},"urlContextMetadata":{"urlMetadata":[{},{},{}]}}],` +
			`"usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":1}}`: {WebSearch: 2, WebFetch: 3},
		`{"candidates":[{"content":{"role":"model","parts":[{"text":"ok"}]},"grounding_metadata":{"search_entry_point":{"rendered_content":"x"}}}]}`: {WebSearch: 1},
		`{"candidates":[{"content":{"role":"model","parts":[{"text":"the groundingMetadata"}]},"groundingMetadata":{}}]}`:                            {},
	} {
		if _, u, ferr := PassThroughResponse(nil, []byte(body), "svc"); ferr != nil || u.Hosted != want {
			t.Errorf("%s: pass-through %+v %v", body, u.Hosted, ferr)
		}
		if r, ferr := DecodeGenerateResponse([]byte(body), nil, "call_"); ferr != nil || r.Usage.Hosted != want {
			t.Errorf("%s: decoded %+v %v", body, r.Usage.Hosted, ferr)
		}
	}
	tr := NewPassThroughStream("svc", true)
	for _, d := range []string{
		`{"candidates":[{"content":{"role":"model","parts":[{"text":"o"}]}}]}`,
		`{"candidates":[{"content":{"role":"model","parts":[{"text":"k"}]},"finishReason":"STOP","groundingMetadata":{"webSearchQueries":["a","b","c"]}}]}`,
	} {
		if _, _, ferr := tr.Feed(nil, nil, []byte(d)); ferr != nil {
			t.Fatal(ferr)
		}
	}
	if got := tr.(formats.HostedMeter).HostedUses(); got != (formats.HostedUses{WebSearch: 3}) {
		t.Errorf("stream: %+v", got)
	}
}
