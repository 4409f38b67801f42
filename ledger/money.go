package ledger

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
)

// Money is an amount in nanos: 1e-9 of the currency unit. It is never a float.
type Money int64

// NanosPerUnit is the number of nanos in one currency unit.
const NanosPerUnit = 1_000_000_000

// String formats m as an exact decimal with 9 places: 12345678900 → "12.345678900",
// -1 → "-0.000000001".
func (m Money) String() string {
	var buf [24]byte
	return string(m.Append(buf[:0]))
}

// appendSign appends m's sign to b ("-" for a negative m) and returns b
// and m's magnitude (two's complement, exact for math.MinInt64 too).
func (m Money) appendSign(b []byte) ([]byte, uint64) {
	u := uint64(m) //nolint:gosec // G115: the bits as they are; a negative m is negated below into its magnitude
	if m < 0 {
		return append(b, '-'), -u
	}
	return b, u
}

// Append appends the String form of m to b and returns the extended slice.
func (m Money) Append(b []byte) []byte {
	b, u := m.appendSign(b)
	b = strconv.AppendUint(b, u/NanosPerUnit, 10)
	b = append(b, '.')
	return appendDigits(b, u%NanosPerUnit, 9)
}

// appendDigits appends the last width (at most 9) decimal digits of n,
// zeros first where n has fewer.
func appendDigits(b []byte, n uint64, width int) []byte {
	var digits [9]byte
	for i := width - 1; i >= 0; i-- {
		digits[i] = byte('0' + n%10)
		n /= 10
	}
	return append(b, digits[:width]...)
}

// Rounded formats m for people: to the cent, with thousands separated
// ("19.999146400" → "20.00", 1234567 units → "1,234,567.00"), or, below a
// cent, to three significant digits ("0.000146400" → "0.000146"), so that a
// tiny cost does not read as nothing. Zero is "0.00". String is the exact
// form, for machines and for a title to hover over.
func (m Money) Rounded() string {
	b, u := m.appendSign(nil)
	const cent = NanosPerUnit / 100
	if u == 0 || u >= cent {
		cents := u / cent
		if u%cent >= cent/2 {
			cents++
		}
		b = appendGrouped(b, cents/100)
		b = append(b, '.', byte('0'+cents%100/10), byte('0'+cents%10))
		return string(b)
	}
	// below a cent: "0.00…" and three significant digits, trailing zeros cut
	digits := strconv.AppendUint(nil, u, 10) // at most 7 digits
	zeros := 9 - len(digits)
	sig := digits[:min(3, len(digits))]
	if len(digits) > 3 && digits[3] >= '5' {
		// round half up; 999 → 1000 stays within the cent (9,995,000 rounds to 0.01)
		n, _ := strconv.Atoi(string(sig))
		n++
		if n == 1000 {
			if zeros == 2 {
				return string(append(b, "0.01"...))
			}
			zeros--
			n = 100
		}
		sig = strconv.AppendInt(nil, int64(n), 10)
	}
	b = append(b, "0."...)
	for range zeros {
		b = append(b, '0')
	}
	return string(append(b, strings.TrimRight(string(sig), "0")...))
}

// DisplayDecimals is how many decimal places Display shows.
const DisplayDecimals = 6

// Display formats an amount for people, the one way every page and the
// CLI's tables show balances and charges: six decimal places, cut toward
// zero (never more than there is: 9.9999999 is "9.999999", not "10.00"),
// thousands separated ("1,234.500000"), so that amounts in a column line up
// on their decimal point and a sub-cent amount keeps its figures. A
// non-zero amount below a millionth is "<0.000001" (or "-<0.000001").
// String is the exact form, for machines, exports and a title to hover
// over.
func (m Money) Display() string {
	b, u := m.appendSign(nil)
	const unit = NanosPerUnit / 1_000_000 // the last digit shown
	if u != 0 && u < unit {
		return string(append(b, "<0.000001"...))
	}
	b = appendGrouped(b, u/NanosPerUnit)
	b = append(b, '.')
	return string(appendDigits(b, u%NanosPerUnit/unit, DisplayDecimals))
}

// appendGrouped appends n with its thousands separated by commas.
func appendGrouped(b []byte, n uint64) []byte {
	s := strconv.FormatUint(n, 10)
	for i, c := range []byte(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			b = append(b, ',')
		}
		b = append(b, c)
	}
	return b
}

