package web

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// StatusPage is the view model of the public status page: what the gateway
// knows about each provider now and over the last 90 days. It holds no keys,
// URLs or other secrets, and must not.
type StatusPage struct {
	Title     string    // page title, e.g. "modelgate status"; empty = "Status"
	Generated time.Time // when the data was read; shown in UTC
	Target    float64   // uptime target in percent; zero means DefaultTarget
	Providers []ProviderStatus
}

// ProviderStatus is one provider's current state and history.
type ProviderStatus struct {
	Name   string // the provider's name from the configuration
	Format string // wire format it speaks: openai | anthropic | gemini
	// State is the current health: "operational", "degraded" or "down".
	// Any other value is shown as given, with a neutral badge, and counts
	// as degraded in the page's overall state.
	State string
	// Uptime over the last 24 hours, 7 days and 90 days, in percent;
	// nil means no data in that window.
	Uptime24h, Uptime7d, Uptime90d *float64
	// Days has one bar per UTC day, oldest first, today last (90 entries).
	Days []DayBar
	// Incidents are the recent incidents, newest first.
	Incidents []Incident
}

// DayBar is one provider's record for one UTC day.
type DayBar struct {
	Date     string   // YYYY-MM-DD (UTC)
	Uptime   *float64 // percent; nil = no data that day
	Requests int64
	Failures int64
}

// Incident is a period during which a provider was unhealthy.
type Incident struct {
	Start time.Time
	End   time.Time // zero while ongoing
	// Cause is the failure class: connect, timeout, server, overloaded,
	// rate_limited, auth or closed. Others are shown as given.
	Cause string
}

// DefaultTarget is the uptime target, in percent, of a page whose Target
// is zero: the product promises 99.9% for every provider.
const DefaultTarget = 99.9

// The provider states.
const (
	StateOperational = "operational"
	StateDegraded    = "degraded"
	StateDown        = "down"
)

// The levels of a day, as returned by [DayBar.Level].
const (
	LevelNone  = "none"  // no data
	LevelOK    = "ok"    // at or above the target
	LevelMinor = "minor" // below the target, at or above 99%
	LevelMajor = "major" // below 99%, at or above 95%
	LevelDown  = "down"  // below 95%
)

// eps absorbs floating-point noise in computed percentages, so that an
// uptime of exactly the target never counts as below it.
const eps = 1e-9

// Level classifies the day against the uptime target: "none" (no data), "ok"
// (at or above target), "minor" (at or above 99%), "major" (at or above 95%)
// or "down" (below 95%).
func (d DayBar) Level(target float64) string {
	switch u := d.Uptime; {
	case u == nil:
		return LevelNone
	case *u+eps >= target:
		return LevelOK
	case *u+eps >= 99:
		return LevelMinor
	case *u+eps >= 95:
		return LevelMajor
	}
	return LevelDown
}

// Ongoing reports whether the incident has not ended yet.
func (i Incident) Ongoing() bool { return i.End.IsZero() }

// Duration is how long the incident lasted, or has lasted by now if it is
// ongoing.
func (i Incident) Duration(now time.Time) time.Duration {
	end := i.End
	if i.Ongoing() {
		end = now
	}
	if d := end.Sub(i.Start); d > 0 {
		return d
	}
	return 0
}

// Overall is the state of the page as a whole: the worst provider state
// ("down" if any provider is down, else "degraded" if any is not
// operational, else "operational"), or "" when there are no providers.
func (p *StatusPage) Overall() string {
	if len(p.Providers) == 0 {
		return ""
	}
	worst := StateOperational
	for _, pr := range p.Providers {
		switch pr.State {
		case StateOperational:
		case StateDown:
			return StateDown
		default:
			worst = StateDegraded
		}
	}
	return worst
}

