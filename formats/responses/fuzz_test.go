package responses

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/modelgate/modelgate/formats/anthropic"
	"github.com/modelgate/modelgate/formats/openai"
)

// FuzzParseRequest: any body is accepted or refused with a 400, never a
// panic; an accepted one rewrites to valid JSON, and its translation, when
// it has one, renders as valid JSON.
func FuzzParseRequest(f *testing.F) {
	files, _ := filepath.Glob("testdata/request/*.json")
	for _, file := range files {
		b, _ := os.ReadFile(file)
		f.Add(b)
	}
	f.Add([]byte(`{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"x"}]}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, ferr := ParseRequest(body)
		if ferr != nil {
			if ferr.Status() != 400 {
				t.Fatalf("status %d", ferr.Status())
			}
			return
		}
		out, err := Rewrite(nil, body, "up", 77)
		if err != nil || !jsontext.Value(out).IsValid() {
			t.Fatalf("rewrite: %v %s", err, out)
		}
		ir, ferr := req.ToIR()
		if ferr != nil {
			if ferr.Status() != 400 {
				t.Fatalf("ToIR status %d", ferr.Status())
			}
			return
		}
		ir.MaxTokens = 100
		if r, ferr := openai.RenderChatRequest(ir, "up"); ferr == nil && !jsontext.Value(r).IsValid() {
			t.Fatalf("chat: invalid JSON %s", r)
		}
		ir, _ = req.ToIR()
		ir.MaxTokens = 100
		if r, ferr := anthropic.RenderMessagesRequest(ir, "up"); ferr == nil && !jsontext.Value(r).IsValid() {
			t.Fatalf("anthropic: invalid JSON %s", r)
		}
	})
}
