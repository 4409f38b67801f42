// Package jsonval reads the raw JSON values that the vendor packages pick
// out of bodies and events with rawjson: strings, counts and list lengths,
// each read the one way every vendor reads it.
package jsonval

import "github.com/modelgate/modelgate/formats/rawjson"

// Str returns the value of a raw JSON string, "" for anything else. It is
// for values already known to be strings.
func Str(v []byte) string {
	s, _ := rawjson.Unquote(v)
	return s
}

// SetStr sets *dst to the value of v when v is a JSON string, and leaves
// it alone otherwise.
func SetStr(dst *string, v []byte) {
	if rawjson.Kind(v) == '"' {
		*dst = Str(v)
	}
}

// Count reads a non-negative integer count: 0 for a negative number, a
// fraction, or anything that is not a number.
func Count(v []byte) int64 {
	n, ok := rawjson.ParseInt(v)
	if !ok || n < 0 {
		return 0
	}
	return n
}

// Len is the number of elements of a raw JSON array (0 for anything else,
// and the elements read before the fault of a malformed one).
func Len(v []byte) int {
	it := rawjson.Array(v, 0)
	for it.Next() {
	}
	return it.Len()
}
