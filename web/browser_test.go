package web

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/modelgate/web/webtest"
)

// probeScript measures the laid-out page and writes the numbers into the
// DOM of the top frame, where --dump-dom shows them: the viewport and
// document widths, the rightmost edge of any element, the width of the
// first daily bar and the display of the bar container (flex only if the
// stylesheet applied).
//
// Headless Chromium lays pages out at least 500 px wide whatever
// --window-size says (screenshots excepted), so the phone width is
// measured in an iframe of that width: its viewport, media queries
// included, is the iframe's.
const probeScript = `(function(){var e=document.documentElement,m=0;` +
	`document.querySelectorAll("body *").forEach(function(n){var r=n.getBoundingClientRect();if(r.width>0&&r.right>m)m=r.right});` +
	`var bar=document.querySelector(".bar"),bars=document.querySelector(".bars");` +
	`parent.document.body.setAttribute("data-probe",[innerWidth,e.clientWidth,e.scrollWidth,Math.ceil(m),` +
	`bar?bar.getBoundingClientRect().width.toFixed(2):-1,bars?getComputedStyle(bars).display:"none"].join(" "))})()`

// statusServer serves the fixture page as the gateway would (with the
// production CSP), its JSON, and a probe variant whose CSP also admits
// probeScript by hash, so a stylesheet the CSP blocked would show.
func statusServer(t *testing.T) *httptest.Server {
	t.Helper()
	sum := sha256.Sum256([]byte(probeScript))
	probeCSP := strings.Replace(ContentSecurityPolicy(), "frame-ancestors 'none'", "frame-ancestors 'self'", 1) + "; script-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
	mux := http.NewServeMux()
	page := func(w http.ResponseWriter, csp string, probe bool) {
		p := fixturePage()
		if probe {
			// Long unbroken names must wrap, not widen the page.
			long := p.Providers[1]
			long.Name = strings.Repeat("very-long-provider-name-", 6) + "without-spaces"
			long.Format = strings.Repeat("format", 8)
			long.State = strings.Repeat("maintenance", 6)
			long.Incidents = append(long.Incidents, Incident{Start: fixedNow.Add(-time.Hour), Cause: strings.Repeat("unheard_of_", 12)})
			p.Providers = append(p.Providers, long)
		}
		var b strings.Builder
		if err := RenderStatus(&b, p); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		html := b.String()
		if probe {
			html = strings.Replace(html, "</body>", "<script>"+probeScript+"</script>\n</body>", 1)
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", csp)
		fmt.Fprint(w, html)
	}
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) { page(w, ContentSecurityPolicy(), false) })
	mux.HandleFunc("GET /probe", func(w http.ResponseWriter, r *http.Request) { page(w, probeCSP, true) })
	mux.HandleFunc("GET /frame", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!DOCTYPE html><html><body><iframe src="/probe" width="%d" height="%d" frameborder="0"></iframe></body></html>`,
			atoi(r.FormValue("w")), atoi(r.FormValue("h")))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestStatusPageInChromium(t *testing.T) {
	if _, err := webtest.Find(); err != nil {
		t.Skipf("skipping browser test: %v (install the Debian package chromium)", err)
	}
	srv := statusServer(t)
	dir := webtest.ScreenshotDir(t)

	t.Run("dom", func(t *testing.T) {
		t.Parallel()
		dom := webtest.New(t).DumpDOM(srv.URL + "/status")
		sections := regexp.MustCompile(`(?s)<section class="provider"[^>]*data-state="([a-z]+)"[^>]*>.*?<h2[^>]*>([^<]*)<.*?</section>`).FindAllStringSubmatch(dom, -1)
		got := map[string]string{}
		for _, s := range sections {
			got[strings.TrimSpace(s[2])] = s[1]
			if strings.TrimSpace(s[2]) == "anthropic-main" {
				if !strings.Contains(s[0], `<p class="badge badge-degraded"><span class="vh">Current state: </span>Degraded</p>`) {
					t.Error("anthropic-main has no Degraded badge in the DOM")
				}
				for _, want := range []string{"98.78%", "98.70%", "below target", "Upstream timed out", "ongoing"} {
					if !strings.Contains(s[0], want) {
						t.Errorf("anthropic-main section lacks %q", want)
					}
				}
			}
		}
		want := map[string]string{"openai-main": "operational", "anthropic-main": "degraded", "gemini-backup": "operational"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("provider states in the DOM = %v, want %v", got, want)
		}
		if n := strings.Count(dom, `class="bar lvl-`); n != 180 {
			t.Errorf("%d bars in the DOM, want 180", n)
		}
		for _, want := range []string{"Some providers degraded", `99.95%</strong><span class="win"><span class="sep"> · </span>7 d</span>`, "No data yet", `aria-label="Daily uptime over the last 90 days:`} {
			if !strings.Contains(dom, want) {
				t.Errorf("DOM lacks %q", want)
			}
		}
	})

	// The layout checks: no element past the right edge and no horizontal
	// scroll, the stylesheet applied, and the 90 bars shrunk to fit.
	for _, size := range []struct{ w, h int }{{390, 844}, {1280, 900}} {
		t.Run(fmt.Sprintf("layout-%d", size.w), func(t *testing.T) {
			t.Parallel()
			dom := webtest.New(t).DumpDOMAt(fmt.Sprintf("%s/frame?w=%d&h=%d", srv.URL, size.w, size.h), 1280, 900)
			m := regexp.MustCompile(`data-probe="([^"]*)"`).FindStringSubmatch(dom)
			if m == nil {
				t.Fatal("the probe script did not run (blocked by the CSP?)")
			}
			f := strings.Fields(m[1])
			if len(f) != 6 {
				t.Fatalf("probe = %q", m[1])
			}
			num := func(i int) float64 { v, _ := strconv.ParseFloat(f[i], 64); return v }
			inner, client, scroll, right, bar := num(0), num(1), num(2), num(3), num(4)
			t.Logf("viewport %v, document %v/%v, rightmost edge %v, bar width %v px, bars %s", inner, client, scroll, right, bar, f[5])
			if inner != float64(size.w) {
				t.Errorf("viewport width %v, want %d", inner, size.w)
			}
			if scroll > client || right > client {
				t.Errorf("horizontal overflow: document %v px, rightmost element edge %v px, viewport %v px", scroll, right, client)
			}
			if f[5] != "flex" {
				t.Errorf("bars display %q: the stylesheet did not apply", f[5])
			}
			if bar < 1.5 {
				t.Errorf("a daily bar is %v px wide; too thin to see", bar)
			}
		})
	}

	for _, size := range []struct{ w, h int }{{390, 844}, {1280, 900}} {
		t.Run(fmt.Sprintf("screenshot-%d", size.w), func(t *testing.T) {
			t.Parallel()
			file := filepath.Join(dir, fmt.Sprintf("status-%dx%d.png", size.w, size.h))
			webtest.New(t).Screenshot(srv.URL+"/status", file, size.w, size.h)
			t.Logf("wrote %s", file)
		})
	}
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }
