package upstream

import (
	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/internal/jsonval"
	"github.com/modelgate/modelgate/formats/rawjson"
)

// UsageNames are the member names of an OpenAI usage object, which Chat
// Completions and Responses spell differently.
type UsageNames struct {
	// Input and Output are the totals.
	Input, Output string
	// InputDetails holds cached_tokens and cache_write_tokens (or
	// cache_creation_tokens); OutputDetails holds reasoning_tokens.
	InputDetails, OutputDetails string
}

// ChatUsage names the usage object of Chat Completions.
var ChatUsage = UsageNames{
	Input: "prompt_tokens", Output: "completion_tokens",
	InputDetails: "prompt_tokens_details", OutputDetails: "completion_tokens_details",
}

// ResponsesUsage names the usage object of Responses.
var ResponsesUsage = UsageNames{
	Input: "input_tokens", Output: "output_tokens",
	InputDetails: "input_tokens_details", OutputDetails: "output_tokens_details",
}

// ParseUsage reads an OpenAI usage object spelt with names: the input
// total includes the cached tokens (and the cache writes, when a server
// reports them), the output total the reasoning tokens (docs/translation.md,
// "Usage"). A count that is not a non-negative integer reads as 0. ok is
// false when v is not an object with at least one of the two totals.
func ParseUsage(v []byte, names *UsageNames) (u formats.Usage, ok bool) {
	it := rawjson.Object(v, 0)
	for it.Next() {
		val := it.Value()
		switch {
		case it.NameIs(names.Input):
			u.Input, ok = jsonval.Count(val), true
		case it.NameIs(names.Output):
			u.Output, ok = jsonval.Count(val), true
		case it.NameIs(names.InputDetails):
			d := rawjson.Object(val, 0)
			for d.Next() {
				switch {
				case d.NameIs("cached_tokens"):
					u.CacheRead = jsonval.Count(d.Value())
				case d.NameIs("cache_write_tokens"), d.NameIs("cache_creation_tokens"):
					u.CacheWrite = jsonval.Count(d.Value())
				}
			}
		case it.NameIs(names.OutputDetails):
			d := rawjson.Object(val, 0)
			for d.Next() {
				if d.NameIs("reasoning_tokens") {
					u.Reasoning = jsonval.Count(d.Value())
				}
			}
		}
	}
	if it.Err() != nil {
		return formats.Usage{}, false
	}
	return u.Normalized(), ok
}
