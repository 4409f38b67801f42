package webtest

import (
	"bytes"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"testing"
)

func TestCheckPNG(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	var img bytes.Buffer
	if err := png.Encode(&img, image.NewRGBA(image.Rect(0, 0, 390, 844))); err != nil {
		t.Fatal(err)
	}
	good := write("good.png", img.Bytes())
	for _, tc := range []struct {
		name    string
		file    string
		w, h    int
		wantErr bool
	}{
		{"right size", good, 390, 844, false},
		{"wrong width", good, 500, 844, true},
		{"wrong height", good, 390, 900, true},
		{"empty", write("empty.png", nil), 390, 844, true},
		{"not a png", write("page.png", []byte("<html></html>")), 390, 844, true},
		{"missing", filepath.Join(dir, "missing.png"), 390, 844, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckPNG(tc.file, tc.w, tc.h)
			if (err != nil) != tc.wantErr {
				t.Errorf("CheckPNG = %v, want error %v", err, tc.wantErr)
			}
		})
	}
}

func TestFindHonoursEnv(t *testing.T) {
	t.Setenv("MODELGATE_CHROMIUM", filepath.Join(t.TempDir(), "no-such-browser"))
	if _, err := Find(); err == nil {
		t.Error("Find accepted a missing MODELGATE_CHROMIUM")
	}
}

// TestChromium runs the short form end to end on a data-free page.
func TestChromium(t *testing.T) {
	dumpDOM, screenshot := Chromium(t)
	dir := t.TempDir()
	page := filepath.Join(dir, "p.html")
	if err := os.WriteFile(page, []byte(`<!DOCTYPE html><html><body><p id="x">hello</p></body></html>`), 0o644); err != nil {
		t.Fatal(err)
	}
	if dom := dumpDOM("file://" + page); !bytes.Contains([]byte(dom), []byte(`<p id="x">hello</p>`)) {
		t.Errorf("DOM = %.300q", dom)
	}
	screenshot("file://"+page, filepath.Join(dir, "p.png"), 390, 844)
}
