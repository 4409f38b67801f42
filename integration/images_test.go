package integration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime/multipart"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/mockupstream"
)

// imageModels are the image models of the images tests: a GPT image model
// (billed by the upstream's token usage), a DALL·E model (no usage: billed
// per image) and a model whose first route is an Anthropic provider (only
// its OpenAI route makes images).
const imageModels = `		model image-test {
			route mock gpt-image-1
			price input 5 output 40
		}
		model dalle-test {
			route mock dall-e-3
			price input 1 output 1 image 0.04
		}
		model mixed-image {
			route mock-anthropic up-claude-test
			route mock gpt-image-1
			price input 5 output 40
		}
`

// Prices of imageModels per token and per image.
const (
	imagePriceIn    = ledger.Money(5000)
	imagePriceOut   = ledger.Money(40000)
	dallePerImage   = ledger.Money(40_000_000)
	imageTestPrompt = "a red fox asleep in fresh snow"
)

// TestImagesGenerate: generations through the OpenAI SDK, billed from the
// upstream's usage or per image, sent only to OpenAI-format routes; bad
// requests refused in OpenAI's envelope with nothing billed.
func TestImagesGenerate(t *testing.T) {
	g := startGateway(t, gatewayOptions{extra: imageModels})
	acct, key := g.account("10.00")
	c := g.client(key)
	ctx := context.Background()
	balance, _ := g.balance(acct)

	// a GPT image model: two images, billed from the upstream's usage
	res, err := c.Images.Generate(ctx, openai.ImageGenerateParams{Model: "image-test", Prompt: imageTestPrompt,
		N: openai.Int(2), Size: openai.ImageGenerateParamsSize1024x1024, Quality: openai.ImageGenerateParamsQualityLow})
	if err != nil {
		t.Fatal(err)
	}
	in, out := int64(mockupstream.ImageTextTokens(imageTestPrompt)), int64(2*mockupstream.ImageOutputTokens("1024x1024", "low"))
	if len(res.Data) != 2 || res.Data[0].B64JSON == "" || res.Usage.InputTokens != in || res.Usage.OutputTokens != out {
		t.Fatalf("answer: %d images, usage %+v", len(res.Data), res.Usage)
	}
	want := ledger.Money(in)*imagePriceIn + ledger.Money(out)*imagePriceOut
	after, held := g.balance(acct)
	row := g.rows(acct)[0]
	if balance-after != want || held != 0 || row.Charged != want || row.ClientFormat != "openai.images" ||
		row.UsageSource != "upstream" || row.UpstreamModel != "gpt-image-1" || row.Tokens.Output != out {
		t.Fatalf("debit %s (want %s), held %s, row %+v", balance-after, want, held, row)
	}
	if up := lastUpstream(t, g); up.Path != "/v1/images/generations" || !strings.Contains(string(up.Body), `"model":"gpt-image-1"`) ||
		!strings.Contains(string(up.Body), `"quality":"low"`) {
		t.Fatalf("upstream got %s %s", up.Path, up.Body)
	}

	// a DALL·E model reports no usage: billed per image
	balance = after
	res, err = c.Images.Generate(ctx, openai.ImageGenerateParams{Model: "dalle-test", Prompt: imageTestPrompt})
	if err != nil {
		t.Fatal(err)
	}
	after, _ = g.balance(acct)
	if row := g.rows(acct)[0]; len(res.Data) != 1 || res.Data[0].URL == "" || balance-after != dallePerImage ||
		row.UsageSource != "image_price" || row.Charged != dallePerImage {
		t.Fatalf("dall-e: %d images, debit %s, row %+v", len(res.Data), balance-after, row)
	}

	// no usage and no per-image price: the images' tokens are estimated,
	// never nothing
	balance = after
	if _, err := c.Images.Generate(ctx, openai.ImageGenerateParams{Model: "image-test", Prompt: "mock:no_usage a fox",
		Quality: openai.ImageGenerateParamsQualityMedium, Size: openai.ImageGenerateParamsSize1536x1024}); err != nil {
		t.Fatal(err)
	}
	after, _ = g.balance(acct)
	estIn := formats.EstimateTokens(int64(len("mock:no_usage a fox")))
	if row := g.rows(acct)[0]; row.UsageSource != "estimated" || row.Tokens.Output != 1584 || row.Tokens.Input != estIn ||
		balance-after != ledger.Money(estIn)*imagePriceIn+1584*imagePriceOut || row.Charged != balance-after {
		t.Fatalf("estimated: debit %s, row %+v", balance-after, row)
	}

	// a model whose first route is Anthropic makes images on its OpenAI route
	if _, err := c.Images.Generate(ctx, openai.ImageGenerateParams{Model: "mixed-image", Prompt: imageTestPrompt}); err != nil {
		t.Fatal(err)
	}
	if row := g.rows(acct)[0]; row.Provider != "mock" || row.UpstreamModel != "gpt-image-1" {
		t.Fatalf("mixed-image row %+v", row)
	}

	// refusals: nothing reaches the upstream, nothing is billed
	balance, _ = g.balance(acct)
	rows := len(g.rows(acct))
	upstreamBefore := g.mock.Stats().Requests
	for _, tc := range []struct {
		name, body string
		status     int
		param      string
	}{
		{"non-OpenAI model", `{"model":"claude-test","prompt":"x"}`, 400, "model"},
		{"Gemini model", `{"model":"gemini-test","prompt":"x"}`, 400, "model"},
		{"unknown model", `{"model":"nope","prompt":"x"}`, 404, "model"},
		{"no prompt", `{"model":"image-test"}`, 400, "prompt"},
		{"n too large", `{"model":"image-test","prompt":"x","n":11}`, 400, "n"},
		{"n not a number", `{"model":"image-test","prompt":"x","n":"two"}`, 400, "n"},
		{"stream", `{"model":"image-test","prompt":"x","stream":true}`, 400, "stream"},
		{"not JSON", `{"model":`, 400, ""},
	} {
		r := g.do("POST", "/v1/images/generations", tc.body, "Authorization", "Bearer "+key)
		var e struct {
			Error struct{ Message, Type, Param string } `json:"error"`
		}
		if err := json.Unmarshal([]byte(r.body), &e); err != nil || r.status != tc.status || e.Error.Param != tc.param || e.Error.Message == "" {
			t.Errorf("%s: %d %s", tc.name, r.status, r.body)
		}
	}
	// the SDK sees the refusal as an API error naming the field
	_, err = c.Images.Generate(ctx, openai.ImageGenerateParams{Model: "claude-test", Prompt: "x"})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "model" || !strings.Contains(apiErr.Message, "OpenAI-format") {
		t.Errorf("SDK error: %v", err)
	}
	if after, held := g.balance(acct); after != balance || held != 0 || len(g.rows(acct)) != rows || g.mock.Stats().Requests != upstreamBefore {
		t.Fatalf("refusals cost %s or reached the upstream (%d)", balance-after, g.mock.Stats().Requests-upstreamBefore)
	}

	// an upstream failure: a 502 in OpenAI's envelope, nothing billed
	g.mock.SetFaults([]mockupstream.Fault{{Mode: mockupstream.FaultStatus, Status: 500}})
	r := g.do("POST", "/v1/images/generations", `{"model":"image-test","prompt":"x"}`, "Authorization", "Bearer "+key)
	g.mock.SetFaults(nil)
	if r.status != 502 || !strings.Contains(r.body, `{"error":{"message":`) {
		t.Fatalf("upstream failure: %d %s", r.status, r.body)
	}
	if after, held := g.balance(acct); after != balance || held != 0 {
		t.Fatalf("a failed image cost %s (held %s)", balance-after, held)
	}
	g.audit()
}