// causeText puts an incident cause in words.
var causeText = map[string]string{
	"connect":      "could not connect to upstream",
	"timeout":      "upstream timed out",
	"server":       "upstream server errors",
	"overloaded":   "upstream overloaded",
	"rate_limited": "rate limited",
	"auth":         "upstream rejected the credentials",
	"closed":       "upstream closed the connection",
}

// CauseText describes an incident cause in words, e.g. "upstream timed out"
// for "timeout". Unknown causes come back as given; an empty one as
// "unknown cause".
func CauseText(cause string) string {
	if t, ok := causeText[cause]; ok {
		return t
	}
	if cause == "" {
		return "unknown cause"
	}
	return strings.ReplaceAll(cause, "_", " ")
}

// RenderStatus writes the status page as a complete HTML document.
func RenderStatus(w io.Writer, p *StatusPage) error {
	return render(w, "status", newStatusView(p))
}

// StatusJSON encodes the page's data as JSON, the body of /status.json:
// snake_case keys, the overall state ("unknown" without providers),
// uptimes as numbers (rounded to 4 decimals) or null, times in RFC 3339
// UTC, an incident's end null while it is ongoing (its duration then runs
// to Generated), and each day's level.
func StatusJSON(p *StatusPage) ([]byte, error) {
	out := statusJSON{
		Title:     p.title(),
		Generated: isoTime(p.Generated),
		Target:    p.target(),
		State:     p.Overall(),
		Providers: make([]providerJSON, 0, len(p.Providers)),
	}
	if out.State == "" {
		out.State = "unknown"
	}
	for _, pr := range p.Providers {
		pj := providerJSON{
			Name:      pr.Name,
			Format:    pr.Format,
			State:     pr.State,
			Uptime24h: round4(pr.Uptime24h),
			Uptime7d:  round4(pr.Uptime7d),
			Uptime90d: round4(pr.Uptime90d),
			Days:      make([]dayJSON, 0, len(pr.Days)),
			Incidents: make([]incidentJSON, 0, len(pr.Incidents)),
		}
		for _, d := range pr.Days {
			pj.Days = append(pj.Days, dayJSON{
				Date:     d.Date,
				Uptime:   round4(d.Uptime),
				Requests: d.Requests,
				Failures: d.Failures,
				Level:    d.Level(p.target()),
			})
		}
		for _, in := range pr.Incidents {
			ij := incidentJSON{
				Start:           isoTime(in.Start),
				Cause:           in.Cause,
				Description:     CauseText(in.Cause),
				Ongoing:         in.Ongoing(),
				DurationSeconds: int64(in.Duration(p.Generated) / time.Second),
			}
			if !in.Ongoing() {
				end := isoTime(in.End)
				ij.End = &end
			}
			pj.Incidents = append(pj.Incidents, ij)
		}
		out.Providers = append(out.Providers, pj)
	}
	return json.Marshal(out)
}

type statusJSON struct {
	Title     string         `json:"title"`
	Generated string         `json:"generated"`
	Target    float64        `json:"target"`
	State     string         `json:"state"`
	Providers []providerJSON `json:"providers"`
}

type providerJSON struct {
	Name      string         `json:"name"`
	Format    string         `json:"format"`
	State     string         `json:"state"`
	Uptime24h *float64       `json:"uptime_24h"`
	Uptime7d  *float64       `json:"uptime_7d"`
	Uptime90d *float64       `json:"uptime_90d"`
	Days      []dayJSON      `json:"days"`
	Incidents []incidentJSON `json:"incidents"`
}

type dayJSON struct {
	Date     string   `json:"date"`
	Uptime   *float64 `json:"uptime"`
	Requests int64    `json:"requests"`
	Failures int64    `json:"failures"`
	Level    string   `json:"level"`
}

type incidentJSON struct {
	Start           string  `json:"start"`
	End             *string `json:"end"`
	Ongoing         bool    `json:"ongoing"`
	DurationSeconds int64   `json:"duration_seconds"`
	Cause           string  `json:"cause"`
	Description     string  `json:"description"`
}

