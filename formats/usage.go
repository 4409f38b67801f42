package formats

// Usage is the token count of one answer, normalised once from whatever the
// upstream reported (docs/translation.md, "Usage"). Input includes the cache
// buckets; Output includes reasoning.
type Usage struct {
	Input      int64 // all input tokens, cached ones included (in_total)
	CacheRead  int64 // input tokens read from a prompt cache (in_cache_read)
	CacheWrite int64 // input tokens written to a prompt cache (in_cache_write)
	Output     int64 // all output tokens, reasoning included (out_total)
	Reasoning  int64 // output tokens spent on reasoning (out_reasoning)
	// Hosted counts the uses of fee-bearing hosted tools the upstream
	// reported; they are billed on top of the tokens.
	Hosted HostedUses
}

// Tokens is u without its hosted-tool counts: the token counts alone.
func (u Usage) Tokens() Usage {
	u.Hosted = HostedUses{}
	return u
}

// Total is input plus output.
func (u Usage) Total() int64 { return u.Input + u.Output }

// Normalized returns u with its invariants enforced: no negative count,
// cache buckets within Input, reasoning within Output. An upstream whose
// cache counts exceed its input count (or reasoning its output count)
// reports them disjointly, whatever its format says, so they are added
// rather than clamped: clamping would bill tokens the upstream did process at
// the wrong price or not at all.
func (u Usage) Normalized() Usage {
	u.Input, u.CacheRead, u.CacheWrite = max(u.Input, 0), max(u.CacheRead, 0), max(u.CacheWrite, 0)
	u.Output, u.Reasoning = max(u.Output, 0), max(u.Reasoning, 0)
	if u.CacheRead+u.CacheWrite > u.Input {
		u.Input += u.CacheRead + u.CacheWrite
	}
	if u.Reasoning > u.Output {
		u.Output += u.Reasoning
	}
	return u
}
