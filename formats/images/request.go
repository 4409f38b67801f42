// Package images reads and writes the OpenAI Images API:
// generation requests (JSON), edit requests (a multipart form, read and
// forwarded part by part) and the image answers with their usage.
package images

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/rawjson"
)

// Limits of a request.
const (
	MaxN           = 10    // images per request
	MaxPromptRunes = 32000 // the longest prompt any image model takes
)

// Request is what the gateway needs of an image request: the model to
// route, the count and shape of the images to hold for, and the prompt to
// estimate. Every other field goes to the upstream as the client sent it.
type Request struct {
	Model   string
	Prompt  string
	N       int  // 1 when the client gave none
	NGiven  bool // the client gave n
	Size    string
	Quality string
}

// ParseGeneration validates a POST /v1/images/generations body.
func ParseGeneration(body []byte) (*Request, *formats.Error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return nil, formats.InvalidRequest("", "The request body is not a JSON object. "+
			"POST /v1/images/generations takes {\"model\": …, \"prompt\": …}.")
	}
	q := &Request{N: 1}
	for name, raw := range fields {
		if ferr := q.set(name, raw); ferr != nil {
			return nil, ferr
		}
	}
	if ferr := q.complete(); ferr != nil {
		return nil, ferr
	}
	return q, nil
}

// set reads one JSON field.
func (q *Request) set(name string, raw json.RawMessage) *formats.Error {
	null := string(raw) == "null"
	switch name {
	case "model", "prompt", "size", "quality":
		if null {
			return nil
		}
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return formats.InvalidRequest(name, "Invalid type for '"+name+"': expected a string.")
		}
		return q.setText(name, s)
	case "n":
		if null {
			return nil
		}
		var n int
		if json.Unmarshal(raw, &n) != nil {
			return formats.InvalidRequest("n", "Invalid type for 'n': expected an integer from 1 to "+strconv.Itoa(MaxN)+".")
		}
		return q.setN(n)
	case "stream":
		var b bool
		if !null && json.Unmarshal(raw, &b) != nil {
			return formats.InvalidRequest("stream", "Invalid type for 'stream': expected a boolean.")
		}
		if b {
			return streamRefused()
		}
	}
	return nil
}

// setText sets a field given as text: a JSON string, or a form field.
func (q *Request) setText(name, s string) *formats.Error {
	switch name {
	case "model":
		q.Model = s
	case "prompt":
		if !utf8.ValidString(s) {
			return formats.InvalidRequest("prompt", "Invalid 'prompt': not valid UTF-8.")
		}
		if utf8.RuneCountInString(s) > MaxPromptRunes {
			return formats.InvalidRequest("prompt", "Invalid 'prompt': longer than "+strconv.Itoa(MaxPromptRunes)+" characters.")
		}
		q.Prompt = s
	case "size":
		q.Size = s
	case "quality":
		q.Quality = s
	case "n":
		n, err := strconv.Atoi(s)
		if err != nil {
			return formats.InvalidRequest("n", "Invalid 'n': expected an integer from 1 to "+strconv.Itoa(MaxN)+".")
		}
		return q.setN(n)
	case "stream":
		if b, _ := strconv.ParseBool(s); b {
			return streamRefused()
		}
	}
	return nil
}

func (q *Request) setN(n int) *formats.Error {
	if n < 1 || n > MaxN {
		return formats.InvalidRequest("n", "Invalid 'n': "+strconv.Itoa(n)+" is not an integer from 1 to "+strconv.Itoa(MaxN)+".")
	}
	q.N, q.NGiven = n, true
	return nil
}

// complete checks the required fields once all are read.
func (q *Request) complete() *formats.Error {
	if q.Model == "" {
		return formats.InvalidRequest("model", "Missing required parameter: 'model'.")
	}
	if q.Prompt == "" {
		return formats.InvalidRequest("prompt", "Missing required parameter: 'prompt'.")
	}
	return nil
}

// streamRefused is the answer to a streamed image request.
func streamRefused() *formats.Error {
	return formats.InvalidRequest("stream", "Streamed image generation (stream: true, partial images) is not offered by this gateway; "+
		"send the request without stream to get the finished images.")
}

// RewriteGeneration appends to dst the generation body for the upstream:
// model set to upstreamModel, everything else byte for byte.
func RewriteGeneration(dst, body []byte, upstreamModel string) ([]byte, error) {
	var mq [96]byte
	return rawjson.Set(dst, body, "model", rawjson.AppendQuote(mq[:0], upstreamModel))
}
