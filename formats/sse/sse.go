// Package sse reads and writes server-sent events
// (https://html.spec.whatwg.org/multipage/server-sent-events.html) as LLM
// APIs use them: a streaming reader with a bound on one event's size, and
// append-style writers.
package sse

import (
	"bytes"
	"errors"
	"io"
)

// ErrEventTooLarge reports an event (or a line) over the reader's bound.
var ErrEventTooLarge = errors.New("sse: event too large")

const initialBuffer = 4 << 10

// Reader reads events from a stream. It is not safe for concurrent use.
type Reader struct {
	r   io.Reader
	max int

	buf        []byte
	start, end int // unread bytes are buf[start:end]
	eof        bool
	err        error // sticky
	skipLF     bool  // the last line ended with CR: skip a following LF
	started    bool  // the BOM check is done

	event   []byte
	data    []byte
	hasData bool
}

// NewReader returns a reader of r whose events may not exceed maxEvent
// bytes (the sum of their lines, field names included).
func NewReader(r io.Reader, maxEvent int) *Reader {
	if maxEvent <= 0 {
		maxEvent = 1 << 20
	}
	return &Reader{r: r, max: maxEvent}
}

// Next returns the next event's name (empty when the event had no event:
// line) and data (its data: lines joined with "\n"). Both are valid until the
// next call. Comments, id: and retry: lines are skipped; an event without
// data: lines is not dispatched.
//
// At the end of the stream Next returns io.EOF; a last event whose lines are
// complete but which lacks the closing blank line is still returned first.
// If the stream ends in the middle of a line, Next returns
// io.ErrUnexpectedEOF: the stream was cut. An event over the bound yields
// ErrEventTooLarge. Errors are sticky.
func (r *Reader) Next() (event, data []byte, err error) {
	if r.err != nil {
		return nil, nil, r.err
	}
	r.event, r.data, r.hasData = r.event[:0], r.data[:0], false
	size := 0
	for {
		line, err := r.line()
		if err != nil {
			if err == io.EOF && r.hasData {
				// last event without its blank line: deliver it now,
				// io.EOF on the next call
				r.err = io.EOF
				return r.event, r.data, nil
			}
			r.err = err
			return nil, nil, err
		}
		if len(line) == 0 { // dispatch
			if r.hasData {
				return r.event, r.data, nil
			}
			r.event, size = r.event[:0], 0
			continue
		}
		if line[0] == ':' { // comment
			continue
		}
		size += len(line) + 1
		if size > r.max {
			r.err = ErrEventTooLarge
			return nil, nil, r.err
		}
		field, value := line, line[len(line):]
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "data":
			if r.hasData {
				r.data = append(r.data, '\n')
			}
			r.data = append(r.data, value...)
			r.hasData = true
		case "event":
			r.event = append(r.event[:0], value...)
		}
		// id, retry and unknown fields are ignored
	}
}

// Ready reports whether Next would return without reading from the stream:
// a whole event (a data: line and the blank line that ends it) is buffered,
// or the stream has ended or failed. A writer that relays events can send
// the ones that arrived together in one write, and flush before a Next
// that would wait. When in doubt Ready says false.
func (r *Reader) Ready() bool {
	if r.err != nil || r.eof {
		return true
	}
	if !r.started {
		return false
	}
	w := r.buf[r.start:r.end]
	if r.skipLF && len(w) > 0 && w[0] == '\n' {
		w = w[1:]
	}
	hasData := false
	for {
		i := indexEOL(w)
		if i < 0 {
			return false
		}
		line, rest := w[:i], w[i+1:]
		if w[i] == '\r' && len(rest) > 0 && rest[0] == '\n' {
			rest = rest[1:]
		}
		switch {
		case len(line) == 0:
			if hasData {
				return true
			}
		case bytes.HasPrefix(line, []byte("data")) && (len(line) == 4 || line[4] == ':'):
			hasData = true
		}
		w = rest
	}
}

// line returns the next line without its terminator (LF, CRLF or CR).
func (r *Reader) line() ([]byte, error) {
	for {
		if r.skipLF && r.start < r.end {
			if r.buf[r.start] == '\n' {
				r.start++
			}
			r.skipLF = false
		}
		w := r.buf[r.start:r.end]
		if !r.started && (len(w) >= 3 || r.eof) {
			r.started = true
			if bytes.HasPrefix(w, []byte("\xef\xbb\xbf")) {
				r.start += 3
				continue
			}
		}
		if i := indexEOL(w); i >= 0 && (r.started || r.eof) {
			r.start += i + 1
			if w[i] == '\r' {
				r.skipLF = true
			}
			return w[:i], nil
		}
		if r.eof {
			if len(w) > 0 {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, io.EOF
		}
		if len(w) > r.max {
			return nil, ErrEventTooLarge
		}
		if err := r.fill(); err != nil {
			return nil, err
		}
	}
}

// indexEOL finds the first CR or LF.
func indexEOL(w []byte) int {
	i := bytes.IndexByte(w, '\n')
	limit := w
	if i >= 0 {
		limit = w[:i]
	}
	if j := bytes.IndexByte(limit, '\r'); j >= 0 {
		return j
	}
	return i
}

// fill reads more bytes, compacting or growing the buffer as needed.
func (r *Reader) fill() error {
	if r.start > 0 {
		n := copy(r.buf, r.buf[r.start:r.end])
		r.start, r.end = 0, n
	}
	if r.end == len(r.buf) {
		size := 2 * len(r.buf)
		if size < initialBuffer {
			size = initialBuffer
		}
		if size > r.max+2 {
			size = r.max + 2
		}
		if size <= r.end {
			return ErrEventTooLarge
		}
		buf := make([]byte, size)
		copy(buf, r.buf[:r.end])
		r.buf = buf
	}
	for range 100 {
		n, err := r.r.Read(r.buf[r.end:])
		r.end += n
		if err == io.EOF {
			r.eof = true
			return nil
		}
		if err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
	}
	return io.ErrNoProgress
}

// AppendData appends one unnamed event, "data: <data>\n\n". A line break in
// data (not expected in compact JSON) starts a new data: line, so that the
// reader gets data back unchanged.
func AppendData(dst, data []byte) []byte {
	dst = appendData(dst, data)
	return append(dst, '\n')
}

// AppendEvent appends one named event, "event: <name>\ndata: <data>\n\n".
func AppendEvent(dst []byte, name string, data []byte) []byte {
	dst = append(dst, "event: "...)
	dst = append(dst, name...)
	dst = append(dst, '\n')
	dst = appendData(dst, data)
	return append(dst, '\n')
}

func appendData(dst, data []byte) []byte {
	for {
		dst = append(dst, "data: "...)
		i := indexEOL(data)
		if i < 0 {
			dst = append(dst, data...)
			return append(dst, '\n')
		}
		dst = append(dst, data[:i]...)
		dst = append(dst, '\n')
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
}