func (p *StatusPage) target() float64 {
	if p.Target <= 0 {
		return DefaultTarget
	}
	return p.Target
}

func (p *StatusPage) title() string {
	if p.Title == "" {
		return "Status"
	}
	return p.Title
}

func isoTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func round4(v *float64) *float64 {
	if v == nil {
		return nil
	}
	r := math.Round(*v*1e4) / 1e4
	return &r
}

// --- HTML view ---

// statusView is what templates/status.html renders: every string already
// formatted, so the template only lays it out.
type statusView struct {
	Title        string
	Generated    string // "2026-03-14 12:00 UTC"
	GeneratedISO string
	Target       string // "99.9%"
	State        string // overall: operational | degraded | down | none
	Headline     string
	Providers    []providerView
}

type providerView struct {
	ID        string // element id, from the position (names may be anything)
	Name      string
	Format    string
	State     string // css class: operational | degraded | down | unknown
	StateText string // "Operational", …
	Uptimes   []uptimeView
	Days      []dayView // oldest first, for the bars
	Daily     []dayView // newest first, for the table
	DaysSpan  string    // "90 days ago"
	Summary   string    // aria-label of the bars
	HasData   bool      // some day has data
	Incidents []incidentView
}

type uptimeView struct {
	Window string // "24 h"
	Value  string // "99.95%" or "—"
	Below  bool   // below the target
	NoData bool
}

type dayView struct {
	Date     string
	Level    string
	Uptime   string // "99.95%" or "—"
	Requests string // "12,345"
	Failures string
	Title    string // tooltip
	Below    bool
}

type incidentView struct {
	Cause    string
	Start    string
	StartISO string
	End      string // "" while ongoing
	EndISO   string
	Ongoing  bool
	Duration string
}

var headlines = map[string]string{
	StateOperational: "All systems operational",
	StateDegraded:    "Some providers degraded",
	StateDown:        "Major outage",
	"":               "No data yet",
}

func newStatusView(p *StatusPage) statusView {
	v := statusView{
		Title:        p.title(),
		Generated:    humanTime(p.Generated),
		GeneratedISO: isoTime(p.Generated),
		Target:       strconv.FormatFloat(p.target(), 'f', -1, 64) + "%",
		State:        p.Overall(),
	}
	v.Headline = headlines[v.State]
	if v.State == "" {
		v.State = "none"
	}
	for i, pr := range p.Providers {
		v.Providers = append(v.Providers, newProviderView(i, pr, p))
	}
	return v
}

