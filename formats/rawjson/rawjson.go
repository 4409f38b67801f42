// Package rawjson finds and edits the members of JSON objects in place, by
// byte offsets, without decoding or re-encoding what it does not touch. The
// gateway uses it to pass bodies and stream events through nearly verbatim:
// replace "model", set an output cap, drop a member.
//
// The scanner checks that strings end and that brackets balance; it does not
// check the full grammar (number syntax, UTF-8, duplicate names). Callers that
// need a valid document validate it first with jsontext (the request parsers
// do); on any input the functions here return an error or a result, never
// panic, and never read out of bounds.
package rawjson

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/bits"
	"strconv"
	"unicode/utf8"
	"unsafe"

	"github.com/go-json-experiment/json/jsontext"
)

// ErrSyntax reports input that is not a JSON value of the expected shape.
var ErrSyntax = errors.New("rawjson: malformed JSON")

// ErrNotObject reports a value that is not a JSON object where one is needed.
var ErrNotObject = errors.New("rawjson: not a JSON object")

// isSpace reports JSON whitespace.
func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

// SkipSpace returns the index of the first non-whitespace byte of b at or
// after i, or len(b).
func SkipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// skipString returns the index just past the string whose opening quote is
// at b[i].
func skipString(b []byte, i int) (int, error) {
	j, _, err := scanString(b, i)
	return j, err
}

// scanString is skipString that also reports whether the string has
// escapes. It looks at 8 bytes at a time for a quote or a backslash; past
// 64 bytes (a long text) it jumps from quote to quote with IndexByte.
func scanString(b []byte, i int) (end int, escaped bool, err error) {
	start := i
	i++
	for i-start < 64 {
		i = nextQuoteOrBackslash(b, i)
		if i >= len(b) {
			return 0, escaped, ErrSyntax
		}
		if b[i] == '"' {
			return i + 1, escaped, nil
		}
		escaped = true
		i += 2
	}
	for {
		if i >= len(b) {
			return 0, escaped, ErrSyntax
		}
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return 0, escaped, ErrSyntax
		}
		if !escaped && bytes.IndexByte(b[i:i+j], '\\') >= 0 {
			escaped = true
		}
		i += j
		// The quote is escaped if an odd number of backslashes precede it.
		n := 0
		for k := i - 1; k >= 0 && b[k] == '\\'; k-- {
			n++
		}
		i++
		if n%2 == 0 {
			return i, escaped, nil
		}
	}
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// match has the high bit set in the lowest byte of x equal to c (higher
// bytes may have false positives, which the callers never look at).
func match(x uint64, c byte) uint64 {
	y := x ^ (lsb * uint64(c))
	return (y - lsb) &^ y & msb
}

// nextQuoteOrBackslash returns the index of the first '"' or '\\' at or
// after i, or len(b).
func nextQuoteOrBackslash(b []byte, i int) int {
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		if m := match(x, '"') | match(x, '\\'); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	for ; i < len(b); i++ {
		if c := b[i]; c == '"' || c == '\\' {
			return i
		}
	}
	return i
}

// SkipValue returns the index just past the JSON value that starts at b[i]
// (leading whitespace allowed).
func SkipValue(b []byte, i int) (int, error) {
	i = SkipSpace(b, i)
	if i >= len(b) {
		return 0, ErrSyntax
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		return skipNested(b, i)
	case '}', ']', ',', ':':
		return 0, ErrSyntax
	}
	// number or literal: up to the next delimiter
	j := i
	for j < len(b) {
		c := b[j]
		if c == ',' || c == '}' || c == ']' || c == ':' || c == '"' || c == '{' || c == '[' || isSpace(c) {
			break
		}
		j++
	}
	return j, nil
}

// structural marks the bytes skipNested must look at.
var structural = [256]bool{'"': true, '{': true, '}': true, '[': true, ']': true}

