package images

import (
	"bytes"
	"io"
	"mime/multipart"
	"strings"
	"testing"

	"github.com/modelgate/modelgate/formats"
)

func TestParseGeneration(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       Request
		param      string // the refused field, "" when accepted
		refused    bool
	}{
		{name: "minimal", body: `{"model":"m","prompt":"a fox"}`, want: Request{Model: "m", Prompt: "a fox", N: 1}},
		{name: "full", body: `{"model":"m","prompt":"p","n":3,"size":"1536x1024","quality":"high","response_format":"b64_json","stream":false,"user":"u"}`,
			want: Request{Model: "m", Prompt: "p", N: 3, NGiven: true, Size: "1536x1024", Quality: "high"}},
		{name: "nulls", body: `{"model":"m","prompt":"p","n":null,"size":null,"stream":null}`, want: Request{Model: "m", Prompt: "p", N: 1}},
		{name: "no model", body: `{"prompt":"p"}`, param: "model", refused: true},
		{name: "empty prompt", body: `{"model":"m","prompt":""}`, param: "prompt", refused: true},
		{name: "prompt not a string", body: `{"model":"m","prompt":5}`, param: "prompt", refused: true},
		{name: "n zero", body: `{"model":"m","prompt":"p","n":0}`, param: "n", refused: true},
		{name: "n eleven", body: `{"model":"m","prompt":"p","n":11}`, param: "n", refused: true},
		{name: "n fraction", body: `{"model":"m","prompt":"p","n":1.5}`, param: "n", refused: true},
		{name: "stream", body: `{"model":"m","prompt":"p","stream":true}`, param: "stream", refused: true},
		{name: "stream not a bool", body: `{"model":"m","prompt":"p","stream":"yes"}`, param: "stream", refused: true},
		{name: "prompt too long", body: `{"model":"m","prompt":"` + strings.Repeat("é", MaxPromptRunes+1) + `"}`, param: "prompt", refused: true},
		{name: "array", body: `[]`, refused: true},
		{name: "null", body: `null`, refused: true},
		{name: "truncated", body: `{"model":"m"`, refused: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, ferr := ParseGeneration([]byte(tc.body))
			if tc.refused {
				if ferr == nil || ferr.Kind != formats.KindInvalidRequest || ferr.Param != tc.param || ferr.Message == "" {
					t.Fatalf("got %+v, %+v; want a 400 on %q", q, ferr, tc.param)
				}
				return
			}
			if ferr != nil || *q != tc.want {
				t.Fatalf("got %+v, %+v; want %+v", q, ferr, tc.want)
			}
		})
	}
}

func TestRewriteGeneration(t *testing.T) {
	got, err := RewriteGeneration(nil, []byte(`{"prompt":"p", "model":"mine","n":2}`), "gpt-image-1")
	if err != nil || string(got) != `{"prompt":"p", "model":"gpt-image-1","n":2}` {
		t.Fatalf("%s %v", got, err)
	}
}

func TestParseAnswer(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       Answer
		err        bool
	}{
		{name: "gpt image", body: `{"created":1,"data":[{"b64_json":"QUJD"},{"b64_json":"REVG"}],"usage":{"input_tokens":50,"input_tokens_details":{"text_tokens":40,"image_tokens":10},"output_tokens":4160,"total_tokens":4210}}`,
			want: Answer{Images: 2, Usage: formats.Usage{Input: 50, Output: 4160}, HasUsage: true}},
		{name: "dall-e", body: `{"created":1,"data":[{"url":"https://x/y.png","revised_prompt":"p"}]}`, want: Answer{Images: 1}},
		{name: "no images", body: `{"created":1,"data":[]}`, want: Answer{}},
		{name: "negative usage ignored", body: `{"data":[{}],"usage":{"input_tokens":-5,"output_tokens":7}}`,
			want: Answer{Images: 1, Usage: formats.Usage{Output: 7}, HasUsage: true}},
		{name: "no data", body: `{"created":1}`, err: true},
		{name: "not JSON", body: `<html>`, err: true},
		{name: "broken data", body: `{"data":[{"b64_json":"QU`, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := ParseAnswer([]byte(tc.body))
			if (err != nil) != tc.err || a != tc.want {
				t.Fatalf("got %+v, %v; want %+v (error %v)", a, err, tc.want, tc.err)
			}
		})
	}
}

// form builds a multipart body from parts given as name, filename, content.
func form(t *testing.T, parts ...[3]string) (body []byte, boundary string) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for _, p := range parts {
		var w io.Writer
		var err error
		if p[1] == "" {
			w, err = mw.CreateFormField(p[0])
		} else {
			w, err = mw.CreateFormFile(p[0], p[1])
		}
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, p[2])
	}
	mw.Close()
	return b.Bytes(), mw.Boundary()
}

// forwarded writes f with upstreamModel and reads the result back.
func forwarded(t *testing.T, f *Form, upstreamModel string) [][3]string {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	if err := f.WriteTo(mw, upstreamModel); err != nil {
		t.Fatal(err)
	}
	mw.Close()
	mr := multipart.NewReader(&b, mw.Boundary())
	var out [][3]string
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(p)
		out = append(out, [3]string{p.FormName(), p.FileName(), string(data)})
	}
}

