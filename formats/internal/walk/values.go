package walk

import "strconv"

// Num renders a number of a range error the shortest way that reads back
// the same ("0", "2", "0.5", "1e+06").
func Num(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// Ptr returns a pointer to a copy of v, for the optional members of the IR
// the walkers fill.
func Ptr[T any](v T) *T { return &v }
