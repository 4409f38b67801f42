package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/modelgate/modelgate/web/webtest"
)

// consoleBrowser is headless Chromium driven by chromedp, for the tests
// that use the console's pages as a visitor does. newConsoleBrowser skips
// the test when there is no Chromium; the browser ends with the test.
type consoleBrowser struct {
	t     *testing.T
	ctx   context.Context
	shots string // where screenshots go (MODELGATE_SCREENSHOTS)
}

func newConsoleBrowser(t *testing.T) *consoleBrowser {
	t.Helper()
	chromium, err := webtest.Find()
	if err != nil {
		t.Skipf("skipping browser test: %v (install the Debian package chromium, or set MODELGATE_CHROMIUM)", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.Flag("force-device-scale-factor", "1"))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() {
		cancelTimeout()
		cancel()
		cancelAlloc()
	})
	return &consoleBrowser{t: t, ctx: ctx, shots: webtest.ScreenshotDir(t)}
}

// run does the steps, failing the test with step's name if one fails.
func (b *consoleBrowser) run(step string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v", step, err)
	}
}

// shot saves a full-page screenshot as name in the screenshot directory.
func (b *consoleBrowser) shot(name string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		png, err := chromedp.FullScreenshot(100)(ctx, tg)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(b.shots, name), png, 0o644)
	})
}

// text is the text of the element sel selects, trimmed.
func (b *consoleBrowser) text(sel string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.TextContent(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("read %s: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

// words is text with every run of white space made one space.
func (b *consoleBrowser) words(sel string) string {
	b.t.Helper()
	return strings.Join(strings.Fields(b.text(sel)), " ")
}

// eval is the string the script js evaluates to on the page.
func (b *consoleBrowser) eval(js string) string {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](js))
	if err != nil {
		b.t.Fatalf("%s: %v", js, err)
	}
	return v
}

// signUp signs email up with testPassword on the console's sign-up page,
// after the steps before, and waits for the overview it lands on.
func (b *consoleBrowser) signUp(email string, before ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	b.run("sign up", append(before,
		chromedp.Navigate(gatewayAddr+"/console/signup"),
		chromedp.WaitVisible(chromedp.CSS(`#email`)),
		chromedp.SendKeys(chromedp.CSS(`#email`), email),
		chromedp.SendKeys(chromedp.CSS(`#password`), testPassword),
		chromedp.Click(chromedp.CSS(`button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-figure="balance"]`)),
	)...)
}

// scriptsOff turns the page's own scripts off, to show that the console
// needs none.
func scriptsOff() chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
		return err
	})
}

// asPhone makes the window a phone's: 390 × 844 CSS pixels, mobile.
func asPhone() chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{Width: 390, Height: 844, DeviceScaleFactor: 1, Mobile: true})
		return err
	})
}
