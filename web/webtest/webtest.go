// Package webtest drives a headless Chromium from Go tests, to check pages
// as a real browser lays them out: dump the DOM after load, or take a
// screenshot at a given window size. It imports testing and is meant to be
// imported from _test.go files only (of package web, or of the root
// package's integration tests).
//
// Chromium is found as MODELGATE_CHROMIUM, or "chromium" or
// "chromium-browser" on PATH; when there is none, the calling test is
// skipped with a message saying so.
package webtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Timeout bounds one Chromium run.
const Timeout = 30 * time.Second

// attempts is how many times a run that timed out is started afresh.
// Headless Chromium now and then hangs at start on a loaded machine
// (its renderer never reports the load); a page that is really slow or
// broken times out on every attempt and still fails the test.
const attempts = 2

// Default window size of DumpDOM.
const (
	DefaultWidth  = 1280
	DefaultHeight = 900
)

// Browser runs a headless Chromium, one fresh process and profile per call.
// Its methods fail the test on error, and are safe for parallel subtests.
type Browser struct {
	t    testing.TB
	path string
}

// New finds Chromium, or skips the test when it is not installed.
func New(t testing.TB) *Browser {
	t.Helper()
	path, err := Find()
	if err != nil {
		t.Skipf("skipping browser test: %v (install the Debian package chromium, or set MODELGATE_CHROMIUM)", err)
	}
	return &Browser{t: t, path: path}
}

// Find returns the path of the Chromium binary: $MODELGATE_CHROMIUM if
// set, else chromium or chromium-browser on PATH.
func Find() (string, error) {
	if p := os.Getenv("MODELGATE_CHROMIUM"); p != "" {
		return exec.LookPath(p)
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("chromium not found on PATH")
}

// Chromium is the short form of [New] for tests that only need the two
// operations: dumpDOM returns the serialized DOM of url after load at the
// default window size, screenshot writes a PNG of url at w×h pixels to file.
func Chromium(t testing.TB) (dumpDOM func(url string) string, screenshot func(url, file string, w, h int)) {
	t.Helper()
	b := New(t)
	return b.DumpDOM, b.Screenshot
}

// Path is the Chromium binary in use.
func (b *Browser) Path() string { return b.path }

// DumpDOM loads url in a DefaultWidth×DefaultHeight window and returns the
// DOM as HTML once the page has loaded (after any scripts ran).
func (b *Browser) DumpDOM(url string) string {
	b.t.Helper()
	return b.DumpDOMAt(url, DefaultWidth, DefaultHeight)
}

// DumpDOMAt is DumpDOM with a w×h window, for layout checks that a script
// on the page writes into the DOM.
func (b *Browser) DumpDOMAt(url string, w, h int) string {
	b.t.Helper()
	out, err := b.run(w, h, "--dump-dom", url)
	if err != nil {
		b.t.Fatalf("chromium --dump-dom %s: %v", url, err)
	}
	if !strings.Contains(out, "<html") {
		b.t.Fatalf("chromium --dump-dom %s: no document in output: %.500q", url, out)
	}
	return out
}

// Screenshot loads url in a w×h window and writes what it shows to file as
// a PNG of exactly w×h pixels (device scale factor 1), failing the test if
// the file is missing, empty, not a PNG or of another size.
func (b *Browser) Screenshot(url, file string, w, h int) {
	b.t.Helper()
	abs, err := filepath.Abs(file)
	if err != nil {
		b.t.Fatal(err)
	}
	_ = os.Remove(abs)
	if _, err := b.run(w, h, "--screenshot="+abs, url); err != nil {
		b.t.Fatalf("chromium --screenshot %s: %v", url, err)
	}
	if err := CheckPNG(abs, w, h); err != nil {
		b.t.Fatalf("screenshot of %s: %v", url, err)
	}
}

// CheckPNG checks that file is a non-empty PNG image of w×h pixels.
func CheckPNG(file string, w, h int) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if len(data) == 0 {
		return fmt.Errorf("%s is empty", file)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%s: %v", file, err)
	}
	if cfg.Width != w || cfg.Height != h {
		return fmt.Errorf("%s is %d×%d px, want %d×%d", file, cfg.Width, cfg.Height, w, h)
	}
	return nil
}

// ScreenshotDir returns the directory for screenshots: $MODELGATE_SCREENSHOTS
// (created if missing), else a temporary directory removed after the test.
// It logs the path either way.
func ScreenshotDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("MODELGATE_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
		t.Logf("screenshots in %s (removed after the test; set MODELGATE_SCREENSHOTS to keep them)", dir)
		return dir
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", dir)
	return dir
}

// run starts a headless Chromium with a throwaway profile and returns its
// standard output, starting it once more if the first run timed out.
func (b *Browser) run(w, h int, args ...string) (string, error) {
	var err error
	for i := 0; i < attempts; i++ {
		var out string
		out, err = b.runOnce(w, h, args...)
		if !errors.Is(err, errTimedOut) {
			return out, err
		}
		b.t.Logf("chromium %v: %v (attempt %d of %d)", args, err, i+1, attempts)
	}
	return "", err
}

// errTimedOut marks a run that Timeout stopped.
var errTimedOut = errors.New("timed out")

// runOnce starts one headless Chromium with a throwaway profile and returns
// its standard output.
func (b *Browser) runOnce(w, h int, args ...string) (string, error) {
	profile, err := os.MkdirTemp("", "modelgate-chromium-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(profile)
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, b.path, append([]string{
		"--headless",
		"--no-sandbox",
		"--disable-gpu",
		"--disable-dev-shm-usage",
		"--disable-background-networking",
		"--disable-component-update",
		"--disable-extensions",
		"--disable-sync",
		"--no-first-run",
		"--no-default-browser-check",
		"--mute-audio",
		"--hide-scrollbars",
		"--force-device-scale-factor=1",
		"--run-all-compositor-stages-before-draw",
		"--user-data-dir=" + profile,
		"--window-size=" + strconv.Itoa(w) + "," + strconv.Itoa(h),
	}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	setProcessGroup(cmd)
	err = cmd.Run()
	killProcessGroup(cmd) // renderer or GPU helpers left behind, if any
	if ctx.Err() != nil {
		return "", fmt.Errorf("%w after %v; stderr: %s", errTimedOut, Timeout, tail(noDBus(stderr.String())))
	}
	if err != nil {
		return "", fmt.Errorf("%v; stderr: %s", err, tail(noDBus(stderr.String())))
	}
	return stdout.String(), nil
}

// noDBus drops Chromium's complaints that there is no D-Bus, which say
// nothing about the page and crowd out the lines that do.
func noDBus(s string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(s, "\n") {
		if !strings.Contains(line, "dbus") {
			b.WriteString(line)
		}
	}
	return b.String()
}

// tail keeps the end of Chromium's chatty stderr for error messages.
func tail(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 2000 {
		s = "…" + s[len(s)-2000:]
	}
	return s
}
