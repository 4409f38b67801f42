package mockupstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
)

// TestImages: both images routes through the OpenAI SDK, in their real
// shapes, with usage for GPT image models only, the form of an edit
// recorded as a summary, and failures.
func TestImages(t *testing.T) {
	s, ts := start(t, Config{Keys: []string{testKey}})
	c := sdk(ts, testKey)

	res, err := c.Images.Generate(ctxT(t), openai.ImageGenerateParams{Model: "gpt-image-1", Prompt: "a red fox",
		N: openai.Int(3), Quality: openai.ImageGenerateParamsQualityMedium, Size: openai.ImageGenerateParamsSize1536x1024})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Data) != 3 || res.Data[0].B64JSON == "" || res.Usage.InputTokens != 3 || res.Usage.OutputTokens != 3*1584 ||
		res.Usage.InputTokensDetails.TextTokens != 3 || res.Size != "1536x1024" || res.Quality != "medium" {
		t.Fatalf("generation: %s", res.RawJSON())
	}

	res, err = c.Images.Generate(ctxT(t), openai.ImageGenerateParams{Model: "dall-e-3", Prompt: "a red fox"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Data) != 1 || res.Data[0].URL == "" || res.Data[0].RevisedPrompt != "a red fox" || strings.Contains(res.RawJSON(), `"usage"`) {
		t.Fatalf("dall-e-3: %s", res.RawJSON())
	}

	img := bytes.Repeat([]byte("PNG!"), 1<<18) // 1 MiB
	res, err = c.Images.Edit(ctxT(t), openai.ImageEditParams{
		Image:  openai.ImageEditParamsImageUnion{OfFileArray: []io.Reader{openai.File(bytes.NewReader(img), "a.png", "image/png"), openai.File(strings.NewReader("two"), "b.png", "image/png")}},
		Prompt: "add a scarf", Model: "gpt-image-1", Quality: openai.ImageEditParamsQualityLow,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Usage.InputTokens != int64(3+2*ImageInputTokens) || res.Usage.OutputTokens != 272 || s.UploadedBytes() != int64(len(img)+3) {
		t.Fatalf("edit: %s (uploaded %d)", res.RawJSON(), s.UploadedBytes())
	}
	reqs := s.Requests()
	var summary struct {
		Fields map[string]string
		Files  []struct {
			Name  string
			Bytes int64
		}
		Served *ImagesServed
	}
	if err := json.Unmarshal(reqs[len(reqs)-1].Body, &summary); err != nil || summary.Fields["prompt"] != "add a scarf" ||
		len(summary.Files) != 2 || summary.Files[0].Bytes != int64(len(img)) ||
		summary.Served == nil || *summary.Served != (ImagesServed{Images: 1, InputTokens: 3 + 2*ImageInputTokens, OutputTokens: 272}) {
		t.Fatalf("recorded %s", reqs[len(reqs)-1].Body)
	}

	// high input fidelity: each input image counts far more
	res, err = c.Images.Edit(ctxT(t), openai.ImageEditParams{
		Image:  openai.ImageEditParamsImageUnion{OfFileArray: []io.Reader{openai.File(strings.NewReader("one"), "a.png", "image/png"), openai.File(strings.NewReader("two"), "b.png", "image/png")}},
		Prompt: "add a scarf", Model: "gpt-image-1", Quality: openai.ImageEditParamsQualityLow, InputFidelity: openai.ImageEditParamsInputFidelityHigh,
	})
	if err != nil || res.Usage.InputTokens != int64(3+2*ImageInputTokensHigh) {
		t.Fatalf("edit with high input fidelity: %v %+v", err, res.Usage)
	}

	// refusals and failures, in OpenAI's envelope
	for _, tc := range []struct {
		name   string
		do     func() error
		status int
		param  string
	}{
		{"no prompt", func() error {
			_, err := c.Images.Generate(ctxT(t), openai.ImageGenerateParams{Model: "gpt-image-1"})
			return err
		}, 400, "prompt"},
		{"n out of range", func() error {
			_, err := c.Images.Generate(ctxT(t), openai.ImageGenerateParams{Model: "gpt-image-1", Prompt: "x", N: openai.Int(11)})
			return err
		}, 400, "n"},
		{"edit without an image", func() error {
			_, err := c.Images.Edit(ctxT(t), openai.ImageEditParams{Prompt: "x", Model: "gpt-image-1"})
			return err
		}, 400, "image"},
		{"injected status", func() error {
			_, err := c.Images.Generate(ctxT(t), openai.ImageGenerateParams{Model: "gpt-image-1", Prompt: "x mock:status=503"})
			return err
		}, 503, ""},
		{"wrong key", func() error {
			_, err := sdk(ts, otherKey).Images.Generate(ctxT(t), openai.ImageGenerateParams{Model: "gpt-image-1", Prompt: "x"})
			return err
		}, 401, ""},
	} {
		var e *openai.Error
		if err := tc.do(); !errors.As(err, &e) || e.StatusCode != tc.status || e.Param != tc.param {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	// the refused edit made nothing
	reqs = s.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		if reqs[i].Path == "/v1/images/edits" {
			if strings.Contains(string(reqs[i].Body), `"served"`) {
				t.Fatalf("a refused edit recorded %s", reqs[i].Body)
			}
			break
		}
	}

	// a JSON body to the edits route
	resp, err := http.Post(ts.URL+"/v1/images/edits", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("edit without a key: %d", resp.StatusCode)
	}
}