// skipNested skips an object or array, counting brackets outside strings.
func skipNested(b []byte, i int) (int, error) {
	depth := 0
	for {
		for i < len(b) && !structural[b[i]] {
			i++
		}
		if i >= len(b) {
			return 0, ErrSyntax
		}
		switch b[i] {
		case '"':
			var err error
			if i, err = skipString(b, i); err != nil {
				return 0, err
			}
			continue
		case '{', '[':
			depth++
		default: // '}', ']'
			depth--
			if depth == 0 {
				return i + 1, nil
			}
		}
		i++
	}
}

// Member is one member of an object (or, with Name nil, one element of an
// array) as offsets into the scanned bytes.
type Member struct {
	// Name is the raw name between the quotes, escapes included.
	Name []byte
	// Start is the index of the name's opening quote (for an array
	// element, ValueStart).
	Start int
	// ValueStart and ValueEnd delimit the value.
	ValueStart, ValueEnd int
	// Prev is the index just past the previous member's value, or just past
	// the opening bracket for the first member.
	Prev int
	// escaped reports escapes in Name.
	escaped bool
}

// NameIs reports whether the member's name, unescaped, equals s.
func (m *Member) NameIs(s string) bool {
	if !m.escaped {
		return string(m.Name) == s
	}
	return unescapedEqual(m.Name, s)
}

// unescapedEqual compares a raw string body that contains escapes with s.
func unescapedEqual(raw []byte, s string) bool {
	var qb, ub [80]byte
	q := append(append(append(qb[:0], '"'), raw...), '"')
	u, err := jsontext.AppendUnquote(ub[:0], q)
	return err == nil && string(u) == s
}

// Iter walks the members of one object or the elements of one array. The
// zero Iter is empty.
type Iter struct {
	b     []byte
	i     int // next read position
	prev  int
	end   int // index of the closing bracket, once seen
	close byte
	n     int
	comma bool // a comma followed the last member
	// pending: NextLazy stopped at the current value's start
	pending bool
	err     error
	done    bool
	m       Member
}

// Object starts an iteration over the object that starts at b[i] (leading
// whitespace allowed).
func Object(b []byte, i int) Iter { return open(b, i, '{', '}') }

// Array starts an iteration over the array that starts at b[i] (leading
// whitespace allowed).
func Array(b []byte, i int) Iter { return open(b, i, '[', ']') }

func open(b []byte, i int, o, c byte) Iter {
	i = SkipSpace(b, i)
	if i >= len(b) || b[i] != o {
		err := ErrSyntax
		if o == '{' {
			err = ErrNotObject
		}
		return Iter{err: err, done: true}
	}
	return Iter{b: b, i: i + 1, prev: i + 1, close: c}
}

// Next advances to the next member and reports whether there is one.
func (it *Iter) Next() bool {
	if !it.advance() {
		return false
	}
	j, err := SkipValue(it.b, it.m.ValueStart)
	if err != nil || j == it.m.ValueStart {
		return it.fail()
	}
	it.finish(j)
	return true
}

// NextLazy is Next for a caller that walks the value itself: it stops at
// the value's start (ValueEnd is -1) without scanning it, and the caller
// reports where the value ends with SetEnd (e.g. a child iterator's End()+1),
// which saves scanning it twice. Without SetEnd, Value and the next Next or
// NextLazy scan it.
func (it *Iter) NextLazy() bool {
	if !it.advance() {
		return false
	}
	it.m.ValueEnd, it.pending = -1, true
	return true
}

// SetEnd reports the end of the current value after NextLazy; end must be
// exact.
func (it *Iter) SetEnd(end int) {
	if it.pending {
		it.finish(end)
	}
}

// settle scans a pending value.
func (it *Iter) settle() bool {
	if !it.pending {
		return true
	}
	j, err := SkipValue(it.b, it.m.ValueStart)
	if err != nil || j == it.m.ValueStart {
		return it.fail()
	}
	it.finish(j)
	return true
}

// finish records the end of the current value and consumes the separator.
func (it *Iter) finish(j int) {
	b := it.b
	it.pending = false
	it.m.ValueEnd, it.prev = j, j
	k := SkipSpace(b, j)
	it.comma = k < len(b) && b[k] == ','
	if it.comma {
		k++
	}
	it.i = k
}

