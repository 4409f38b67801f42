package formats

import "strconv"

// Bounds of the x-modelgate-dropped header, whose names come from the
// client's request.
const (
	// MaxDroppedNames is how many distinct dropped names a request keeps.
	MaxDroppedNames = 32
	// maxDroppedName caps one name's escaped length.
	maxDroppedName = 64
	// maxDroppedHeader caps the whole header value.
	maxDroppedHeader = 1024
)

// DroppedHeaderValue joins names with commas for the x-modelgate-dropped
// header. Each name is made header-safe with HeaderSafe and cut to 64
// bytes; names that do not fit in 1 KiB, and more (names the caller only
// counted), are summed up in a last element "+N more". Only printable ASCII
// leaves this function, so no client-chosen name can break the answer's
// header block.
func DroppedHeaderValue(names []string, more int) string {
	if len(names) == 0 && more == 0 {
		return ""
	}
	b := make([]byte, 0, 64)
	for i, n := range names {
		item := HeaderSafe(n, maxDroppedName)
		left := len(names) - i + more
		// room for this name and, if more follow, a "+N more" after it
		need := len(item)
		if left > 1 {
			need += len(",+ more") + 20 // the digits of any int
		}
		if len(b)+1+need > maxDroppedHeader {
			more = left
			break
		}
		if len(b) > 0 {
			b = append(b, ',')
		}
		b = append(b, item...)
	}
	if more > 0 {
		if len(b) > 0 {
			b = append(b, ',')
		}
		b = append(b, '+')
		b = strconv.AppendInt(b, int64(more), 10)
		b = append(b, " more"...)
	}
	return string(b)
}

// HeaderSafe makes s safe as (part of) an HTTP header value: every byte that
// is not printable ASCII, and space, '%' and ',' (the escape and the list
// separator), is percent-encoded as in a URL (DEL becomes %7F, "é" %C3%A9).
// The result is at most max bytes (max >= 8): a longer one is cut and ends
// in "...". A string that needs no change is returned as it is.
func HeaderSafe(s string, max int) string {
	clean := len(s) <= max
	for i := 0; clean && i < len(s); i++ {
		clean = headerPlain(s[i])
	}
	if clean {
		return s
	}
	const hex = "0123456789ABCDEF"
	b := make([]byte, 0, max)
	cut := 0 // length of b before the last whole item that fits max-3
	for i := 0; i < len(s); i++ {
		c := s[i]
		if headerPlain(c) {
			b = append(b, c)
		} else {
			b = append(b, '%', hex[c>>4], hex[c&15])
		}
		if len(b) > max {
			return string(append(b[:cut], "..."...))
		}
		if len(b) <= max-3 {
			cut = len(b)
		}
	}
	return string(b)
}

// headerPlain reports whether c stands for itself in a HeaderSafe string:
// printable ASCII other than space, '%' and ','.
func headerPlain(c byte) bool { return c > ' ' && c < 0x7f && c != '%' && c != ',' }