// lastUpstream is the last request the mock received.
func lastUpstream(t *testing.T, g *testGateway) mockupstream.Recorded {
	t.Helper()
	reqs := g.mock.Requests()
	if len(reqs) == 0 {
		t.Fatal("the upstream received nothing")
	}
	return reqs[len(reqs)-1]
}

// uploadSummary is the mock's record of an edit form.
type uploadSummary struct {
	Fields map[string]string `json:"fields"`
	Files  []struct {
		Name, Filename string
		ContentType    string `json:"content_type"`
		Bytes          int64
		SHA256         string
	} `json:"files"`
}

func lastUpload(t *testing.T, g *testGateway) uploadSummary {
	t.Helper()
	up := lastUpstream(t, g)
	var s uploadSummary
	if up.Path != "/v1/images/edits" || json.Unmarshal(up.Body, &s) != nil {
		t.Fatalf("upstream got %s %s", up.Path, up.Body)
	}
	return s
}

// imageBytes is n deterministic bytes standing for an image.
func imageBytes(n int, seed uint64) []byte {
	b := make([]byte, n)
	rng := rand.New(rand.NewPCG(seed, seed))
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// TestImagesEditSDK: an edit with a multi-megabyte image and a mask, sent by
// the OpenAI SDK (which puts the image before the model), arrives at the
// upstream byte for byte with the model rewritten, and is billed from the
// upstream's usage.
func TestImagesEditSDK(t *testing.T) {
	g := startGateway(t, gatewayOptions{extra: imageModels})
	acct, key := g.account("10.00")
	c := g.client(key)
	img, mask := imageBytes(6<<20, 1), imageBytes(64<<10, 2)
	balance, _ := g.balance(acct)
	res, err := c.Images.Edit(context.Background(), openai.ImageEditParams{
		Image:   openai.ImageEditParamsImageUnion{OfFileArray: []io.Reader{openai.File(bytes.NewReader(img), "fox.png", "image/png")}},
		Mask:    openai.File(bytes.NewReader(mask), "mask.png", "image/png"),
		Prompt:  imageTestPrompt,
		Model:   "image-test",
		N:       openai.Int(1),
		Quality: openai.ImageEditParamsQualityLow,
		Size:    openai.ImageEditParamsSize1024x1024,
	})
	if err != nil {
		t.Fatal(err)
	}
	in := int64(mockupstream.ImageTextTokens(imageTestPrompt) + mockupstream.ImageInputTokens)
	out := int64(mockupstream.ImageOutputTokens("1024x1024", "low"))
	if len(res.Data) != 1 || res.Usage.InputTokens != in || res.Usage.OutputTokens != out {
		t.Fatalf("answer: %d images, usage %+v", len(res.Data), res.Usage)
	}
	s := lastUpload(t, g)
	if s.Fields["model"] != "gpt-image-1" || s.Fields["prompt"] != imageTestPrompt || len(s.Files) != 2 {
		t.Fatalf("upstream form: %+v", s)
	}
	for _, f := range s.Files {
		want := img
		if f.Name == "mask" {
			want = mask
		}
		if sum := sha256.Sum256(want); f.SHA256 != hex.EncodeToString(sum[:]) || f.Bytes != int64(len(want)) || f.ContentType != "image/png" {
			t.Fatalf("upstream file %+v differs from what the client sent", f)
		}
	}
	cost := ledger.Money(in)*imagePriceIn + ledger.Money(out)*imagePriceOut
	if after, held := g.balance(acct); balance-after != cost || held != 0 {
		t.Fatalf("debit %s, want %s (held %s)", balance-after, cost, held)
	}
	g.audit()
}

// editForm writes an edit form to w part by part, the image generated as
// it goes; before the image's second half it calls midway.
func editForm(w io.Writer, model string, imageFirst bool, size int, midway func() error) (contentType string, write func() error) {
	mw := multipart.NewWriter(w)
	fields := func() error {
		for _, kv := range [][2]string{{"model", model}, {"prompt", imageTestPrompt}, {"quality", "low"}} {
			if err := mw.WriteField(kv[0], kv[1]); err != nil {
				return err
			}
		}
		return nil
	}
	image := func() error {
		part, err := mw.CreateFormFile("image[]", "big.png")
		if err != nil {
			return err
		}
		chunk := imageBytes(1<<20, 3)
		for i := 0; i < size>>20; i++ {
			if i == size>>21 && midway != nil {
				if err := midway(); err != nil {
					return err
				}
			}
			if _, err := part.Write(chunk); err != nil {
				return err
			}
		}
		return nil
	}
	return mw.FormDataContentType(), func() error {
		first, second := fields, image
		if imageFirst {
			first, second = image, fields
		}
		if err := first(); err != nil {
			return err
		}
		if err := second(); err != nil {
			return err
		}
		return mw.Close()
	}
}

// postForm sends the form that form writes to w as it is written, never
// held whole.
func postForm(t *testing.T, key string, form func(w io.Writer) (contentType string, write func() error)) response {
	t.Helper()
	pr, pw := io.Pipe()
	contentType, write := form(pw)
	go func() { pw.CloseWithError(write()) }()
	req, _ := http.NewRequest("POST", gatewayAddr+"/v1/images/edits", pr)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", contentType)
	return send(t, http.DefaultClient, req)
}

// TestImagesEditStreamsUpload: a form is forwarded as it arrives. With the
// model first, the upstream has the image's first half before the client
// sends the second; with the image first (spooled to disk until the model
// is known) memory stays bounded just the same; a form over the limit is a
// 413 whichever way it comes, with nothing billed.
func TestImagesEditStreamsUpload(t *testing.T) {
	g := startGateway(t, gatewayOptions{extra: imageModels + "\t\tmax_request_body 16MiB\n"})
	acct, key := g.account("10.00")
	const size = 24 << 20 // within the images limit of twice max_request_body

	allocated := func() uint64 {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.TotalAlloc
	}
	for _, imageFirst := range []bool{false, true} {
		name := map[bool]string{false: "model first", true: "image first"}[imageFirst]
		var midway func() error
		if !imageFirst {
			// the upstream must see the image's first half while the
			// client holds back the second
			midway = func() error {
				deadline := time.Now().Add(10 * time.Second)
				for g.mock.UploadedBytes() < 4<<20 {
					if time.Now().After(deadline) {
						return fmt.Errorf("the upstream got %d bytes of the image's first half: the gateway holds the upload back", g.mock.UploadedBytes())
					}
					time.Sleep(5 * time.Millisecond)
				}
				return nil
			}
		}
		before, uploaded := allocated(), g.mock.UploadedBytes()
		balance, _ := g.balance(acct)
		r := postForm(t, key, func(w io.Writer) (string, func() error) {
			return editForm(w, "image-test", imageFirst, size, midway)
		})
		grown := allocated() - before
		if r.status != 200 {
			t.Fatalf("%s: %d %s", name, r.status, r.body)
		}
		if got := g.mock.UploadedBytes() - uploaded; got != size {
			t.Fatalf("%s: the upstream got %d bytes of %d", name, got, size)
		}
		// the gateway, the mock and the client all run in this process:
		// a body held whole anywhere would allocate at least its size
		if grown > size/2 {
			t.Errorf("%s: %d MiB allocated to forward a %d MiB upload", name, grown>>20, size>>20)
		}
		in := int64(mockupstream.ImageTextTokens(imageTestPrompt) + mockupstream.ImageInputTokens)
		out := int64(mockupstream.ImageOutputTokens("", "low"))
		if after, held := g.balance(acct); balance-after != ledger.Money(in)*imagePriceIn+ledger.Money(out)*imagePriceOut || held != 0 {
			t.Fatalf("%s: debit %s, held %s", name, balance-after, held)
		}
		if s := lastUpload(t, g); s.Fields["model"] != "gpt-image-1" {
			t.Fatalf("%s: upstream form %+v", name, s)
		}
	}

	// over the limit (32 MiB), model first (forwarded live) and image first
	// (spooled): 413, nothing billed
	balance, _ := g.balance(acct)
	rows := len(g.rows(acct))
	for _, imageFirst := range []bool{false, true} {
		r := postForm(t, key, func(w io.Writer) (string, func() error) {
			return editForm(w, "image-test", imageFirst, 40<<20, nil)
		})
		if r.status != 413 || !strings.Contains(r.body, `"invalid_request_error"`) {
			t.Errorf("image first %v: %d %s", imageFirst, r.status, r.body)
		}
	}
	if after, held := g.balance(acct); after != balance || held != 0 || len(g.rows(acct)) != rows {
		t.Fatalf("an upload over the limit cost %s (held %s)", balance-after, held)
	}

	// refusals of the form itself
	for _, tc := range []struct {
		name, contentType, body string
		status                  int
		param                   string
	}{
		{"JSON body", "application/json", `{"model":"image-test","prompt":"x"}`, 400, ""},
		{"no image", "multipart/form-data; boundary=B", "--B\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nimage-test\r\n" +
			"--B\r\nContent-Disposition: form-data; name=\"prompt\"\r\n\r\nx\r\n--B--\r\n", 400, "image"},
		{"no model", "multipart/form-data; boundary=B", "--B\r\nContent-Disposition: form-data; name=\"prompt\"\r\n\r\nx\r\n--B--\r\n", 400, "model"},
		{"non-OpenAI model", "multipart/form-data; boundary=B", "--B\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nclaude-test\r\n" +
			"--B\r\nContent-Disposition: form-data; name=\"image\"; filename=\"a.png\"\r\n\r\nPNG\r\n--B--\r\n", 400, "model"},
		{"broken form", "multipart/form-data; boundary=B", "--B\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nimage-test", 400, ""},
		{"n out of range", "multipart/form-data; boundary=B", "--B\r\nContent-Disposition: form-data; name=\"n\"\r\n\r\n0\r\n--B--\r\n", 400, "n"},
	} {
		r := g.do("POST", "/v1/images/edits", tc.body, "Authorization", "Bearer "+key, "Content-Type", tc.contentType)
		var e struct {
			Error struct{ Message, Param string } `json:"error"`
		}
		if json.Unmarshal([]byte(r.body), &e) != nil || r.status != tc.status || e.Error.Param != tc.param {
			t.Errorf("%s: %d %s", tc.name, r.status, r.body)
		}
	}
	if after, held := g.balance(acct); after != balance || held != 0 || len(g.rows(acct)) != rows {
		t.Fatalf("refused forms cost %s (held %s)", balance-after, held)
	}
	g.audit()
}