func newProviderView(i int, pr ProviderStatus, p *StatusPage) providerView {
	pv := providerView{
		ID:       fmt.Sprintf("provider-%d", i+1),
		Name:     pr.Name,
		Format:   pr.Format,
		State:    pr.State,
		DaysSpan: plural(len(pr.Days), "day", "days") + " ago",
	}
	switch pr.State {
	case StateOperational, StateDegraded, StateDown:
		pv.StateText = strings.ToUpper(pr.State[:1]) + pr.State[1:]
	default:
		pv.State = "unknown"
		pv.StateText = pr.State
		if pv.StateText == "" {
			pv.StateText = "Unknown"
		}
	}
	for _, w := range []struct {
		label string
		v     *float64
	}{{"24 h", pr.Uptime24h}, {"7 d", pr.Uptime7d}, {"90 d", pr.Uptime90d}} {
		pv.Uptimes = append(pv.Uptimes, uptimeView{
			Window: w.label,
			Value:  percent(w.v),
			Below:  w.v != nil && *w.v+eps < p.target(),
			NoData: w.v == nil,
		})
	}
	counts := map[string]int{}
	var worst *DayBar
	for _, d := range pr.Days {
		lvl := d.Level(p.target())
		counts[lvl]++
		dv := dayView{
			Date:     d.Date,
			Level:    lvl,
			Uptime:   percent(d.Uptime),
			Requests: thousands(d.Requests),
			Failures: thousands(d.Failures),
			Below:    lvl != LevelNone && lvl != LevelOK,
		}
		if d.Uptime == nil {
			dv.Title = d.Date + ": no data"
		} else {
			pv.HasData = true
			dv.Title = fmt.Sprintf("%s: %s uptime, %s, %s", d.Date, dv.Uptime,
				plural64(d.Requests, "request", "requests"), plural64(d.Failures, "failure", "failures"))
			if worst == nil || *d.Uptime < *worst.Uptime {
				worst = &d
			}
		}
		pv.Days = append(pv.Days, dv)
	}
	for i := len(pv.Days) - 1; i >= 0; i-- {
		pv.Daily = append(pv.Daily, pv.Days[i])
	}
	pv.Summary = barsSummary(len(pr.Days), counts, worst, strconv.FormatFloat(p.target(), 'f', -1, 64)+"%")
	for _, in := range pr.Incidents {
		iv := incidentView{
			Cause:    capitalize(CauseText(in.Cause)),
			Start:    humanTime(in.Start),
			StartISO: isoTime(in.Start),
			Ongoing:  in.Ongoing(),
			Duration: humanDuration(in.Duration(p.Generated)),
		}
		if !in.Ongoing() {
			iv.End = humanTime(in.End)
			iv.EndISO = isoTime(in.End)
			if in.End.UTC().Format(time.DateOnly) == in.Start.UTC().Format(time.DateOnly) {
				iv.End = in.End.UTC().Format("15:04") + " UTC"
			}
		}
		pv.Incidents = append(pv.Incidents, iv)
	}
	return pv
}

// barsSummary is the text alternative of the daily bars.
func barsSummary(n int, counts map[string]int, worst *DayBar, target string) string {
	if n == 0 {
		return "No daily data yet"
	}
	var parts []string
	for _, c := range []struct{ lvl, what string }{
		{LevelOK, "at or above " + target},
		{LevelMinor, "between 99% and " + target},
		{LevelMajor, "between 95% and 99%"},
		{LevelDown, "below 95%"},
		{LevelNone, "without data"},
	} {
		if k := counts[c.lvl]; k > 0 {
			parts = append(parts, plural(k, "day", "days")+" "+c.what)
		}
	}
	s := "Daily uptime over the last " + plural(n, "day", "days") + ": " + strings.Join(parts, ", ")
	if worst != nil && counts[LevelOK] < n-counts[LevelNone] {
		s += "; lowest " + percent(worst.Uptime) + " on " + worst.Date
	}
	return s + "."
}

// percent shows an uptime with two decimals, rounded down so that a figure
// never looks better than it is (99.999 is "99.99%", not "100.00%"), or
// "—" without data.
func percent(v *float64) string {
	if v == nil {
		return "—"
	}
	return strconv.FormatFloat(math.Floor(*v*100+eps*100)/100, 'f', 2, 64) + "%"
}

// humanTime formats a time for people: UTC, to the minute.
func humanTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04") + " UTC" }

// humanDuration rounds a duration to what people care about: "< 1 min",
// "28 min", "2 h 5 min", "3 d 4 h".
func humanDuration(d time.Duration) string {
	m := int64(d / time.Minute)
	switch {
	case m < 1:
		return "< 1 min"
	case m < 60:
		return fmt.Sprintf("%d min", m)
	case m < 24*60:
		if m%60 == 0 {
			return fmt.Sprintf("%d h", m/60)
		}
		return fmt.Sprintf("%d h %d min", m/60, m%60)
	}
	h := m / 60
	if h%24 == 0 {
		return fmt.Sprintf("%d d", h/24)
	}
	return fmt.Sprintf("%d d %d h", h/24, h%24)
}

// thousands formats an integer with comma separators: 12345 → "12,345".
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[n:]
}

func plural(n int, one, many string) string { return plural64(int64(n), one, many) }

func plural64(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return thousands(n) + " " + many
}
