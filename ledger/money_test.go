package ledger

import (
	"encoding/json"
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestMoneyString(t *testing.T) {
	tests := []struct {
		m    Money
		want string
	}{
		{0, "0.000000000"},
		{1, "0.000000001"},
		{-1, "-0.000000001"},
		{12345678900, "12.345678900"},
		{-2500000000, "-2.500000000"},
		{1000000000, "1.000000000"},
		{999999999, "0.999999999"},
		{math.MaxInt64, "9223372036.854775807"},
		{math.MinInt64, "-9223372036.854775808"},
	}
	for _, tt := range tests {
		if got := tt.m.String(); got != tt.want {
			t.Errorf("Money(%d).String() = %q, want %q", int64(tt.m), got, tt.want)
		}
		back, err := ParseMoney(tt.want)
		if err != nil || back != tt.m {
			t.Errorf("ParseMoney(%q) = %d, %v; want %d", tt.want, back, err, tt.m)
		}
	}
}

func TestParseMoney(t *testing.T) {
	tests := []struct {
		in      string
		want    Money
		wantErr string // substring; "" = no error
	}{
		{"5", 5_000_000_000, ""},
		{"5.00", 5_000_000_000, ""},
		{"0.000000001", 1, ""},
		{"-2.5", -2_500_000_000, ""},
		{"0", 0, ""},
		{"-0", 0, ""},
		{"007.1", 7_100_000_000, ""},
		{"9223372036.854775807", math.MaxInt64, ""},
		{"-9223372036.854775808", math.MinInt64, ""},
		{"9223372036.854775808", 0, "overflow"},
		{"-9223372036.854775809", 0, "overflow"},
		{"99999999999999999999999", 0, "overflow"},
		{"0.0000000001", 0, "more than 9 decimal places"},
		{"1.0000000000", 0, "more than 9 decimal places"},
		{"", 0, "empty"},
		{"1e3", 0, "invalid decimal"},
		{" 5", 0, "invalid decimal"},
		{"5 ", 0, "invalid decimal"},
		{"+5", 0, "invalid decimal"},
		{"5.", 0, "invalid decimal"},
		{".5", 0, "invalid decimal"},
		{"-", 0, "invalid decimal"},
		{"--5", 0, "invalid decimal"},
		{"5.5.5", 0, "invalid decimal"},
		{"1,5", 0, "invalid decimal"},
		{"0x10", 0, "invalid decimal"},
		{"١", 0, "invalid decimal"},
	}
	for _, tt := range tests {
		got, err := ParseMoney(tt.in)
		if tt.wantErr == "" {
			if err != nil || got != tt.want {
				t.Errorf("ParseMoney(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("ParseMoney(%q) = %d, %v; want error containing %q", tt.in, got, err, tt.wantErr)
		}
	}
}

func TestParsePerMillion(t *testing.T) {
	tests := []struct {
		in      string
		want    Money
		wantErr string
	}{
		{"0.15", 150, ""},
		{"15", 15000, ""},
		{"0.001", 1, ""},
		{"0", 0, ""},
		{"3.000", 3000, ""},
		{"0.1500", 150, ""}, // trailing zeros still give a whole number of nanos
		{"75", 75000, ""},
		{"0.0375", 0, "not a whole number of nanos per token"},
		{"0.0001", 0, "at most 3 decimal places"},
		{"-1", 0, "negative"},
		{"1e2", 0, "invalid decimal"},
		{"", 0, "empty"},
		{"9223372036854775.807", math.MaxInt64, ""},
		{"9223372036854775.808", 0, "overflow"},
	}
	for _, tt := range tests {
		got, err := ParsePerMillion(tt.in)
		if tt.wantErr == "" {
			if err != nil || got != tt.want {
				t.Errorf("ParsePerMillion(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("ParsePerMillion(%q) = %d, %v; want error containing %q", tt.in, got, err, tt.wantErr)
		}
	}
}

func TestParseDiscount(t *testing.T) {
	tests := []struct {
		in      string
		want    int
		wantErr string
	}{
		{"15%", 1500, ""},
		{"12.5%", 1250, ""},
		{"0%", 0, ""},
		{"99.99%", 9999, ""},
		{"0.01%", 1, ""},
		{"100%", 0, "below 100"},
		{"150%", 0, "below 100"},
		{"99999999999999999999999%", 0, "below 100"},
		{"12.345%", 0, "more than 2 decimal places"},
		{"15", 0, "must end in %"},
		{"-5%", 0, "negative"},
		{"%", 0, "empty"},
		{"15 %", 0, "invalid decimal"},
		{"15%%", 0, "invalid decimal"},
	}
	for _, tt := range tests {
		got, err := ParseDiscount(tt.in)
		if tt.wantErr == "" {
			if err != nil || got != tt.want {
				t.Errorf("ParseDiscount(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("ParseDiscount(%q) = %d, %v; want error containing %q", tt.in, got, err, tt.wantErr)
		}
	}
}

func TestCost(t *testing.T) {
	p := Price{Input: 150, Output: 600, CacheRead: 75, CacheWrite: 190}
	tests := []struct {
		name    string
		p       Price
		t       Tokens
		want    Money
		wantErr string
	}{
		{"zero", p, Tokens{}, 0, ""},
		{"input only", p, Tokens{Input: 1000}, 150_000, ""},
		{"output only", p, Tokens{Output: 10}, 6000, ""},
		// 1000 input of which 400 cache read and 100 cache write: 500·150 + 400·75 + 100·190 + 20·600
		{"all buckets", p, Tokens{Input: 1000, CacheRead: 400, CacheWrite: 100, Output: 20, Reasoning: 5}, 75000 + 30000 + 19000 + 12000, ""},
		{"all cached", p, Tokens{Input: 10, CacheRead: 10}, 750, ""},
		{"cache exceeds input", p, Tokens{Input: 10, CacheRead: 6, CacheWrite: 5}, 0, "exceed input"},
		{"cache overflow trick", p, Tokens{Input: 0, CacheRead: math.MaxInt64, CacheWrite: math.MaxInt64}, 0, "exceed input"},
		{"negative tokens", p, Tokens{Input: -1}, 0, "negative token"},
		{"negative price", Price{Input: -1}, Tokens{Input: 1}, 0, "negative price"},
		{"product overflow", Price{Input: 1 << 40}, Tokens{Input: 1 << 40}, 0, "overflow"},
		{"sum overflow", Price{Input: 1, Output: 1}, Tokens{Input: math.MaxInt64, Output: 1}, 0, "overflow"},
		{"max fits", Price{Input: 1}, Tokens{Input: math.MaxInt64}, math.MaxInt64, ""},
		{"sum above int64 below uint64", Price{Input: 1, Output: 1}, Tokens{Input: math.MaxInt64, Output: math.MaxInt64}, 0, "overflow"},
	}
	for _, tt := range tests {
		got, err := tt.p.Cost(tt.t)
		if tt.wantErr == "" {
			if err != nil || got != tt.want {
				t.Errorf("%s: Cost = %d, %v; want %d", tt.name, got, err, tt.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: Cost = %d, %v; want error containing %q", tt.name, got, err, tt.wantErr)
		}
	}
}

func TestDiscounted(t *testing.T) {
	tests := []struct {
		cost Money
		bps  int
		want Money
	}{
		{10000, 1500, 8500},
		{1, 1500, 0},     // 0.85 rounds down
		{7, 1250, 6},     // 6.125 → 6
		{9999, 1, 9998},  // 9998.0001 → 9998
		{10000, 1, 9999}, // exact
		{-1, 1500, -1},   // floor(-0.85) = -1
		{-10000, 1500, -8500},
		{123, 0, 123},
		{123, -5, 123},                          // clamped
		{123, 10000, 0},                         // clamped
		{123, 20000, 0},                         // clamped
		{math.MaxInt64, 1, 9222449699651090329}, // would overflow a naive int64 product
		{math.MaxInt64, 0, math.MaxInt64},
		{math.MinInt64, 5000, math.MinInt64 / 2},
		{math.MinInt64, 1, -9222449699651090331},
	}
	for _, tt := range tests {
		if got := Discounted(tt.cost, tt.bps); got != tt.want {
			t.Errorf("Discounted(%d, %d) = %d, want %d", tt.cost, tt.bps, got, tt.want)
		}
	}
}

// TestDiscountedMatchesBig checks Discounted against math/big floor division.
func TestDiscountedMatchesBig(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20000; i++ {
		cost := Money(int64(r.Uint64()))
		if i%3 == 0 {
			cost = Money(r.Int64N(1_000_000_000))
		}
		bps := r.IntN(10001)
		num := new(big.Int).Mul(big.NewInt(int64(cost)), big.NewInt(int64(10000-bps)))
		want := new(big.Int).Div(num, big.NewInt(10000)) // Euclidean: floor for positive divisor
		if got := Discounted(cost, bps); big.NewInt(int64(got)).Cmp(want) != 0 {
			t.Fatalf("Discounted(%d, %d) = %d, want %s", cost, bps, got, want)
		}
	}
}

func TestParsePerThousand(t *testing.T) {
	tests := []struct {
		in      string
		want    Money
		wantErr string
	}{
		{"10", 10_000_000, ""}, // 10 per 1,000 searches: 0.01 a search
		{"0.001", 1000, ""},
		{"0.000001", 1, ""},
		{"0", 0, ""},
		{"35.000000", 35_000_000, ""},
		{"2.5", 2_500_000, ""},
		{"0.0000001", 0, "at most 6 decimal places"},
		{"-1", 0, "negative"},
		{"1e3", 0, "invalid decimal"},
		{"", 0, "empty"},
		{"9223372036854.775807", math.MaxInt64, ""},
		{"9223372036854.775808", 0, "overflow"},
	}
	for _, tt := range tests {
		got, err := ParsePerThousand(tt.in)
		if tt.wantErr == "" {
			if err != nil || got != tt.want {
				t.Errorf("ParsePerThousand(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("ParsePerThousand(%q) = %d, %v; want error containing %q", tt.in, got, err, tt.wantErr)
		}
	}
}

func TestHostedCost(t *testing.T) {
	p := HostedPrice{WebSearch: 10_000_000, WebFetch: 0, ImageGeneration: 40_000_000}
	for _, tt := range []struct {
		uses    HostedUses
		want    Money
		wantErr bool
	}{
		{HostedUses{}, 0, false},
		{HostedUses{WebSearch: 3}, 30_000_000, false},
		{HostedUses{WebSearch: 1, WebFetch: 7, ImageGeneration: 2}, 90_000_000, false},
		{HostedUses{WebSearch: -1}, 0, true},
		{HostedUses{WebSearch: math.MaxInt64}, 0, true},
		{HostedUses{WebSearch: math.MaxInt64 / 20_000_000, ImageGeneration: math.MaxInt64 / 40_000_000}, 0, true},
	} {
		got, err := p.Cost(tt.uses)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("Cost(%+v) = %d, %v; want %d (error %v)", tt.uses, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestRounded(t *testing.T) {
	for _, tc := range []struct {
		in   Money
		want string
	}{
		{0, "0.00"},
		{19_999_146_400, "20.00"},
		{19_994_999_999, "19.99"},
		{19_995_000_000, "20.00"},
		{5 * NanosPerUnit, "5.00"},
		{1_234_567 * NanosPerUnit, "1,234,567.00"},
		{999 * NanosPerUnit, "999.00"},
		{1_000 * NanosPerUnit, "1,000.00"},
		{10_000_000, "0.01"},
		{146_400, "0.000146"},
		{146_500, "0.000147"},
		{1, "0.000000001"},
		{9_999_999, "0.01"},
		{9_994_999, "0.00999"},
		{99_950, "0.0001"},
		{120_000, "0.00012"},
		{-2_500_000_000, "-2.50"},
		{-146_400, "-0.000146"},
	} {
		if got := tc.in.Rounded(); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestMoneyJSON: an amount in JSON is a string holding the decimal,
// exactly; one finer than the ledger's unit or not a decimal is refused
// with an error that says why, never rounded; a JSON number is refused
// with how to write it.
func TestMoneyJSON(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Money
		err  string
	}{
		{`"5.00"`, 5 * NanosPerUnit, ""},
		{`"-2.25"`, -2_250_000_000, ""},
		{`"0.000000001"`, 1, ""},
		{`"0.0000000001"`, 0, "more than 9 decimal places"},
		{`"0.30000000000000004"`, 0, "more than 9 decimal places"}, // a float's sum, sent as text
		{`"1e3"`, 0, "invalid decimal"},
		{`"five"`, 0, "invalid decimal"},
		{`5`, 0, `write amounts as decimal strings, such as "5.00"`},
		{`1.25`, 0, `write amounts as decimal strings, such as "5.00"`},
		{`true`, 0, `write amounts as decimal strings`},
	} {
		var v struct {
			Amount Money `json:"amount"`
		}
		err := json.Unmarshal([]byte(`{"amount":`+tt.in+`}`), &v)
		switch {
		case tt.err == "" && (err != nil || v.Amount != tt.want):
			t.Errorf("%s: %v, %v; want %v", tt.in, v.Amount, err, tt.want)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%s: %v, %v; want an error saying %q", tt.in, v.Amount, err, tt.err)
		}
	}
	var v struct{ Amount Money }
	v.Amount = 7
	if err := json.Unmarshal([]byte(`{"Amount":null}`), &v); err != nil || v.Amount != 7 {
		t.Errorf("null: %v, %v", v.Amount, err)
	}
}

func TestMoneyDisplay(t *testing.T) {
	for _, tt := range []struct {
		m    Money
		want string
	}{
		{0, "0.000000"},
		{9_999_999_900, "9.999999"}, // cut, never rounded up to a round figure
		{9_820_623_900, "9.820623"},
		{4_261_000, "0.004261"},
		{1_000, "0.000001"},
		{999, "<0.000001"},
		{1, "<0.000001"},
		{-1, "-<0.000001"},
		{-2_500_000_000, "-2.500000"},
		{1_234_567_500_000_000, "1,234,567.500000"},
		{math.MaxInt64, "9,223,372,036.854775"},
		{math.MinInt64, "-9,223,372,036.854775"},
	} {
		if got := tt.m.Display(); got != tt.want {
			t.Errorf("Money(%d).Display() = %q, want %q", int64(tt.m), got, tt.want)
		}
	}
}
