package mockupstream

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// The OpenAI images routes (OpenAI's Images API): POST /v1/images/generations
// (JSON) and POST /v1/images/edits (multipart, read part by part: file
// parts are hashed and counted, never held).

// Image token counts, after OpenAI's published table for GPT image models.
const (
	// ImageInputTokens is what one input image of an edit counts.
	ImageInputTokens = 323
	// ImageInputTokensHigh is what one input image counts with
	// input_fidelity high, which preserves faces and logos at the price of
	// thousands of input tokens an image.
	ImageInputTokensHigh = 4160
	// mockImageB64 is a 1×1 transparent PNG.
	mockImageB64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)

// ImageOutputTokens is what one image of a GPT image model counts, by
// quality and size: 272 low, 1056 medium, 4160 high (and auto) for a
// square image, half as much again for an oblong one.
func ImageOutputTokens(size, quality string) int {
	t := 4160
	switch quality {
	case "low":
		t = 272
	case "medium":
		t = 1056
	}
	if size != "1024x1024" && size != "" {
		t = t * 3 / 2
	}
	return t
}

// ImageTextTokens is what an image prompt counts: its words.
func ImageTextTokens(prompt string) int { return Words(prompt) }

// UploadedBytes is the number of file bytes the edits route has received,
// counted as they arrive.
func (s *Server) UploadedBytes() int64 { return s.uploaded.Load() }

// uploadCounter counts the bytes written to it into n.
type uploadCounter struct{ n *atomic.Int64 }

func (u uploadCounter) Write(p []byte) (int, error) {
	u.n.Add(int64(len(p)))
	return len(p), nil
}

// imageRequest is an images request as the mock reads it.
type imageRequest struct {
	Model          string `json:"model"`
	Prompt         string `json:"prompt"`
	N              *int   `json:"n"`
	Size           string `json:"size"`
	Quality        string `json:"quality"`
	ResponseFormat string `json:"response_format"`
	InputFidelity  string `json:"input_fidelity"`
	Stream         bool   `json:"stream"`
	inputImages    int
}

// openAIImageGeneration serves POST /v1/images/generations.
func (s *Server) openAIImageGeneration(c *call) {
	var q imageRequest
	if err := json.Unmarshal(c.body, &q); err != nil {
		s.imageAnswer(c, q, invalid("", "", "%s", openAIBadJSON))
		return
	}
	s.imageAnswer(c, q, nil)
}

// openAIImageEdit serves POST /v1/images/edits, reading the form as it
// arrives. It records the request with a JSON summary as its body:
// {"fields":{name:value},"files":[{"name","filename","content_type","bytes","sha256"}],
// "served":{"images","input_tokens","output_tokens"}}, served being what it
// made (what a provider would charge for; absent when it made nothing; the
// tokens are counted also for a DALL·E model, which reports none).
func (s *Server) openAIImageEdit(w http.ResponseWriter, r *http.Request) {
	c := s.begin(w, r, bearerKey(r), nil, openAI{})
	defer c.end()
	type file struct {
		Name        string `json:"name"`
		Filename    string `json:"filename"`
		ContentType string `json:"content_type"`
		Bytes       int64  `json:"bytes"`
		SHA256      string `json:"sha256"`
	}
	summary := struct {
		Fields map[string]string `json:"fields"`
		Files  []file            `json:"files"`
		Served *ImagesServed     `json:"served,omitempty"`
	}{Fields: map[string]string{}, Files: []file{}}
	defer func() { c.rec = s.record(r, marshal(summary)) }() // before c.end, which marks it finished

	var q imageRequest
	var perr *apiError
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	mr, err := r.MultipartReader()
	if mt != "multipart/form-data" || err != nil {
		perr = invalid("", "", "Invalid Content-Type header (%s), expected multipart/form-data. (HINT: If you're using curl, you can pass -H 'Content-Type: multipart/form-data')",
			r.Header.Get("Content-Type"))
	}
	buf := make([]byte, 32<<10)
	// readPart reads one part: a field into the summary, a file hashed and
	// counted as it arrives
	readPart := func(p *multipart.Part) error {
		if p.FileName() == "" {
			v, err := io.ReadAll(io.LimitReader(p, 1<<20))
			summary.Fields[p.FormName()] = string(v)
			return err
		}
		h := sha256.New()
		n, err := io.CopyBuffer(io.MultiWriter(h, uploadCounter{&s.uploaded}), p, buf)
		summary.Files = append(summary.Files, file{Name: p.FormName(), Filename: p.FileName(),
			ContentType: p.Header.Get("Content-Type"), Bytes: n, SHA256: hex.EncodeToString(h.Sum(nil))})
		if name := p.FormName(); name == "image" || name == "image[]" {
			q.inputImages++
		}
		return err
	}
	for perr == nil {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err == nil {
			err = readPart(p)
		}
		if err != nil {
			if r.Context().Err() != nil {
				c.cancel()
				return
			}
			perr = invalid("", "", "Could not parse multipart form: %v", err)
		}
	}
	if perr == nil {
		f := summary.Fields
		q.Model, q.Prompt, q.Size, q.Quality, q.ResponseFormat = f["model"], f["prompt"], f["size"], f["quality"], f["response_format"]
		q.InputFidelity = f["input_fidelity"]
		q.Stream = f["stream"] == "true"
		if v, ok := f["n"]; ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				perr = invalid("n", "invalid_type", "Invalid type for 'n': expected an integer, but got a string instead.")
			}
			q.N = &n
		}
		if perr == nil && q.inputImages == 0 {
			perr = invalid("image", "missing_required_parameter", "Missing required parameter: 'image'.")
		}
	}
	summary.Served = s.imageAnswer(c, q, perr)
}

