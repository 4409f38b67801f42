package formats

// StopReason is why the model stopped, in IR terms (docs/translation.md,
// "Stop reasons"). Each vendor package maps its own values to and from these.
type StopReason uint8

// The stop reasons.
const (
	StopUnset         StopReason = iota // not reported
	StopEnd                             // natural end of turn (OAI stop, ANT end_turn, GEM STOP)
	StopSequence                        // a client stop sequence matched (ANT stop_sequence)
	StopLength                          // the output cap was reached
	StopToolUse                         // the model called tools
	StopContentFilter                   // withheld by a filter (OAI content_filter, ANT refusal, GEM SAFETY…)
	StopPause                           // ANT pause_turn: a long server-tool turn paused
	StopContextWindow                   // the context window filled (ANT model_context_window_exceeded)
)

var stopNames = [...]string{
	StopUnset:         "unset",
	StopEnd:           "end",
	StopSequence:      "stop_sequence",
	StopLength:        "length",
	StopToolUse:       "tool_use",
	StopContentFilter: "content_filter",
	StopPause:         "pause",
	StopContextWindow: "context_window",
}

// String names the reason (for logs).
func (s StopReason) String() string {
	if int(s) < len(stopNames) {
		return stopNames[s]
	}
	return "unknown"
}

// Final applies the rule of docs/translation.md, "Stop reasons": an answer that
// contains tool calls reports the tool reason unless it stopped for length
// (some servers say "stop" with tool calls, Gemini always says STOP).
func (s StopReason) Final(hasToolCalls bool) StopReason {
	if hasToolCalls && s != StopLength && s != StopContextWindow && s != StopContentFilter {
		return StopToolUse
	}
	if s == StopUnset {
		return StopEnd
	}
	return s
}

// Response is a whole (non-streamed) answer in the IR.
type Response struct {
	// ID is the upstream's answer id; renderers keep it when it suits the
	// client's format and otherwise make one.
	ID    string
	Model string
	// Created is the Unix time of the answer (0: now).
	Created int64
	// Content holds text, refusal, thinking and tool-call parts, in order.
	Content []Part
	Stop    StopReason
	// StopSequence is the matched stop sequence, when the upstream says.
	StopSequence string
	Usage        Usage
	// HasUsage is false when the upstream reported no usage.
	HasUsage bool
}

// HasToolCalls reports whether the answer calls tools.
func (r *Response) HasToolCalls() bool {
	for i := range r.Content {
		if r.Content[i].Type == PartToolCall {
			return true
		}
	}
	return false
}

// Text concatenates the answer's text parts.
func (r *Response) Text() string {
	n, idx := 0, -1
	for i := range r.Content {
		if r.Content[i].Type == PartText {
			n++
			idx = i
		}
	}
	switch n {
	case 0:
		return ""
	case 1:
		return r.Content[idx].Text
	}
	var b []byte
	for i := range r.Content {
		if r.Content[i].Type == PartText {
			b = append(b, r.Content[i].Text...)
		}
	}
	return string(b)
}

// OutputBytes counts the generated text, thinking and tool-call arguments,
// for estimating output tokens when the upstream reported no usage.
func (r *Response) OutputBytes() int64 {
	var n int64
	for i := range r.Content {
		p := &r.Content[i]
		n += int64(len(p.Text))
		if p.ToolCall != nil {
			n += int64(len(p.ToolCall.Name) + len(p.ToolCall.Arguments))
		}
	}
	return n
}
