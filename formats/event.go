package formats

// EventType discriminates IR stream events (docs/translation.md,
// "Stream events").
type EventType uint8

// The IR stream events.
const (
	EventStart     EventType = iota // ID, Model; Usage when the upstream reports input usage up front
	EventText                       // Delta: a piece of answer text
	EventToolStart                  // Index (k), ID, Name
	EventToolArgs                   // Index (k), Delta: a piece of the arguments' JSON text
	EventToolEnd                    // Index (k)
	EventReasoning                  // Delta: a piece of reasoning text; Signature when known
	EventUsage                      // Usage: cumulative usage so far
	EventFinish                     // Stop, StopSequence
	EventError                      // Err: an error the upstream reported inside the stream
	EventEnd                        // the upstream's stream is complete
)

var eventNames = [...]string{"start", "text", "tool_start", "tool_args", "tool_end", "reasoning", "usage", "finish", "error", "end"}

// String names the event type.
func (t EventType) String() string {
	if int(t) < len(eventNames) {
		return eventNames[t]
	}
	return "unknown"
}

// Event is one IR stream event. Which fields are set depends on Type (see
// the constants). Delta points into the decoder's buffers and is valid only
// until the decoder's next call; the other fields are stable.
type Event struct {
	Type EventType
	// ID is the answer id (EventStart) or the tool call id
	// (EventToolStart).
	ID string
	// Model is the upstream's model name (EventStart).
	Model string
	// Created is the upstream's Unix creation time (EventStart), 0 if
	// unknown.
	Created int64
	// Name is the tool name (EventToolStart).
	Name string
	// Index is k, the 0-based ordinal of the tool call within the answer.
	Index int
	// Delta is the text, arguments or reasoning fragment.
	Delta []byte
	// Signature is a reasoning signature (EventReasoning) or a Gemini
	// thoughtSignature (EventToolStart).
	Signature string
	// Usage is cumulative (EventUsage), or the input side known at
	// EventStart when HasUsage.
	Usage    Usage
	HasUsage bool
	// Final marks an EventUsage that is the vendor's terminal count
	// (Anthropic's message_delta, OpenAI's usage chunk, Gemini's finishing
	// chunk) rather than a running or up-front figure.
	Final bool
	// Stop is the finish reason (EventFinish).
	Stop         StopReason
	StopSequence string
	// Err is the upstream's error (EventError).
	Err *Error
	// Cost is the answer's settled cost as a decimal (the EventUsage that
	// Finish encodes), "" when not known.
	Cost string
}

// A StreamDecoder turns the upstream's stream events into IR events.
type StreamDecoder interface {
	// Decode parses one upstream SSE event (name, possibly empty, and
	// data) and appends the IR events it yields to dst. A non-nil *Error
	// means the event could not be understood (KindUpstream); an error the
	// upstream reported is an EventError instead. The decoder emits
	// EventEnd when it sees the upstream's terminal event; a format
	// without one (Gemini) emits EventEnd with the element that carries
	// the finish reason.
	Decode(dst []Event, event, data []byte) ([]Event, *Error)
}

// A StreamEncoder renders IR events in the client's stream format.
type StreamEncoder interface {
	// Encode appends the client bytes for one event to dst (possibly none:
	// an encoder may buffer, e.g. Anthropic tool blocks). After EventError
	// or EventEnd the stream is over.
	Encode(dst []byte, ev *Event) []byte
}

// Translate composes a decoder and an encoder into a StreamTranslator. It
// meters usage from the decoder's usage events (the last one wins, since
// they are cumulative), counts output bytes from text, argument and
// reasoning deltas, and holds the terminal events (finish, usage, end) until
// Finish, so that the caller can settle before the client sees the end.
func Translate(dec StreamDecoder, enc StreamEncoder) StreamTranslator {
	return &translator{dec: dec, enc: enc}
}

type translator struct {
	dec StreamDecoder
	enc StreamEncoder
	evs []Event

	usage      Usage
	hasUsage   bool
	usageFinal bool // the last usage event was the vendor's terminal count
	finish     Event
	hasStop    bool
	done       bool
	outBytes   int64
	meter      TokenMeter // nil when no bill needs a count
	cost       string     // the settled cost, for the final usage
}

// SetCost gives the final usage the answer's settled cost.
func (t *translator) SetCost(cost string) { t.cost = cost }

// SetTokenMeter makes the translator report its output deltas to m.
func (t *translator) SetTokenMeter(m TokenMeter) { t.meter = m }

func (t *translator) Feed(dst []byte, event, data []byte) ([]byte, bool, *Error) {
	if t.done {
		return dst, true, nil
	}
	evs, err := t.dec.Decode(t.evs[:0], event, data)
	t.evs = evs
	if err != nil {
		return dst, false, err
	}
	for i := range evs {
		ev := &evs[i]
		switch ev.Type {
		case EventText, EventToolArgs, EventReasoning:
			t.outBytes += int64(len(ev.Delta))
			if t.meter != nil {
				t.meter.Text(ev.Delta)
			}
			dst = t.enc.Encode(dst, ev)
		case EventStart:
			if ev.HasUsage {
				t.usage, t.hasUsage = ev.Usage, true
			}
			dst = t.enc.Encode(dst, ev)
		case EventUsage:
			t.usage, t.hasUsage, t.usageFinal = ev.Usage, true, ev.Final
		case EventFinish:
			t.finish, t.hasStop = *ev, true
			t.finish.Delta = nil
		case EventError:
			e := ev.Err
			if e == nil {
				e = NewError(KindUpstream, "The upstream provider reported an error.")
			}
			return dst, false, e
		case EventEnd:
			t.done = true
			return dst, true, nil
		default:
			dst = t.enc.Encode(dst, ev)
		}
	}
	return dst, false, nil
}

func (t *translator) Usage() (Usage, bool) { return t.usage, t.done && t.usageFinal }

func (t *translator) Finish(dst []byte) []byte {
	if t.hasStop {
		dst = t.enc.Encode(dst, &t.finish)
	}
	if t.hasUsage {
		dst = t.enc.Encode(dst, &Event{Type: EventUsage, Usage: t.usage, HasUsage: true, Cost: t.cost})
	}
	return t.enc.Encode(dst, &Event{Type: EventEnd})
}

func (t *translator) Fail(dst []byte, e *Error) []byte {
	return t.enc.Encode(dst, &Event{Type: EventError, Err: e})
}

func (t *translator) OutputBytes() int64 { return t.outBytes }

var (
	_ StreamTranslator = (*translator)(nil)
	_ Metered          = (*translator)(nil)
	_ Costed           = (*translator)(nil)
)
