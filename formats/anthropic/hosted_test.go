package anthropic

import (
	"fmt"
	"strings"
	"testing"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/openai"
)

// gatedString sums up a request's gated uses for comparison.
func gatedString(gs []formats.Gated) string {
	var b []string
	for _, g := range gs {
		var add []string
		for _, m := range g.ToolAdd {
			add = append(add, m.Name+"="+string(m.Value))
		}
		b = append(b, fmt.Sprintf("%s%s %s %s t%d f%v u%d %s", g.State, g.Hosted, g.Param, g.Label, g.Tool, g.Forced, g.MaxUses, strings.Join(add, ",")))
	}
	return strings.Join(b, "; ")
}

// TestGated: the server tools with fees and the uses of state in the
// operator's account a Messages request makes.
func TestGated(t *testing.T) {
	const head = `{"model":"m","max_tokens":100,"messages":[{"role":"user","content":`
	for _, tc := range []struct{ body, want string }{
		{head + `"hi"}]}`, ""},
		{head + `"hi"}],"tools":[{"name":"f","input_schema":{"type":"object"}},{"type":"web_search_20250305","name":"web_search","max_uses":3},` +
			`{"type":"web_fetch_20250910","name":"web_fetch"},{"type":"bash_20250124","name":"bash"}],"tool_choice":{"type":"tool","name":"web_fetch"}}`,
			"web_search tools.1 tools.web_search t1 ffalse u3 ; " +
				"web_fetch tools.2 tools.web_fetch t2 ftrue u0 max_content_tokens=65536,max_uses=5"},
		{head + `"hi"}],"tools":[{"type":"code_execution_20250825","name":"code_execution"},{"type":"mcp_toolset","mcp_server_name":"x"}],` +
			`"container":"c1","mcp_servers":[{"type":"url","url":"https://x","name":"x"}]}`,
			"code_execution tools.0 tools.code_execution t0 ffalse u0 ; mcp tools.1 tools.mcp_toolset t1 ffalse u0 ; mcp mcp_servers  t-1 ffalse u0 ; code_execution container  t-1 ffalse u0 "},
		{head + `"hi"}],"mcp_servers":[]}`, ""},
		{head + `[{"type":"image","source":{"type":"file","file_id":"f"}},{"type":"document","source":{"type":"url","url":"https://x/y.pdf"}},` +
			`{"type":"document","source":{"type":"file","file_id":"g"}},{"type":"container_upload","file_id":"h"},{"type":"image","source":{"type":"url","url":"https://x/i.png"}}]}]}`,
			"files messages.0.content.0.source.file_id  t-1 ffalse u0 ; document_url messages.0.content.1.source.url  t-1 ffalse u0 ; " +
				"files messages.0.content.2.source.file_id  t-1 ffalse u0 ; files messages.0.content.3.file_id  t-1 ffalse u0 "},
	} {
		req, ferr := ParseMessagesRequest([]byte(tc.body))
		if ferr != nil {
			t.Fatalf("%s: %v", tc.body, ferr)
		}
		if got := gatedString(req.Gated()); got != tc.want {
			t.Errorf("%s\n got %s\nwant %s", tc.body, got, tc.want)
		}
		if _, ferr := req.ToIR(); ferr == nil && len(req.Gated()) != len(mustParse(t, tc.body).Gated()) {
			t.Errorf("ToIR changed the gated uses")
		}
	}
}

func mustParse(t *testing.T, body string) *MessagesRequest {
	t.Helper()
	req, ferr := ParseMessagesRequest([]byte(body))
	if ferr != nil {
		t.Fatal(ferr)
	}
	return req
}

// TestHostedUsesCounted: searches and fetches are counted from
// usage.server_tool_use and from the server_tool_use blocks, whichever
// shows more, in whole answers and in streams, also when a stream is cut
// before its usage.
func TestHostedUsesCounted(t *testing.T) {
	body := `{"id":"m","type":"message","role":"assistant","model":"x","content":[` +
		`{"type":"server_tool_use","id":"s1","name":"web_search","input":{}},{"type":"web_search_tool_result","tool_use_id":"s1","content":[]},` +
		`{"type":"server_tool_use","id":"s2","name":"web_fetch","input":{}},{"type":"server_tool_use","id":"s3","name":"web_fetch","input":{}},` +
		`{"type":"text","text":"ok"}],"stop_reason":"end_turn","stop_sequence":null,` +
		`"usage":{"input_tokens":10,"output_tokens":5,"server_tool_use":{"web_search_requests":3,"web_fetch_requests":1}}}`
	want := formats.HostedUses{WebSearch: 3, WebFetch: 2}
	if _, u, ferr := PassThroughResponse(nil, []byte(body), "svc"); ferr != nil || u.Hosted != want {
		t.Errorf("pass-through: %+v %v", u.Hosted, ferr)
	}
	if r, ferr := DecodeMessagesResponse([]byte(body)); ferr != nil || r.Usage.Hosted != want {
		t.Errorf("decoded: %+v %v", r.Usage.Hosted, ferr)
	}

	events := [][2]string{
		{"message_start", `{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","model":"x","content":[],"usage":{"input_tokens":10,"output_tokens":1}}}`},
		{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"server_tool_use","id":"s1","name":"web_search","input":{}}}`},
		{"content_block_stop", `{"type":"content_block_stop","index":0}`},
		{"content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"server_tool_use","id":"s2","name":"web_search","input":{}}}`},
		{"content_block_stop", `{"type":"content_block_stop","index":1}`},
		{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":9,"server_tool_use":{"web_search_requests":4,"web_fetch_requests":0}}}`},
		{"message_stop", `{"type":"message_stop"}`},
	}
	for _, tc := range []struct {
		name string
		tr   formats.StreamTranslator
	}{
		{"pass-through", NewPassThroughStream("svc")},
		{"translated", formats.Translate(NewStreamDecoder(), openai.NewStreamEncoder("svc", true))},
	} {
		meter := tc.tr.(formats.HostedMeter)
		for i, ev := range events {
			if _, _, ferr := tc.tr.Feed(nil, []byte(ev[0]), []byte(ev[1])); ferr != nil {
				t.Fatalf("%s: event %d: %v", tc.name, i, ferr)
			}
			if i == 4 && tc.name == "pass-through" && meter.HostedUses() != (formats.HostedUses{WebSearch: 2}) {
				t.Errorf("%s: cut after the blocks: %+v, want 2 searches", tc.name, meter.HostedUses())
			}
		}
		if got := meter.HostedUses(); got != (formats.HostedUses{WebSearch: 4}) {
			t.Errorf("%s: %+v, want the usage's 4 searches", tc.name, got)
		}
		if u, ok := tc.tr.Usage(); !ok || u.Hosted.WebSearch != 4 {
			t.Errorf("%s: usage %+v", tc.name, u)
		}
	}
}
