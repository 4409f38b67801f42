package web

import (
	"time"
)

// fixedNow is the Generated time of the test pages.
var fixedNow = time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC)

func ptr(v float64) *float64 { return &v }

// days builds 90 bars ending on fixedNow's day; bar(i) gives requests and
// failures of day i (0 = oldest), and ok=false for a day without data.
func days(bar func(i int) (req, fail int64, ok bool)) []DayBar {
	out := make([]DayBar, 90)
	for i := range out {
		d := DayBar{Date: fixedNow.AddDate(0, 0, i-89).Format(time.DateOnly)}
		if req, fail, ok := bar(i); ok {
			d.Requests, d.Failures = req, fail
			d.Uptime = ptr(100 * float64(req-fail) / float64(req))
		}
		out[i] = d
	}
	return out
}

// fixturePage is the page of the golden and browser tests: one healthy
// provider, one degraded with incidents (one ongoing), one without data.
func fixturePage() *StatusPage {
	return &StatusPage{
		Title:     "modelgate status",
		Generated: fixedNow,
		Target:    99.9,
		Providers: []ProviderStatus{
			{
				Name: "openai-main", Format: "openai", State: StateOperational,
				Uptime24h: ptr(100), Uptime7d: ptr(99.95), Uptime90d: ptr(99.9312),
				Days: days(func(i int) (int64, int64, bool) {
					req := int64(12000 + 37*i)
					switch i {
					case 30:
						return req, req / 200, true // 99.5%: minor
					case 61:
						return req, req * 3 / 100, true // 97%: major
					}
					return req, int64(i % 5), true
				}),
			},
			{
				Name: "anthropic-main", Format: "anthropic", State: StateDegraded,
				Uptime24h: ptr(98.7), Uptime7d: ptr(99.62), Uptime90d: ptr(99.9),
				Days: days(func(i int) (int64, int64, bool) {
					if i < 20 {
						return 0, 0, false // added to the configuration later
					}
					req := int64(800 + 3*i)
					switch i {
					case 75:
						return req, req * 7 / 100, true // 93%: down
					case 89:
						return req, req * 13 / 1000, true // 98.7%: major
					}
					return req, 0, true
				}),
				Incidents: []Incident{
					{Start: fixedNow.Add(-115 * time.Minute), Cause: "timeout"},
					{Start: time.Date(2026, 3, 10, 14, 0, 0, 0, time.UTC), End: time.Date(2026, 3, 10, 14, 35, 0, 0, time.UTC), Cause: "rate_limited"},
					{Start: time.Date(2026, 2, 28, 23, 30, 0, 0, time.UTC), End: time.Date(2026, 3, 1, 2, 10, 0, 0, time.UTC), Cause: "overloaded"},
				},
			},
			{
				Name: "gemini-backup", Format: "gemini", State: StateOperational,
				Days: days(func(int) (int64, int64, bool) { return 0, 0, false }),
			},
		},
	}
}
