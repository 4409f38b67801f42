package formats

// Usage is the token count of one answer, normalised once from whatever the
// upstream reported (wire/translation.md §5.3). Input includes the cache
// buckets; Output includes reasoning.
type Usage struct {
	Input      int64 // all input tokens, cached ones included (in_total)
	CacheRead  int64 // input tokens read from a prompt cache (in_cache_read)
	CacheWrite int64 // input tokens written to a prompt cache (in_cache_write)
	Output     int64 // all output tokens, reasoning included (out_total)
	Reasoning  int64 // output tokens spent on reasoning (out_reasoning)
}

// Total is input plus output.
func (u Usage) Total() int64 { return u.Input + u.Output }
