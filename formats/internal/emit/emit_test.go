package emit

import (
	"strings"
	"testing"

	"github.com/modelgate/modelgate/formats"
)

func TestDefaultMessage(t *testing.T) {
	for k, want := range map[formats.ErrorKind]string{
		formats.KindInvalidRequest: "The request is invalid.",
		formats.KindAuthentication: "Incorrect API key provided.",
		formats.KindRateLimited:    "Rate limit exceeded; retry later.",
		formats.KindTimeout:        "The upstream provider timed out.",
		formats.KindInternal:       "internal",
		formats.ErrorKind(200):     "internal",
	} {
		if got := DefaultMessage(k, "internal"); got != want {
			t.Errorf("DefaultMessage(%d) = %q, want %q", k, got, want)
		}
	}
	for k := formats.KindInvalidRequest; k <= formats.KindTimeout; k++ {
		if DefaultMessage(k, "") == "" && k != formats.KindInternal {
			t.Errorf("kind %d has no message", k)
		}
	}
}

func TestAppendArgs(t *testing.T) {
	for in, want := range map[string]string{
		"":                   `{}`,
		"  \n":               `{}`,
		` { "a" : [1, 2] } `: `{"a":[1,2]}`,
		`{"a":`:              `{"_raw_arguments":"{\"a\":"}`,
		`[1]`:                `{"_raw_arguments":"[1]"}`,
		`not json`:           `{"_raw_arguments":"not json"}`,
	} {
		if got := AppendArgs([]byte("x"), in); string(got) != "x"+want {
			t.Errorf("AppendArgs(%q) = %s, want x%s", in, got, want)
		}
		if got := AppendArgs(nil, []byte(in)); string(got) != want {
			t.Errorf("AppendArgs([]byte %q) = %s, want %s", in, got, want)
		}
	}
}

func TestToolResultText(t *testing.T) {
	img := formats.Part{Type: formats.PartImage, Media: &formats.Media{Data: "AA=="}}
	res := &formats.ToolResult{Parts: []formats.Part{
		{Type: formats.PartText, Text: "one"}, img, {Type: formats.PartThinking, Text: "no"}, {Type: formats.PartText, Text: "two"},
	}}
	var b strings.Builder
	b.WriteString("Error: ")
	media := ToolResultText(&b, res, []formats.Part{{Type: formats.PartAudio}})
	if b.String() != "Error: one\ntwo" {
		t.Errorf("text = %q", b.String())
	}
	if len(media) != 2 || media[0].Type != formats.PartAudio || media[1].Media != img.Media {
		t.Errorf("media = %+v", media)
	}
}

func TestSniffImage(t *testing.T) {
	for data, want := range map[string]string{
		"iVBORw0KGgoAAA": "image/png", "/9j/4AAQ": "image/jpeg", "R0lGODlh": "image/gif", "UklGRlYA": "image/webp", "AAAA": "",
	} {
		if got := SniffImage(data); got != want {
			t.Errorf("SniffImage(%q) = %q, want %q", data, got, want)
		}
	}
}
