package openai

import (
	"testing"

	"github.com/modelgate/modelgate/formats"
)

// TestGated: web_search_options (one search per request), store and file
// ids of a chat request.
func TestGated(t *testing.T) {
	req, ferr := ParseChatRequest([]byte(`{"model":"m","store":true,"web_search_options":{"search_context_size":"low"},` +
		`"messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"f"}},{"type":"text","text":"hi"}]}]}`))
	if ferr != nil {
		t.Fatal(ferr)
	}
	g := req.Gated()
	if len(g) != 3 {
		t.Fatalf("%+v", g)
	}
	if g[0].State != formats.StateFiles || g[0].Param != "messages[0].content[0].file.file_id" {
		t.Errorf("file: %+v", g[0])
	}
	if g[1].State != formats.StateStore || g[1].Param != "store" {
		t.Errorf("store: %+v", g[1])
	}
	if w := g[2]; w.Hosted != formats.HostedWebSearch || w.Top != "web_search_options" || !w.Fixed || w.Uses() != 1 || w.Tool != -1 {
		t.Errorf("web search: %+v", w)
	}
	for _, body := range []string{
		`{"model":"m","store":false,"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","web_search_options":null,"messages":[{"role":"user","content":"hi"}]}`,
	} {
		if req, ferr := ParseChatRequest([]byte(body)); ferr != nil || len(req.Gated()) != 0 {
			t.Errorf("%s: %+v %v", body, req.Gated(), ferr)
		}
	}
}

// TestWebSearchCounted: an answer with url_citation annotations searched
// the web once, whole or streamed; text that mentions the word does
// not count.
func TestWebSearchCounted(t *testing.T) {
	cited := `{"id":"c","object":"chat.completion","model":"x","choices":[{"index":0,"message":{"role":"assistant","content":"ok",` +
		`"annotations":[{"type":"url_citation","url_citation":{"url":"https://x"}}]},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`
	plain := `{"id":"c","object":"chat.completion","model":"x","choices":[{"index":0,"message":{"role":"assistant","content":"a \"url_citation\" is"},` +
		`"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`
	for body, want := range map[string]int64{cited: 1, plain: 0} {
		if _, u, ferr := PassThroughResponse(nil, []byte(body), "svc"); ferr != nil || u.Hosted.WebSearch != want {
			t.Errorf("%s: %+v %v", body, u.Hosted, ferr)
		}
	}
	tr := NewPassThroughStream("svc", false)
	for _, d := range []string{
		`{"id":"c","object":"chat.completion.chunk","model":"x","choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":null}]}`,
		`{"id":"c","object":"chat.completion.chunk","model":"x","choices":[{"index":0,"delta":{"annotations":[{"type":"url_citation","url_citation":{}}]},"finish_reason":null}]}`,
	} {
		if _, _, ferr := tr.Feed(nil, nil, []byte(d)); ferr != nil {
			t.Fatal(ferr)
		}
	}
	if got := tr.(formats.HostedMeter).HostedUses(); got != (formats.HostedUses{WebSearch: 1}) {
		t.Errorf("stream: %+v", got)
	}
}
