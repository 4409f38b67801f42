package mockupstream

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The mock's Responses answers follow OpenAI's published OpenAPI schemas,
// the part of them that formats/responses vendors (see its
// testdata/openapi/README.md).
const responsesSpec = "../formats/responses/testdata/openapi/openai-responses.schema.json"

// responsesSchemas are the Response schema and the ResponseStreamEvent
// union, compiled once.
var responsesSchemas = sync.OnceValues(func() (map[string]*jsonschema.Schema, error) {
	f, err := os.Open(responsesSpec)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	const url = "https://mockupstream.test/openai-responses.schema.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	out := map[string]*jsonschema.Schema{}
	for _, name := range []string{"Response", "ResponseStreamEvent"} {
		if out[name], err = c.Compile(url + "#/components/schemas/" + name); err != nil {
			return nil, err
		}
	}
	// each member of the event union under its type, for failures that
	// name what an event lacks
	schemas := doc.(map[string]any)["components"].(map[string]any)["schemas"].(map[string]any)
	for _, m := range schemas["ResponseStreamEvent"].(map[string]any)["anyOf"].([]any) {
		ref := m.(map[string]any)["$ref"].(string)
		ev := schemas[strings.TrimPrefix(ref, "#/components/schemas/")].(map[string]any)
		typ := ev["properties"].(map[string]any)["type"].(map[string]any)["enum"].([]any)[0].(string)
		if out["event: "+typ], err = c.Compile(url + ref); err != nil {
			return nil, err
		}
	}
	return out, nil
})

// checkResponsesSpec fails the test when v is not an instance of the named
// schema.
func checkResponsesSpec(t *testing.T, schema string, v []byte) {
	t.Helper()
	schemas, err := responsesSchemas()
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(v))
	if err != nil {
		t.Fatalf("not JSON: %v\n%s", err, v)
	}
	sch := schemas[schema]
	if sch == nil {
		t.Fatalf("no schema %s for\n%s", schema, v)
	}
	if err := sch.Validate(inst); err != nil {
		t.Errorf("not a valid %s: %v\n%s", schema, err, v)
	}
}

// TestResponsesSpec validates the mock's Responses answers, whole and
// streamed, for each kind of plan: text, reasoning and cached tokens, tool
// calls, a cut-off answer, no usage, hosted tools, background work and a
// mid-stream error.
func TestResponsesSpec(t *testing.T) {
	_, ts := start(t, Config{})
	auth := []string{"Authorization", "Bearer " + testKey}
	const fn = `"tools":[{"type":"function","name":"shell","strict":false,"parameters":{"type":"object","properties":{}}}]`
	for _, tc := range []struct{ name, text, extra string }{
		{"text", "hi mock:tokens=5", ""},
		{"reasoning and cache", "hi mock:tokens=3 mock:reasoning=2 mock:cached=2", ""},
		{"tool call", "hi mock:tool=shell mock:tokens=0", fn},
		{"text and tool calls", "hi mock:tools=2 mock:tokens=2", fn},
		{"cut off", "hi mock:tokens=9 mock:finish=length", ""},
		{"content filter", "hi mock:tokens=1 mock:finish=content_filter", ""},
		{"no usage", "hi mock:tokens=2 mock:no_usage", ""},
		{"web search", "hi mock:web_search=2", `"tools":[{"type":"web_search"}]`},
		{"image generation", "hi mock:image_generation=1", `"tools":[{"type":"image_generation"}]`},
		{"background", "hi", `"background":true`},
		{"error mid-stream", "hi mock:tokens=5 mock:error_after=2", ""},
	} {
		for _, stream := range []bool{false, true} {
			if !stream && strings.Contains(tc.text, "error_after") {
				continue // a stream's failure
			}
			name := tc.name
			if stream {
				name += "/stream"
			}
			t.Run(name, func(t *testing.T) {
				body := `{"model":"gpt-x","input":"` + tc.text + `"`
				if tc.extra != "" {
					body += "," + tc.extra
				}
				if stream {
					body += `,"stream":true`
				}
				status, out := postWith(t, ts, "/v1/responses", body+"}", auth...)
				if status != 200 {
					t.Fatalf("%d %s", status, out)
				}
				if !stream {
					checkResponsesSpec(t, "Response", []byte(out))
					return
				}
				events := strings.Split(strings.TrimSuffix(out, "\n\n"), "\n\n")
				for i, ev := range events {
					name, data, ok := strings.Cut(ev, "\ndata: ")
					if !ok || !strings.HasPrefix(name, "event: ") {
						t.Fatalf("malformed event %q", ev)
					}
					checkResponsesSpec(t, name, []byte(data)) // the event's own schema
					checkResponsesSpec(t, "ResponseStreamEvent", []byte(data))
					var head struct {
						Type     string `json:"type"`
						Sequence int    `json:"sequence_number"`
					}
					if err := json.Unmarshal([]byte(data), &head); err != nil {
						t.Fatal(err)
					}
					if head.Type != strings.TrimPrefix(name, "event: ") || head.Sequence != i {
						t.Errorf("event %d: %s carries type %q, sequence_number %d", i, name, head.Type, head.Sequence)
					}
				}
			})
		}
	}
}
