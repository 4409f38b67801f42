package formats

import "testing"

func TestBodyEdits(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edits BodyEdits
		in    string
		want  string
	}{
		{"nothing", BodyEdits{}, `{"a": 1, "tools":[ {"x":1} ]}`, `{"a": 1, "tools":[ {"x":1} ]}`},
		{"drop elements", BodyEdits{Tools: []ToolEdit{{Index: 0, Drop: true}, {Index: 2, Drop: true}}},
			`{"tools":[{"a":1}, {"b":2}, {"c":3}],"z":true}`, `{"tools":[{"b":2}],"z":true}`},
		{"drop every element", BodyEdits{Tools: []ToolEdit{{Index: 0, Drop: true}}},
			`{"tools":[{"a":1}]}`, `{"tools":[]}`},
		{"drop a member", BodyEdits{Tools: []ToolEdit{{Index: 0, DropMember: "google_search"}}},
			`{"tools":[{"google_search":{}, "functionDeclarations":[{"name":"f"}]}]}`, `{"tools":[{"functionDeclarations":[{"name":"f"}]}]}`},
		{"drop the last member", BodyEdits{Tools: []ToolEdit{{Index: 1, DropMember: "googleMaps"}}},
			`{"tools":[{"googleSearch":{}},{"googleMaps":{}}]}`, `{"tools":[{"googleSearch":{}}]}`},
		{"add when absent", BodyEdits{Tools: []ToolEdit{{Index: 0, Add: []Member{IntMember("max_uses", 5), IntMember("max_content_tokens", 9)}}}},
			`{"tools":[{"type":"web_fetch_20250910","max_content_tokens":100}]}`,
			`{"tools":[{"type":"web_fetch_20250910","max_content_tokens":100,"max_uses":5}]}`},
		{"add to an empty object", BodyEdits{Tools: []ToolEdit{{Index: 0, Add: []Member{IntMember("n", 1)}}}},
			`{"tools":[{}]}`, `{"tools":[{"n":1}]}`},
		{"no tools member", BodyEdits{Tools: []ToolEdit{{Index: 0, Drop: true}}}, `{"a":1}`, `{"a":1}`},
		{"delete a top member", BodyEdits{Delete: []string{"web_search_options"}},
			`{"model":"m","web_search_options":{},"n":1}`, `{"model":"m","n":1}`},
		{"set when absent or null", BodyEdits{SetIfAbsent: []Member{{"store", []byte("false")}, {"max_tool_calls", []byte("5")}}},
			`{"model":"m","store":null}`, `{"model":"m","store":false,"max_tool_calls":5}`},
		{"keep what is set", BodyEdits{SetIfAbsent: []Member{{"store", []byte("false")}}},
			`{"store":true}`, `{"store":true}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.edits.Apply([]byte("prefix:"), []byte(tc.in))
			if err != nil || string(got) != "prefix:"+tc.want {
				t.Errorf("got %s, %v\nwant prefix:%s", got, err, tc.want)
			}
		})
	}
	if _, err := (&BodyEdits{Tools: []ToolEdit{{Index: 0, Drop: true}}}).Apply(nil, []byte(`{"tools":[1,}`)); err == nil {
		t.Error("a malformed tools array: want an error")
	}
	var e BodyEdits
	e.AddTop(Member{"store", []byte("false")})
	e.AddTop(Member{"store", []byte("true")})
	if len(e.SetIfAbsent) != 1 || string(e.SetIfAbsent[0].Value) != "false" {
		t.Errorf("AddTop twice: %+v", e.SetIfAbsent)
	}
}

func TestHostedUses(t *testing.T) {
	var h HostedUses
	h.Add(HostedWebSearch, 2)
	h.Add(HostedWebFetch, 1)
	h.Add(HostedImageGeneration, 3)
	h.Add(HostedUnmetered, 7) // not counted
	h.Add(HostedNone, 7)
	if h != (HostedUses{2, 1, 3}) || h.Get(HostedWebSearch) != 2 || h.Get(HostedUnmetered) != 0 {
		t.Fatalf("%+v", h)
	}
	if m := h.Max(HostedUses{WebSearch: 5}); m != (HostedUses{5, 1, 3}) {
		t.Errorf("Max %+v", m)
	}
	if h.IsZero() || !(HostedUses{}).IsZero() {
		t.Error("IsZero")
	}
	if u := (Usage{Input: 1, Hosted: h}).Tokens(); u != (Usage{Input: 1}) {
		t.Errorf("Tokens %+v", u)
	}
	for _, tc := range []struct {
		g    Gated
		want int64
	}{{Gated{}, DefaultHostedUses}, {Gated{MaxUses: 2}, 2}, {Gated{MaxUses: 1 << 40}, MaxHostedUses}} {
		if got := tc.g.Uses(); got != tc.want {
			t.Errorf("Uses(%d) = %d, want %d", tc.g.MaxUses, got, tc.want)
		}
	}
	for _, k := range PricedHostedKinds {
		if got, ok := ParseHostedKind(k.String()); !ok || got != k {
			t.Errorf("ParseHostedKind(%s)", k)
		}
	}
	if _, ok := ParseHostedKind("unmetered"); ok {
		t.Error("unmetered is not a price")
	}
	for s := StateStore; s < StateBackground; s++ {
		if got, ok := ParseState(s.String()); !ok || got != s || !s.Configurable() {
			t.Errorf("ParseState(%s)", s)
		}
	}
	for _, s := range []string{"background", "document_url", "", "all"} {
		if _, ok := ParseState(s); ok {
			t.Errorf("ParseState(%q) allowed", s)
		}
	}
}
