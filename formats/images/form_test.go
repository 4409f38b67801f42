package images

import (
	"bytes"
	"errors"
	"io"
	"mime/multipart"
	"strings"
	"testing"

	"github.com/modelgate/modelgate/formats"
)

// rawForm builds a multipart body (boundary B) from parts given whole:
// their header lines and content.
func rawForm(parts ...[2]string) []byte {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString("--B\r\n" + p[0] + "\r\n\r\n" + p[1] + "\r\n")
	}
	b.WriteString("--B--\r\n")
	return []byte(b.String())
}

// forwardAll reads f's body with ReadForm's options and writes it with
// WriteTo, returning the forwarded bytes (cut where WriteTo stopped), its
// boundary and WriteTo's error.
func forwardAll(t *testing.T, f *Form) (out []byte, boundary string, err error) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	err = f.WriteTo(mw, "up")
	mw.Close() // ended even where WriteTo stopped, to list what it sent
	return b.Bytes(), mw.Boundary(), err
}

// partsOf lists the parts of a forwarded form as name=value (files as
// name@filename), up to where it ends or breaks off.
func partsOf(body []byte, boundary string) []string {
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	var out []string
	for {
		p, err := mr.NextPart()
		if err != nil {
			return out
		}
		v, err := io.ReadAll(p)
		if err != nil {
			return out
		}
		if p.FileName() != "" {
			out = append(out, p.FormName()+"@"+p.FileName())
		} else {
			out = append(out, p.FormName()+"="+string(v))
		}
	}
}

// TestFormFieldRules: every field but image and image[] appears once,
// before or after routing; only image, image[] and mask are files; every
// part has a name. A refused part after routing is not forwarded.
func TestFormFieldRules(t *testing.T) {
	field := func(name, v string) [3]string { return [3]string{name, "", v} }
	file := func(name string) [3]string { return [3]string{name, "a.png", "PNG"} }
	model, prompt := field("model", "m"), field("prompt", "p")
	for _, tc := range []struct {
		name  string
		parts [][3]string
		param string // refused on this field; "-" accepted
		late  bool   // refused while forwarding (after routing)
	}{
		{"n twice before the image", [][3]string{field("n", "1"), field("n", "10"), model, prompt, file("image")}, "n", false},
		{"n twice around the image", [][3]string{field("n", "1"), model, prompt, file("image[]"), field("n", "10")}, "n", true},
		{"n twice, image first", [][3]string{file("image"), field("n", "1"), model, prompt, field("n", "10")}, "n", false},
		{"model twice", [][3]string{model, prompt, file("image"), field("model", "dearer")}, "model", true},
		{"quality twice", [][3]string{field("quality", "low"), model, prompt, file("image"), field("quality", "high")}, "quality", true},
		{"size twice", [][3]string{field("size", "1024x1024"), field("size", "1536x1024"), model, prompt, file("image")}, "size", false},
		{"prompt twice", [][3]string{model, prompt, file("image"), prompt}, "prompt", true},
		{"unknown field twice", [][3]string{model, prompt, field("user", "a"), file("image"), field("user", "b")}, "user", true},
		{"two masks", [][3]string{model, prompt, file("image"), file("mask"), file("mask")}, "mask", true},
		{"a file that is no input", [][3]string{model, prompt, file("image"), file("extra")}, "extra", true},
		{"a file that is no input, before the model", [][3]string{file("prompt"), model}, "prompt", false},
		{"images repeat", [][3]string{model, prompt, file("image[]"), file("image[]"), file("image"), file("mask")}, "-", false},
		{"the SDK's order", [][3]string{field("background", "transparent"), file("image"), field("input_fidelity", "high"), file("mask"),
			model, field("n", "2"), field("output_format", "png"), prompt, field("quality", "low"), field("size", "1024x1024")}, "-", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, boundary := form(t, tc.parts...)
			f, ferr := ReadForm(bytes.NewReader(body), boundary, FormOptions{Limit: 1 << 20})
			if !tc.late {
				if tc.param == "-" {
					if ferr != nil {
						t.Fatal(ferr)
					}
					defer f.Close()
					if _, _, err := forwardAll(t, f); err != nil {
						t.Fatal(err)
					}
					return
				}
				if ferr == nil || ferr.Kind != formats.KindInvalidRequest || ferr.Param != tc.param || !strings.Contains(ferr.Message, "'"+tc.param+"'") {
					t.Fatalf("got %+v, want a 400 naming %q", ferr, tc.param)
				}
				return
			}
			if ferr != nil {
				t.Fatalf("refused before routing: %+v", ferr)
			}
			defer f.Close()
			out, b, err := forwardAll(t, f)
			var ce *ClientError
			if !errors.As(err, &ce) || ce.Err.Param != tc.param || ce.Err.Kind != formats.KindInvalidRequest {
				t.Fatalf("forwarding: %v, want a 400 naming %q", err, tc.param)
			}
			// the refused part (the last) never reached the upstream
			var want []string
			for _, p := range tc.parts[:len(tc.parts)-1] {
				switch {
				case p[1] != "":
					want = append(want, p[0]+"@"+p[1])
				case p[0] == "model":
					want = append(want, "model=up")
				default:
					want = append(want, p[0]+"="+p[2])
				}
			}
			if got := partsOf(out, b); strings.Join(got, " ") != strings.Join(want, " ") {
				t.Fatalf("forwarded %q, want %q", got, want)
			}
		})
	}
	// a part without a name, before and after routing
	for _, body := range [][]byte{
		rawForm([2]string{"Content-Disposition: form-data", "x"}, [2]string{`Content-Disposition: form-data; name="model"`, "m"}),
		rawForm([2]string{`Content-Disposition: form-data; name="model"`, "m"}, [2]string{`Content-Disposition: form-data; name="prompt"`, "p"},
			[2]string{`Content-Disposition: form-data; name="image"; filename="a.png"`, "PNG"}, [2]string{`Content-Disposition: attachment; name="n"`, "10"}),
	} {
		f, ferr := ReadForm(bytes.NewReader(body), "B", FormOptions{Limit: 1 << 20})
		if ferr == nil {
			_, _, err := forwardAll(t, f)
			f.Close()
			var ce *ClientError
			if !errors.As(err, &ce) {
				t.Fatalf("a nameless part was forwarded: %v", err)
			}
			ferr = ce.Err
		}
		if ferr.Kind != formats.KindInvalidRequest || !strings.Contains(ferr.Message, "no name") {
			t.Fatalf("a nameless part: %+v", ferr)
		}
	}
}