func TestFormForwarding(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 1<<14) // 256 KiB
	for _, tc := range []struct {
		name       string
		parts      [][3]string
		replayable bool
	}{
		// the SDKs' order: the image before the model, so everything is
		// read before routing and the form can be sent again
		{"image first", [][3]string{{"image[]", "a.png", big}, {"mask", "m.png", "MASK"}, {"model", "", "mine"}, {"n", "", "2"}, {"prompt", "", "a fox"}}, true},
		// curl's usual order: the model first, the image forwarded live
		{"model first", [][3]string{{"model", "", "mine"}, {"prompt", "", "a fox"}, {"image", "a.png", big}, {"n", "", "2"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, boundary := form(t, tc.parts...)
			f, ferr := ReadForm(bytes.NewReader(body), boundary, FormOptions{Limit: int64(len(body))})
			if ferr != nil {
				t.Fatal(ferr)
			}
			defer f.Close()
			if f.Model != "mine" || f.Replayable() != true {
				t.Fatalf("read %+v", f.Request)
			}
			want := make([][3]string, len(tc.parts))
			copy(want, tc.parts)
			for i := range want {
				if want[i][0] == "model" {
					want[i][2] = "up-model"
				}
			}
			got := forwarded(t, f, "up-model")
			if len(got) != len(want) {
				t.Fatalf("forwarded %d parts, want %d", len(got), len(want))
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("part %d: %.40q, want %.40q", i, got[i], want[i])
				}
			}
			if f.Replayable() != tc.replayable || f.N != 2 || !f.NGiven || f.Prompt != "a fox" {
				t.Fatalf("after forwarding: replayable %v, request %+v", f.Replayable(), f.Request)
			}
			if tc.replayable {
				if again := forwarded(t, f, "other"); len(again) != len(want) || again[0] != want[0] {
					t.Fatalf("sent again: %d parts", len(again))
				}
			} else if err := f.WriteTo(multipart.NewWriter(io.Discard), "x"); err == nil {
				t.Fatal("a form forwarded live was sent twice")
			}
		})
	}
}

func TestReadFormRefusals(t *testing.T) {
	img := [3]string{"image", "a.png", "PNG"}
	model := [3]string{"model", "", "m"}
	prompt := [3]string{"prompt", "", "p"}
	many := make([][3]string, 0, 20)
	for range maxImages + 1 {
		many = append(many, img)
	}
	for _, tc := range []struct {
		name  string
		parts [][3]string
		limit int64 // 0: the body's size
		kind  formats.ErrorKind
		param string
	}{
		{"no model", [][3]string{img, prompt}, 0, formats.KindInvalidRequest, "model"},
		{"no prompt", [][3]string{img, model}, 0, formats.KindInvalidRequest, "prompt"},
		{"no image", [][3]string{model, prompt}, 0, formats.KindInvalidRequest, "image"},
		{"n not a number", [][3]string{{"n", "", "two"}}, 0, formats.KindInvalidRequest, "n"},
		{"stream", [][3]string{{"stream", "", "true"}}, 0, formats.KindInvalidRequest, "stream"},
		{"too many images", many, 0, formats.KindInvalidRequest, "image"},
		{"over the limit", [][3]string{img, {"image", "b.png", strings.Repeat("x", 4096)}, model, prompt}, 1024, formats.KindRequestTooLarge, ""},
		{"text field too long", [][3]string{{"prompt", "", strings.Repeat("x", maxTextField+1)}}, 0, formats.KindInvalidRequest, "prompt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, boundary := form(t, tc.parts...)
			limit := tc.limit
			if limit == 0 {
				limit = int64(len(body))
			}
			f, ferr := ReadForm(bytes.NewReader(body), boundary, FormOptions{Limit: limit})
			if ferr == nil || ferr.Kind != tc.kind || ferr.Param != tc.param {
				t.Fatalf("got %+v, %+v", f, ferr)
			}
		})
	}
	// a body cut short (the image first, so it is all read before
	// routing), a wrong boundary
	body, boundary := form(t, img, model, prompt)
	for _, b := range [][]byte{body[:len(body)-10], body} {
		bd := boundary
		if len(b) == len(body) {
			bd = "other"
		}
		if _, ferr := ReadForm(bytes.NewReader(b), bd, FormOptions{Limit: 1 << 20}); ferr == nil || ferr.Kind != formats.KindInvalidRequest {
			t.Fatalf("a broken form was read: %+v", ferr)
		}
	}
}

// A live part over the limit is the client's failure, told apart from the
// writer's.
func TestFormLiveClientError(t *testing.T) {
	body, boundary := form(t, [3]string{"model", "", "m"}, [3]string{"image", "a.png", strings.Repeat("x", 8192)})
	f, ferr := ReadForm(bytes.NewReader(body), boundary, FormOptions{Limit: 1024})
	if ferr != nil {
		t.Fatal(ferr)
	}
	defer f.Close()
	err := f.WriteTo(multipart.NewWriter(io.Discard), "up")
	ce, ok := err.(*ClientError)
	if !ok || ce.Err.Kind != formats.KindRequestTooLarge {
		t.Fatalf("got %v", err)
	}
}

func TestOutputTokens(t *testing.T) {
	for _, tc := range []struct {
		size, quality string
		want          int64
	}{
		{"1024x1024", "low", 272}, {"1024x1024", "medium", 1056}, {"1024x1024", "high", 4160},
		{"1536x1024", "low", 408}, {"1024x1536", "high", 6240}, {"auto", "auto", 6240}, {"", "", 6240},
	} {
		if got := OutputTokens(tc.size, tc.quality); got != tc.want {
			t.Errorf("%s %s: %d, want %d", tc.size, tc.quality, got, tc.want)
		}
	}
}