// advance reads up to the next value's start.
func (it *Iter) advance() bool {
	if it.done || !it.settle() {
		return false
	}
	b := it.b
	i := SkipSpace(b, it.i)
	if i >= len(b) {
		return it.fail()
	}
	if b[i] == it.close {
		if it.comma { // trailing comma
			return it.fail()
		}
		it.end, it.i, it.done = i, i+1, true
		return false
	}
	if it.n > 0 && !it.comma { // no comma after the previous member
		return it.fail()
	}
	m := Member{Prev: it.prev}
	if it.close == '}' {
		if b[i] != '"' {
			return it.fail()
		}
		j, esc, err := scanString(b, i)
		if err != nil {
			return it.fail()
		}
		m.Name, m.Start, m.escaped = b[i+1:j-1], i, esc
		i = SkipSpace(b, j)
		if i >= len(b) || b[i] != ':' {
			return it.fail()
		}
		i++
	}
	i = SkipSpace(b, i)
	if i >= len(b) {
		return it.fail()
	}
	if it.close == ']' {
		m.Start = i
	}
	m.ValueStart = i
	it.m, it.n = m, it.n+1
	return true
}

// Start is the offset of the current value's first byte.
func (it *Iter) Start() int { return it.m.ValueStart }

// Bytes is the whole input the iterator scans.
func (it *Iter) Bytes() []byte { return it.b }

func (it *Iter) fail() bool {
	it.err, it.done = ErrSyntax, true
	return false
}

// Member returns the current member; its Name and offsets stay valid after
// Next. After NextLazy, ValueEnd is -1 until the value's end is known.
func (it *Iter) Member() *Member { return &it.m }

// Value returns the current member's value bytes (nil if it is malformed).
func (it *Iter) Value() []byte {
	if !it.settle() {
		return nil
	}
	return it.b[it.m.ValueStart:it.m.ValueEnd]
}

// NameIs reports whether the current member's name is s.
func (it *Iter) NameIs(s string) bool { return it.m.NameIs(s) }

// AppendName appends the current member's unescaped name to dst.
func (it *Iter) AppendName(dst []byte) []byte {
	m := &it.m
	if !m.escaped {
		return append(dst, m.Name...)
	}
	out, err := jsontext.AppendUnquote(dst, it.b[m.Start:m.Start+len(m.Name)+2])
	if err != nil {
		return append(dst, m.Name...)
	}
	return out
}

// Len is the number of members seen so far.
func (it *Iter) Len() int { return it.n }

// Err is the scanning error, if any, once Next has returned false.
func (it *Iter) Err() error { return it.err }

// End is the index of the closing bracket once the iteration completed
// without error, else -1.
func (it *Iter) End() int {
	if !it.done || it.err != nil {
		return -1
	}
	return it.end
}

// Last is the index just past the last member's value (or just past the
// opening bracket when there is none): where a new member is inserted.
func (it *Iter) Last() int { return it.prev }

// Find returns the value span of the top-level member name of the object b.
// start is -1 when the object has no such member.
func Find(b []byte, name string) (start, end int, err error) {
	it := Object(b, 0)
	for it.Next() {
		if it.NameIs(name) {
			return it.m.ValueStart, it.m.ValueEnd, nil
		}
	}
	return -1, -1, it.Err()
}

// Get returns the value of the top-level member name of the object b, or nil
// when absent or b is malformed.
func Get(b []byte, name string) []byte {
	s, e, err := Find(b, name)
	if err != nil || s < 0 {
		return nil
	}
	return b[s:e]
}

// Edit replaces src[Start:End] with Text (an insertion when Start == End).
type Edit struct {
	Start, End int
	Text       []byte
}

// Apply appends src with the edits applied to dst. Edits must be sorted by
// Start and must not overlap.
func Apply(dst, src []byte, edits ...Edit) []byte {
	pos := 0
	for _, e := range edits {
		dst = append(dst, src[pos:e.Start]...)
		dst = append(dst, e.Text...)
		pos = e.End
	}
	return append(dst, src[pos:]...)
}

