package formats_test

import (
	"testing"

	"github.com/modelgate/modelgate/formats"

	_ "github.com/modelgate/modelgate/formats/images"
	_ "github.com/modelgate/modelgate/formats/responses"
)

// TestCodecTable checks what the gateway reads of the table without
// calling a vendor: each wire's name, codec, provider and upstream paths.
func TestCodecTable(t *testing.T) {
	for _, tc := range []struct {
		wire                                     formats.Wire
		name, provider, prefix                   string
		path, streamPath, countPath, streamQuery string
	}{
		{formats.WireChat, "openai.chat", "openai", "call_", "/v1/chat/completions", "/v1/chat/completions", "/v1/chat/completions", ""},
		{formats.WireMessages, "anthropic", "anthropic", "toolu_", "/v1/messages", "/v1/messages", "/v1/messages/count_tokens", ""},
		{formats.WireGenerate, "gemini", "gemini", "call_", "/v1beta/models/m%2F1:generateContent",
			"/v1beta/models/m%2F1:streamGenerateContent", "/v1beta/models/m%2F1:countTokens", "alt=sse"},
		{formats.WireResponses, "openai.responses", "", "call_", "/v1/responses", "/v1/responses", "/v1/responses", ""},
		{formats.WireImages, "openai.images", "", "call_", "", "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.wire.String(); got != tc.name {
				t.Errorf("String() = %q", got)
			}
			c := formats.CodecOf(tc.wire)
			if c == nil {
				t.Fatal("not registered")
			}
			if c.Provider != tc.provider || c.ToolIDPrefix != tc.prefix {
				t.Errorf("Provider, ToolIDPrefix = %q, %q", c.Provider, c.ToolIDPrefix)
			}
			if c.AppendError == nil || c.ErrorStatus == nil || c.StreamContentType == nil {
				t.Error("a client codec without its errors or stream type")
			}
			if tc.provider != "" && formats.ProviderCodec(tc.provider) != c {
				t.Errorf("ProviderCodec(%q) is another codec", tc.provider)
			}
			if tc.path == "" {
				return
			}
			for _, p := range []struct {
				stream, count bool
				path, query   string
			}{{false, false, tc.path, ""}, {true, false, tc.streamPath, tc.streamQuery}, {false, true, tc.countPath, ""}} {
				if path, query := c.Path("m/1", p.stream, p.count); path != p.path || query != p.query {
					t.Errorf("Path(stream %v, count %v) = %q, %q", p.stream, p.count, path, query)
				}
			}
		})
	}
	if formats.ProviderCodec("azure") != nil {
		t.Error("a codec for an unknown provider format")
	}
	if got := formats.Wire(200).String(); got != "openai.chat" {
		t.Errorf("an unknown wire is named %q", got)
	}
	if formats.CodecOf(200) != formats.CodecOf(formats.WireChat) {
		t.Error("an unknown wire is not served as Chat Completions")
	}
}