// ImagesServed is what the images routes made for one request.
type ImagesServed struct {
	Images       int `json:"images"`
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// imageAnswer validates q and answers it: failures from the key's faults
// and the prompt's directives first, then the images. It returns what it
// made, nil when it made nothing.
func (s *Server) imageAnswer(c *call, q imageRequest, perr *apiError) *ImagesServed {
	c.model = q.Model
	if !s.openAIAuth(c) {
		return nil
	}
	f := s.takeFault(c.key)
	if fp := failurePlan(f, noDirectives()); fp.fail == failStatus || fp.fail == failHang || fp.fail == failClose {
		c.latency += fp.latency
		c.act(&fp)
		return nil
	}
	n := 1
	if perr == nil {
		if q.Model == "" {
			q.Model = "dall-e-2" // OpenAI's default
		}
		switch {
		case q.Prompt == "":
			perr = invalid("prompt", "missing_required_parameter", "Missing required parameter: 'prompt'.")
		case q.N != nil && (*q.N < 1 || *q.N > 10):
			perr = invalid("n", "integer_out_of_range",
				"Invalid 'n': integer out of range. Expected a value between 1 and 10, but got %d instead.", *q.N)
		case q.Stream:
			perr = invalid("stream", "", "The mock does not stream images.")
		case q.N != nil:
			n = *q.N
		}
	}
	if perr != nil {
		c.writeError(*perr)
		return nil
	}
	d, err := parseDirectives([]string{q.Prompt})
	if err != nil {
		c.writeError(c.vendor.badRequest(err.Error()))
		return nil
	}
	if !s.modelOK(q.Model) && !strings.HasPrefix(q.Model, "gpt-image") && !strings.HasPrefix(q.Model, "dall-e") {
		c.writeError(c.vendor.statusError(c, http.StatusNotFound, ""))
		return nil
	}
	p := failurePlan(f, d)
	if d.latency >= 0 {
		c.latency = d.latency
	}
	c.latency += p.latency
	if c.act(&p) {
		return nil
	}
	if !c.beforeHeaders(0) {
		return nil
	}
	text, img := ImageTextTokens(q.Prompt), q.inputImages*ImageInputTokens
	if q.InputFidelity == "high" {
		img = q.inputImages * ImageInputTokensHigh
	}
	served := &ImagesServed{Images: n, InputTokens: text + img, OutputTokens: n * ImageOutputTokens(q.Size, q.Quality)}
	gpt := strings.HasPrefix(q.Model, "gpt-image")
	data := make([]map[string]any, n)
	for i := range data {
		switch {
		case gpt || q.ResponseFormat == "b64_json":
			data[i] = map[string]any{"b64_json": mockImageB64}
		default:
			data[i] = map[string]any{"url": "https://images.mock.invalid/" + c.requestID() + "-" + strconv.Itoa(i) + ".png"}
		}
		if q.Model == "dall-e-3" {
			data[i]["revised_prompt"] = q.Prompt
		}
	}
	answer := map[string]any{"created": time.Now().Unix(), "data": data}
	if gpt && !d.noUsage {
		out := served.OutputTokens
		answer["background"], answer["output_format"] = "opaque", "png"
		answer["quality"], answer["size"] = orDefault(q.Quality, "high"), orDefault(q.Size, "1024x1024")
		answer["usage"] = map[string]any{
			"input_tokens":          text + img,
			"input_tokens_details":  map[string]int{"text_tokens": text, "image_tokens": img},
			"output_tokens":         out,
			"output_tokens_details": map[string]int{"image_tokens": out, "text_tokens": 0},
			"total_tokens":          text + img + out,
		}
	}
	body := marshal(answer)
	if p.fail == failCut {
		c.writeCut(body)
		return served
	}
	c.writeJSON(body)
	return served
}