// MarshalText encodes m as its exact decimal String form.
func (m Money) MarshalText() ([]byte, error) { return m.Append(nil), nil }

// UnmarshalText parses an exact decimal with ParseMoney.
func (m *Money) UnmarshalText(b []byte) error {
	v, err := ParseMoney(string(b))
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// UnmarshalJSON takes an amount as a JSON string holding an exact decimal
// ("5.00", ParseMoney): refused, never rounded, beyond the ledger's unit (9
// decimal places). A JSON number is refused with a message that says how
// to write it, since a client's float may not be the decimal meant (0.1 +
// 0.2). null leaves m as it is.
func (m *Money) UnmarshalJSON(b []byte) error {
	s := string(b)
	switch {
	case s == "null":
		return nil
	case len(s) >= 2 && s[0] == '"':
		var text string
		if err := json.Unmarshal(b, &text); err != nil {
			return fmt.Errorf("ledger: parse money: %w", err)
		}
		return m.UnmarshalText([]byte(text))
	}
	return fmt.Errorf("ledger: parse money %s: write amounts as decimal strings, such as \"5.00\", not JSON numbers", s)
}

// errSyntax is wrapped by every parse error about the shape of a decimal.
var errSyntax = errors.New("invalid decimal")

// decimal is a parsed plain decimal string: [-]digits[.digits].
type decimal struct {
	neg       bool
	int, frac string
}

// parseDecimal checks the plain decimal syntax: an optional '-', one or more
// digits, optionally '.' followed by one or more digits. Nothing else: no
// '+', no spaces, no exponent, no leading or trailing '.'.
func parseDecimal(s string) (decimal, error) {
	var d decimal
	if s == "" {
		return d, fmt.Errorf("%w: empty", errSyntax)
	}
	rest := s
	if rest[0] == '-' {
		d.neg = true
		rest = rest[1:]
	}
	intPart, fracPart, hasDot := strings.Cut(rest, ".")
	if intPart == "" || (hasDot && fracPart == "") {
		return d, fmt.Errorf("%w: %q", errSyntax, s)
	}
	if !allDigits(intPart) || !allDigits(fracPart) {
		return d, fmt.Errorf("%w: %q", errSyntax, s)
	}
	d.int, d.frac = intPart, fracPart
	return d, nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// scaled returns |d|·10^scale as a uint64. The fraction must have at most
// scale digits (after dropping trailing zeros when trimZeros is set).
// The bool is false when the fraction has too many digits; the error reports overflow.
func (d decimal) scaled(scale int, trimZeros bool) (uint64, bool, error) {
	frac := d.frac
	if trimZeros {
		frac = strings.TrimRight(frac, "0")
	}
	if len(frac) > scale {
		return 0, false, nil
	}
	var v uint64
	add := func(c byte) error {
		hi, lo := bits.Mul64(v, 10)
		if hi != 0 {
			return errOverflow
		}
		sum, carry := bits.Add64(lo, uint64(c-'0'), 0)
		if carry != 0 {
			return errOverflow
		}
		v = sum
		return nil
	}
	for i := 0; i < len(d.int); i++ {
		if err := add(d.int[i]); err != nil {
			return 0, true, err
		}
	}
	for i := 0; i < scale; i++ {
		c := byte('0')
		if i < len(frac) {
			c = frac[i]
		}
		if err := add(c); err != nil {
			return 0, true, err
		}
	}
	return v, true, nil
}

// errOverflow is wrapped by every error about a value that does not fit in an int64.
var errOverflow = errors.New("overflows int64 nanos")

// signed applies the sign to a magnitude, checking the int64 range.
func signed(u uint64, neg bool) (int64, error) {
	if neg {
		if u > 1<<63 {
			return 0, errOverflow
		}
		return int64(-u), nil //nolint:gosec // G115: u ≤ 1<<63 (checked above), so -u as an int64 is in [MinInt64, 0]
	}
	if u > math.MaxInt64 {
		return 0, errOverflow
	}
	return int64(u), nil
}

// ParseMoney parses an exact decimal amount of the currency unit into nanos:
// "5", "5.00", "0.000000001", "-2.5". It rejects more than 9 decimals,
// values outside the int64 range, and anything but a plain decimal
// ("", "1e3", " 5", "+5", "5.", ".5").
func ParseMoney(s string) (Money, error) {
	d, err := parseDecimal(s)
	if err != nil {
		return 0, fmt.Errorf("ledger: parse money: %w", err)
	}
	u, ok, err := d.scaled(9, false)
	if !ok {
		return 0, fmt.Errorf("ledger: parse money %q: more than 9 decimal places", s)
	}
	if err != nil {
		return 0, fmt.Errorf("ledger: parse money %q: %w", s, err)
	}
	v, err := signed(u, d.neg)
	if err != nil {
		return 0, fmt.Errorf("ledger: parse money %q: %w", s, err)
	}
	return Money(v), nil
}

// ParsePerMillion parses a price per 1M tokens, given as a decimal of the
// currency unit, into nanos per token: "0.15" → 150, "15" → 15000,
// "0.001" → 1. The result must be a whole number of nanos ≥ 0, so at most
// 3 significant decimal places ("0.0375" is an error).
func ParsePerMillion(s string) (Money, error) {
	// price/1e6 units per token = price·1e9/1e6 nanos = price·1e3 nanos.
	return parsePrice(s, 3, "price per 1M tokens", "nanos per token")
}

// ParsePerThousand parses a price per 1,000 uses (how vendors publish
// the fees of hosted tools: "10 USD per 1,000 searches"), given as a decimal
// of the currency unit, into nanos per use: "10" → 10000000, "0.000001" → 1.
// The result must be a whole number of nanos ≥ 0, so at most 6 significant
// decimal places.
func ParsePerThousand(s string) (Money, error) {
	// price/1e3 units per use = price·1e9/1e3 nanos = price·1e6 nanos.
	return parsePrice(s, 6, "price per 1,000 uses", "nanos per use")
}

// parsePrice parses a price of at least 0, given in the currency unit per
// 10^(9−decimals) of something, into whole nanos per one of it.
func parsePrice(s string, decimals int, what, per string) (Money, error) {
	d, err := parseDecimal(s)
	if err != nil {
		return 0, fmt.Errorf("ledger: parse %s: %w", what, err)
	}
	if d.neg {
		return 0, fmt.Errorf("ledger: parse %s %q: negative price", what, s)
	}
	u, ok, err := d.scaled(decimals, true)
	if !ok {
		return 0, fmt.Errorf("ledger: %s %q is not a whole number of %s (at most %d decimal places allowed)", what, s, per, decimals)
	}
	if err != nil {
		return 0, fmt.Errorf("ledger: parse %s %q: %w", what, s, err)
	}
	v, err := signed(u, false)
	if err != nil {
		return 0, fmt.Errorf("ledger: parse %s %q: %w", what, s, err)
	}
	return Money(v), nil
}

// ParseDiscount parses a percentage into basis points: "15%" → 1500,
// "12.5%" → 1250, "0%" → 0. It must end in '%', be at least 0 and below 100,
// and have at most 2 decimal places.
func ParseDiscount(s string) (bps int, err error) {
	num, ok := strings.CutSuffix(s, "%")
	if !ok {
		return 0, fmt.Errorf("ledger: parse discount %q: must end in %%", s)
	}
	d, err := parseDecimal(num)
	if err != nil {
		return 0, fmt.Errorf("ledger: parse discount %q: %w", s, err)
	}
	if d.neg {
		return 0, fmt.Errorf("ledger: parse discount %q: negative", s)
	}
	u, ok, err := d.scaled(2, false)
	if !ok {
		return 0, fmt.Errorf("ledger: parse discount %q: more than 2 decimal places", s)
	}
	if err != nil || u >= 10000 {
		return 0, fmt.Errorf("ledger: parse discount %q: must be below 100%%", s)
	}
	return int(u), nil
}

// Price is what one token costs, in nanos per token, per bucket.
type Price struct {
	Input, Output, CacheRead, CacheWrite Money
}

// Tokens is the usage of one request. Input counts ALL input tokens,
// the cache buckets included; Output includes Reasoning.
type Tokens struct {
	Input, Output, CacheRead, CacheWrite, Reasoning int64
}

// HostedUses counts a request's uses of hosted tools billed per use.
type HostedUses struct {
	WebSearch, WebFetch, ImageGeneration int64
}

// HostedPrice is what one use of each hosted tool costs, in nanos.
type HostedPrice struct {
	WebSearch, WebFetch, ImageGeneration Money
}

// Cost is the sum of uses × price per tool. It fails on negative counts or
// prices and on overflow.
func (p HostedPrice) Cost(h HostedUses) (Money, error) {
	terms := [3][2]int64{
		{h.WebSearch, int64(p.WebSearch)},
		{h.WebFetch, int64(p.WebFetch)},
		{h.ImageGeneration, int64(p.ImageGeneration)},
	}
	var total uint64
	for _, t := range terms {
		if t[0] < 0 || t[1] < 0 {
			return 0, fmt.Errorf("ledger: hosted cost: negative count or price")
		}
		hi, lo := bits.Mul64(uint64(t[0]), uint64(t[1])) //nolint:gosec // G115: both ≥ 0, checked just above
		if hi != 0 {
			return 0, fmt.Errorf("ledger: hosted cost: %w", errOverflow)
		}
		var carry uint64
		total, carry = bits.Add64(total, lo, 0)
		if carry != 0 || total > math.MaxInt64 {
			return 0, fmt.Errorf("ledger: hosted cost: %w", errOverflow)
		}
	}
	return Money(total), nil
}

// ErrOverflow is returned (wrapped) when an amount does not fit in an int64 of nanos.
var ErrOverflow = errOverflow

// Cost is (Input−CacheRead−CacheWrite)·p.Input + CacheRead·p.CacheRead +
// CacheWrite·p.CacheWrite + Output·p.Output. It fails on overflow, on
// negative counts or prices, and when the cache buckets exceed Input.
func (p Price) Cost(t Tokens) (Money, error) {
	if t.Input < 0 || t.Output < 0 || t.CacheRead < 0 || t.CacheWrite < 0 || t.Reasoning < 0 {
		return 0, fmt.Errorf("ledger: cost: negative token count")
	}
	if p.Input < 0 || p.Output < 0 || p.CacheRead < 0 || p.CacheWrite < 0 {
		return 0, fmt.Errorf("ledger: cost: negative price")
	}
	if t.CacheRead > t.Input || t.CacheWrite > t.Input-t.CacheRead {
		return 0, fmt.Errorf("ledger: cost: cache tokens (%d read + %d write) exceed input tokens (%d)", t.CacheRead, t.CacheWrite, t.Input)
	}
	uncached := t.Input - t.CacheRead - t.CacheWrite // ≥ 0, checked above
	terms := [4][2]uint64{
		{uint64(uncached), uint64(p.Input)}, //nolint:gosec // G115: uncached ≥ 0 and p.Input ≥ 0, both checked above
		{uint64(t.CacheRead), uint64(p.CacheRead)},
		{uint64(t.CacheWrite), uint64(p.CacheWrite)},
		{uint64(t.Output), uint64(p.Output)},
	}
	var total uint64
	for _, term := range terms {
		hi, lo := bits.Mul64(term[0], term[1])
		if hi != 0 {
			return 0, fmt.Errorf("ledger: cost: %w", errOverflow)
		}
		var carry uint64
		total, carry = bits.Add64(total, lo, 0)
		if carry != 0 {
			return 0, fmt.Errorf("ledger: cost: %w", errOverflow)
		}
	}
	if total > math.MaxInt64 {
		return 0, fmt.Errorf("ledger: cost: %w", errOverflow)
	}
	return Money(total), nil
}

// Discounted applies a discount of bps basis points: floor(cost·(10000−bps)/10000),
// exact for any int64 cost (negative costs round toward −∞). bps is clamped
// to [0, 10000].
func Discounted(cost Money, bps int) Money {
	if bps <= 0 {
		return cost
	}
	if bps >= 10000 {
		return 0
	}
	neg := cost < 0
	u := uint64(cost) //nolint:gosec // G115: the bits as they are; a negative cost is negated below into its magnitude
	if neg {
		u = -u
	}
	hi, lo := bits.Mul64(u, uint64(10000-bps))
	q, r := bits.Div64(hi, lo, 10000) // hi < 10000, so no panic
	if !neg {
		return Money(q) //nolint:gosec // G115: q ≤ u ≤ MaxInt64: cost ≥ 0 times a factor below 1
	}
	if r != 0 {
		q++
	}
	return Money(-q) //nolint:gosec // G115: q ≤ u ≤ 1<<63, so -q as an int64 is in [MinInt64, 0]
}
