package responses

import (
	"fmt"
	"strings"
	"testing"

	"github.com/modelgate/modelgate/formats"
)

func gatedString(gs []formats.Gated) string {
	var b []string
	for _, g := range gs {
		var add []string
		for _, m := range g.TopAdd {
			add = append(add, m.Name+"="+string(m.Value))
		}
		b = append(b, fmt.Sprintf("%s%s %s %s t%d f%v u%d %s", g.State, g.Hosted, g.Param, g.Label, g.Tool, g.Forced, g.MaxUses, strings.Join(add, ",")))
	}
	return strings.Join(b, "; ")
}

// TestGated: the hosted tools with fees and the stored state a Responses
// request reaches.
func TestGated(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"model":"m","input":"hi","store":false,"background":false}`, ""},
		{`{"model":"m","input":"hi","store":true,"background":true,"previous_response_id":"r","conversation":{"id":"c"},"prompt":{"id":"p"}}`,
			"background background  t-1 ffalse u0 ; store store  t-1 ffalse u0 ; conversation previous_response_id  t-1 ffalse u0 ; " +
				"conversation conversation  t-1 ffalse u0 ; prompt prompt  t-1 ffalse u0 "},
		{`{"model":"m","input":[{"type":"item_reference","id":"i"},{"role":"user","content":[{"type":"input_image","file_id":"f"},` +
			`{"type":"input_file","file_url":"https://x/y.pdf"},{"type":"input_file","file_id":"g"}]}]}`,
			"conversation input[0]  t-1 ffalse u0 ; files input[1].content[0].file_id  t-1 ffalse u0 ; " +
				"document_url input[1].content[1].file_url  t-1 ffalse u0 ; files input[1].content[2].file_id  t-1 ffalse u0 "},
		{`{"model":"m","input":"hi","tools":[{"type":"function","name":"f"},{"type":"web_search_preview"},{"type":"image_generation"},` +
			`{"type":"file_search","vector_store_ids":["v"]},{"type":"code_interpreter"},{"type":"mcp","server_label":"x"},{"type":"custom","name":"c"}],` +
			`"tool_choice":{"type":"web_search_preview"}}`,
			"web_search tools[1] web_search_preview t1 ftrue u0 max_tool_calls=5; image_generation tools[2] image_generation t2 ffalse u0 max_tool_calls=5; " +
				"file_search tools[3] file_search t3 ffalse u0 ; code_execution tools[4] code_interpreter t4 ffalse u0 ; mcp tools[5] mcp t5 ffalse u0 "},
		{`{"model":"m","input":"hi","tools":[{"type":"web_search"}],"max_tool_calls":2,"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[{"type":"web_search"}]}}`,
			"web_search tools[0] web_search t0 ftrue u2 "},
	} {
		req, ferr := ParseRequest([]byte(tc.body))
		if ferr != nil {
			t.Fatalf("%s: %v", tc.body, ferr)
		}
		if got := gatedString(req.Gated()); got != tc.want {
			t.Errorf("%s\n got %s\nwant %s", tc.body, got, tc.want)
		}
	}
	if _, ferr := ParseRequest([]byte(`{"model":"m","input":"hi","max_tool_calls":0}`)); ferr == nil || ferr.Param != "max_tool_calls" {
		t.Errorf("max_tool_calls 0: %v", ferr)
	}
}

// TestHostedItemsCounted: web_search_call and image_generation_call items
// are counted in whole answers and in streams, from the items added (a
// stream cut before its terminal event) or the terminal response.
func TestHostedItemsCounted(t *testing.T) {
	body := `{"id":"r","object":"response","status":"completed","model":"x","output":[{"type":"web_search_call","id":"ws1","status":"completed"},` +
		`{"type":"web_search_call","id":"ws2","status":"completed"},{"type":"image_generation_call","id":"ig1","status":"completed"},` +
		`{"type":"message","id":"m","role":"assistant","content":[{"type":"output_text","text":"ok"}]}],"usage":{"input_tokens":3,"output_tokens":4}}`
	if _, u, ferr := PassThrough(nil, []byte(body), "svc"); ferr != nil || u.Hosted != (formats.HostedUses{WebSearch: 2, ImageGeneration: 1}) {
		t.Errorf("pass-through: %+v %v", u.Hosted, ferr)
	}
	tr := NewPassThroughStream("svc")
	meter := tr.(formats.HostedMeter)
	feed := func(typ, data string) {
		t.Helper()
		if _, _, ferr := tr.Feed(nil, []byte(typ), []byte(data)); ferr != nil {
			t.Fatal(ferr)
		}
	}
	feed("response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"r","status":"in_progress","model":"x","output":[]}}`)
	feed("response.output_item.added", `{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"web_search_call","id":"ws1","status":"in_progress"}}`)
	feed("response.output_item.added", `{"type":"response.output_item.added","sequence_number":2,"output_index":1,"item":{"type":"web_search_call","id":"ws2","status":"in_progress"}}`)
	if got := meter.HostedUses(); got != (formats.HostedUses{WebSearch: 2}) {
		t.Errorf("cut after two searches: %+v", got)
	}
	feed("response.completed", `{"type":"response.completed","sequence_number":3,"response":{"id":"r","status":"completed","model":"x",`+
		`"output":[{"type":"web_search_call"},{"type":"web_search_call"},{"type":"web_search_call"}],"usage":{"input_tokens":1,"output_tokens":1}}}`)
	if u, ok := tr.Usage(); !ok || u.Hosted != (formats.HostedUses{WebSearch: 3}) || meter.HostedUses() != u.Hosted {
		t.Errorf("after the terminal response: %+v", u.Hosted)
	}
}