// Set appends to dst the object obj with its top-level member name set to
// value (raw JSON): replaced in place when present, else appended as the last
// member.
func Set(dst, obj []byte, name string, value []byte) ([]byte, error) {
	it := Object(obj, 0)
	for it.Next() {
		if it.NameIs(name) {
			return Apply(dst, obj, Edit{Start: it.m.ValueStart, End: it.m.ValueEnd, Text: value}), nil
		}
	}
	if it.Err() != nil {
		return dst, it.Err()
	}
	at := it.Last()
	dst = append(dst, obj[:at]...)
	dst = AppendMember(dst, it.Len() > 0, name, value)
	return append(dst, obj[at:]...), nil
}

// AppendMember appends `,"name":value` (without the comma when first is
// false) to dst.
func AppendMember(dst []byte, comma bool, name string, value []byte) []byte {
	if comma {
		dst = append(dst, ',')
	}
	dst = AppendQuote(dst, name)
	dst = append(dst, ':')
	return append(dst, value...)
}

// DeleteSpan returns the span to cut to remove member m from its object
// together with one separating comma; next is the Start of the following
// member or -1 when m is the last one.
func DeleteSpan(m *Member, first bool, next int) (start, end int) {
	switch {
	case !first:
		return m.Prev, m.ValueEnd // from the end of the previous value
	case next >= 0:
		return m.Start, next // first of several: up to the next name
	default:
		return m.Start, m.ValueEnd // the only member
	}
}

// Delete appends to dst the object obj without its top-level member name.
func Delete(dst, obj []byte, name string) ([]byte, error) {
	it := Object(obj, 0)
	found := false
	var m Member
	first := false
	for it.Next() {
		if found {
			s, e := DeleteSpan(&m, first, it.m.Start)
			return Apply(dst, obj, Edit{Start: s, End: e}), nil
		}
		if it.NameIs(name) {
			found, m, first = true, it.m, it.Len() == 1
		}
	}
	if it.Err() != nil {
		return dst, it.Err()
	}
	if !found {
		return append(dst, obj...), nil
	}
	s, e := DeleteSpan(&m, first, -1)
	return Apply(dst, obj, Edit{Start: s, End: e}), nil
}

// TrimSpace removes leading and trailing JSON whitespace.
func TrimSpace(b []byte) []byte {
	i, j := 0, len(b)
	for i < j && isSpace(b[i]) {
		i++
	}
	for j > i && isSpace(b[j-1]) {
		j--
	}
	return b[i:j]
}

// IsNull reports whether the raw value is the literal null.
func IsNull(v []byte) bool { return len(v) == 4 && string(v) == "null" }

// Kind is the first byte of a raw value: '"', '{', '[', 't', 'f', 'n', or
// '0' for any number; 0 when empty.
func Kind(v []byte) byte {
	if len(v) == 0 {
		return 0
	}
	switch c := v[0]; c {
	case '"', '{', '[', 't', 'f', 'n':
		return c
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return '0'
	}
	return 0
}

// ParseInt parses a raw JSON number that holds an integer (1e3 and 5.0
// count; 5.5 does not).
func ParseInt(v []byte) (int64, bool) {
	if len(v) == 0 {
		return 0, false
	}
	neg := v[0] == '-'
	d := v
	if neg {
		d = v[1:]
	}
	if len(d) > 0 && len(d) <= 18 {
		var n int64
		simple := true
		for _, c := range d {
			if c < '0' || c > '9' {
				simple = false
				break
			}
			n = n*10 + int64(c-'0')
		}
		if simple {
			if neg {
				n = -n
			}
			return n, true
		}
	}
	f, ok := ParseFloat(v)
	if !ok || f != float64(int64(f)) || f > 1<<62 || f < -(1<<62) {
		return 0, false
	}
	return int64(f), true
}

// ParseFloat parses a raw JSON number.
func ParseFloat(v []byte) (float64, bool) {
	if len(v) == 0 {
		return 0, false
	}
	f, err := strconv.ParseFloat(unsafe.String(&v[0], len(v)), 64)
	return f, err == nil
}

