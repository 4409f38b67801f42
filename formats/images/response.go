package images

import (
	"errors"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/rawjson"
)

// Answer is what the gateway bills of an images answer:
// how many images it carries and, for GPT image models, the tokens.
type Answer struct {
	Images   int
	Usage    formats.Usage
	HasUsage bool // the upstream reported token usage
}

// ErrNoImages is returned for an answer that is not an images object.
var ErrNoImages = errors.New("images: the answer has no data array")

// ParseAnswer reads an images answer without copying its image data.
// input_tokens counts text and image input tokens; output_tokens the image
// (and any text) output.
func ParseAnswer(body []byte) (Answer, error) {
	var a Answer
	hasData := false
	it := rawjson.Object(body, 0)
	for it.Next() {
		switch {
		case it.NameIs("data"):
			hasData = true
			items := rawjson.Array(it.Value(), 0)
			for items.Next() {
				a.Images++
			}
			if err := items.Err(); err != nil {
				return Answer{}, err
			}
		case it.NameIs("usage"):
			a.Usage, a.HasUsage = parseUsage(it.Value())
		}
	}
	if err := it.Err(); err != nil {
		return Answer{}, err
	}
	if !hasData {
		return Answer{}, ErrNoImages
	}
	return a, nil
}

// parseUsage reads an images usage object.
func parseUsage(v []byte) (u formats.Usage, ok bool) {
	it := rawjson.Object(v, 0)
	for it.Next() {
		n, isInt := rawjson.ParseInt(it.Value())
		if !isInt || n < 0 {
			continue
		}
		switch {
		case it.NameIs("input_tokens"):
			u.Input, ok = n, true
		case it.NameIs("output_tokens"):
			u.Output, ok = n, true
		}
	}
	if it.Err() != nil {
		return formats.Usage{}, false
	}
	return u, ok
}

// MinOutputTokens is the least [OutputTokens] gives: a square image at low
// quality.
const MinOutputTokens = 272

// OutputTokens estimates the output tokens of one image of a GPT image
// model by size and quality, from OpenAI's published table (1024×1024:
// 272 low, 1056 medium, 4160 high; the oblong sizes about 1.5× those). It is
// used only when an upstream reports no usage and the model has no
// per-image price; an unknown shape is taken at its dearest.
func OutputTokens(size, quality string) int64 {
	square := size == "1024x1024" || size == "512x512" || size == "256x256"
	var t int64
	switch quality {
	case "low":
		t = 272
	case "medium", "standard":
		t = 1056
	default: // high, hd, auto, unknown
		t = 4160
	}
	if !square {
		t = t * 3 / 2
	}
	return t
}