// TestFormHeadersRewritten: each part goes upstream with the header the
// gateway writes from what it read (name, file name, a file's
// Content-Type), so the upstream cannot read a part otherwise: a file part
// with an empty file name is a text field on both sides, other headers are
// dropped, a path in a file name is cut, n goes as the number read.
func TestFormHeadersRewritten(t *testing.T) {
	body := rawForm(
		[2]string{"Content-Disposition: form-data; name=\"image[]\"; filename=\"dir/fox.png\"\r\nContent-Type: image/png\r\nX-Extra: 1", "PNG"},
		[2]string{`Content-Disposition: form-data; name="model"`, "m"},
		[2]string{"Content-Disposition: form-data; name=\"n\"\r\nContent-Type: text/plain; charset=utf-16\r\nContent-Transfer-Encoding: base64", "+2"},
		[2]string{`Content-Disposition: form-data; name="prompt"`, "p"},
		[2]string{`Content-Disposition: form-data; name="image"; filename=""`, "not a file"},
		[2]string{`Content-Disposition: form-data; name="image"; filename="b.png"`, "PNG2"},
	)
	for _, modelFirst := range []bool{false, true} {
		b := body
		if modelFirst { // the last file is then forwarded live
			b = rawForm([2]string{`Content-Disposition: form-data; name="model"`, "m"},
				[2]string{`Content-Disposition: form-data; name="image"; filename="b.png"`, "PNG2"},
				[2]string{"Content-Disposition: form-data; name=\"n\"\r\nX-Extra: 1", "+2"},
				[2]string{`Content-Disposition: form-data; name="image"; filename=""`, "not a file"})
		}
		f, ferr := ReadForm(bytes.NewReader(b), "B", FormOptions{Limit: 1 << 20})
		if ferr != nil {
			t.Fatal(ferr)
		}
		out, boundary, err := forwardAll(t, f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		s := string(out)
		for _, bad := range []string{"X-Extra", "Content-Transfer-Encoding", "charset", "dir/", `filename=""`, "+2"} {
			if strings.Contains(s, bad) {
				t.Errorf("model first %v: forwarded %q:\n%s", modelFirst, bad, s)
			}
		}
		want := "image[]@fox.png model=up n=2 prompt=p image=not a file image@b.png"
		if modelFirst {
			want = "model=up image@b.png n=2 image=not a file"
		}
		if got := strings.Join(partsOf(out, boundary), " "); got != want {
			t.Errorf("model first %v: forwarded %s, want %s", modelFirst, got, want)
		}
		if f.Images() != 2-map[bool]int{false: 0, true: 1}[modelFirst] || f.Files() != f.Images() {
			t.Errorf("model first %v: counted %d images, %d files", modelFirst, f.Images(), f.Files())
		}
		if !strings.Contains(s, "Content-Disposition: form-data; name=\"image\"; filename=\"b.png\"\r\nContent-Type: application/octet-stream\r\n") {
			t.Errorf("model first %v: a file without a Content-Type:\n%s", modelFirst, s)
		}
	}
}

// TestFormLate: Late sees each part after routing once it is applied, in
// order; its refusal stops the forwarding before the part.
func TestFormLate(t *testing.T) {
	body, boundary := form(t, [3]string{"model", "", "m"}, [3]string{"image", "a.png", "PNG"}, [3]string{"prompt", "", "a fox"},
		[3]string{"n", "", "3"}, [3]string{"image[]", "b.png", "PNG"})
	f, ferr := ReadForm(bytes.NewReader(body), boundary, FormOptions{Limit: 1 << 20})
	if ferr != nil {
		t.Fatal(ferr)
	}
	defer f.Close()
	var seen []string
	f.Late = func(name string) *formats.Error {
		seen = append(seen, name)
		if name == "n" && f.N == 3 && f.Prompt == "a fox" && f.Files() == 1 {
			return formats.InvalidRequest("n", "too many")
		}
		return nil
	}
	out, b, err := forwardAll(t, f)
	var ce *ClientError
	if !errors.As(err, &ce) || ce.Err.Param != "n" {
		t.Fatalf("got %v", err)
	}
	if strings.Join(seen, " ") != "image prompt n" {
		t.Fatalf("Late saw %q", seen)
	}
	if got := partsOf(out, b); strings.Join(got, " ") != "model=up image@a.png prompt=a fox" {
		t.Fatalf("forwarded %q", got)
	}
}

// TestFormSpool: the files a form spools before its model count against a
// shared bound until the form is closed; a form that does not fit is a 503
// with Retry-After; BeforeSpool runs once, before the first spooled byte,
// and never for a form whose model comes first.
func TestFormSpool(t *testing.T) {
	sp := NewSpool(1000)
	calls := 0
	var base int64 // what other forms have spooled
	opts := FormOptions{Limit: 1 << 20, Spool: sp, BeforeSpool: func() *formats.Error {
		calls++
		if sp.Used() != base {
			t.Errorf("BeforeSpool after %d bytes were spooled", sp.Used()-base)
		}
		return nil
	}}
	imageFirst := func(size int) []byte {
		b, _ := form(t, [3]string{"image", "a.png", strings.Repeat("x", size)}, [3]string{"mask", "m.png", "MASK"},
			[3]string{"model", "", "m"}, [3]string{"prompt", "", "p"})
		return b
	}
	read := func(body []byte, o FormOptions) (*Form, *formats.Error) {
		base = sp.Used()
		boundary := string(body[2:bytes.Index(body, []byte("\r\n"))])
		return ReadForm(bytes.NewReader(body), boundary, o)
	}
	a, ferr := read(imageFirst(600), opts)
	if ferr != nil || sp.Used() != 604 || calls != 1 {
		t.Fatalf("first form: %+v, used %d, BeforeSpool called %d times", ferr, sp.Used(), calls)
	}
	b, ferr := read(imageFirst(600), opts)
	if ferr == nil || ferr.Kind != formats.KindOverloaded || ferr.Status() != 503 || ferr.RetryAfter <= 0 ||
		!strings.Contains(ferr.Message, "1000 B") || !strings.Contains(ferr.Message, "send the model field first") {
		t.Fatalf("second form: %+v %+v", b, ferr)
	}
	if sp.Used() != 604 {
		t.Fatalf("a refused form kept %d bytes of the spool", sp.Used()-604)
	}
	a.Close()
	a.Close()
	if sp.Used() != 0 {
		t.Fatalf("%d bytes still counted after Close", sp.Used())
	}
	c, ferr := read(imageFirst(600), opts)
	if ferr != nil {
		t.Fatalf("after the first form closed: %+v", ferr)
	}
	c.Close()

	// the model first: nothing spooled, BeforeSpool not called
	calls = 0
	body, _ := form(t, [3]string{"model", "", "m"}, [3]string{"prompt", "", "p"}, [3]string{"image", "a.png", strings.Repeat("x", 5000)})
	d, ferr := read(body, opts)
	if ferr != nil {
		t.Fatal(ferr)
	}
	if _, _, err := forwardAll(t, d); err != nil || calls != 0 || sp.Used() != 0 {
		t.Fatalf("model first: %v, BeforeSpool called %d times, %d spooled", err, calls, sp.Used())
	}
	d.Close()

	// BeforeSpool refuses: nothing is spooled
	refused := &formats.Error{Kind: formats.KindInsufficientQuota, Message: "poor"}
	e, ferr := read(imageFirst(10), FormOptions{Limit: 1 << 20, Spool: sp, BeforeSpool: func() *formats.Error { return refused }})
	if ferr != refused || e != nil || sp.Used() != 0 {
		t.Fatalf("refused before the spool: %+v %+v, %d spooled", e, ferr, sp.Used())
	}
}