// Unquote returns the string value of a raw JSON string.
func Unquote(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", false
	}
	body := v[1 : len(v)-1]
	if bytes.IndexByte(body, '\\') < 0 {
		return string(body), true
	}
	u, err := jsontext.AppendUnquote(nil, v)
	return string(u), err == nil
}

// AppendUnquote appends the value of a raw JSON string to dst.
func AppendUnquote(dst, v []byte) ([]byte, bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return dst, false
	}
	body := v[1 : len(v)-1]
	if bytes.IndexByte(body, '\\') < 0 {
		return append(dst, body...), true
	}
	out, err := jsontext.AppendUnquote(dst, v)
	return out, err == nil
}

// StringIs reports whether the raw value is the JSON string s.
func StringIs(v []byte, s string) bool {
	if len(v) < 2 || v[0] != '"' {
		return false
	}
	body := v[1 : len(v)-1]
	if bytes.IndexByte(body, '\\') < 0 {
		return string(body) == s
	}
	return unescapedEqual(body, s)
}

// UnquotedLen is the length in bytes of the UTF-8 value of a raw JSON string,
// computed without decoding it (0 for a value that is not a string).
func UnquotedLen(v []byte) int {
	if len(v) < 2 || v[0] != '"' {
		return 0
	}
	body := v[1 : len(v)-1]
	n := 0
	for {
		j := bytes.IndexByte(body, '\\')
		if j < 0 {
			return n + len(body)
		}
		n += j
		body = body[j:]
		if len(body) < 2 {
			return n
		}
		if body[1] != 'u' {
			n++
			body = body[2:]
			continue
		}
		if len(body) < 6 {
			return n
		}
		r, ok := hex4(body[2:6])
		body = body[6:]
		switch {
		case !ok:
		case r >= 0xD800 && r < 0xDC00: // high surrogate: a pair is 4 bytes
			if len(body) >= 6 && body[0] == '\\' && body[1] == 'u' {
				if r2, ok := hex4(body[2:6]); ok && r2 >= 0xDC00 && r2 < 0xE000 {
					n += 4
					body = body[6:]
					continue
				}
			}
			n += 3 // replacement character
		default:
			n += utf8.RuneLen(rune(r)) //nolint:gosec // r is a UTF-16 code unit, below 0x10000
			if r >= 0xDC00 && r < 0xE000 {
				n += 3 - utf8.RuneLen(rune(r)) // lone low surrogate: replacement character
			}
		}
	}
}

func hex4(b []byte) (int, bool) {
	r := 0
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | int(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | int(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | int(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// AppendQuote appends s as a JSON string. Invalid UTF-8 becomes U+FFFD.
func AppendQuote[S ~string | ~[]byte](dst []byte, s S) []byte {
	// fast path: printable ASCII without quote or backslash
	simple := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
			simple = false
			break
		}
	}
	if simple {
		dst = append(dst, '"')
		dst = append(dst, s...)
		return append(dst, '"')
	}
	dst, _ = jsontext.AppendQuote(dst, s)
	return dst
}

// AppendInt appends an integer.
func AppendInt(dst []byte, n int64) []byte { return strconv.AppendInt(dst, n, 10) }

// AppendFloat appends a float in the shortest form that round-trips.
func AppendFloat(dst []byte, f float64) []byte {
	if f == float64(int64(f)) && f < 1e15 && f > -1e15 {
		return strconv.AppendInt(dst, int64(f), 10)
	}
	return strconv.AppendFloat(dst, f, 'g', -1, 64)
}

// AppendBool appends true or false.
func AppendBool(dst []byte, b bool) []byte {
	if b {
		return append(dst, "true"...)
	}
	return append(dst, "false"...)
}

// Compact appends the compact form of a valid raw JSON value to dst (or the
// value unchanged when it cannot be compacted).
func Compact(dst, v []byte) []byte {
	start := len(dst)
	dst = append(dst, v...)
	c := jsontext.Value(dst[start:])
	if err := c.Compact(); err != nil {
		return append(dst[:start], v...)
	}
	return append(dst[:start], c...)
}
