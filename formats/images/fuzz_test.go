package images

import (
	"bytes"
	"io"
	"mime/multipart"
	"testing"
)

// FuzzParseGeneration: any body is parsed or refused with a field named,
// never a panic; what is accepted has a model, a prompt and n in range.
func FuzzParseGeneration(f *testing.F) {
	f.Add([]byte(`{"model":"m","prompt":"p","n":2,"size":"1024x1024"}`))
	f.Add([]byte(`{"model":"m","prompt":"p","stream":true}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		q, ferr := ParseGeneration(body)
		if ferr != nil {
			return
		}
		if q.Model == "" || q.Prompt == "" || q.N < 1 || q.N > MaxN {
			t.Fatalf("accepted %+v", q)
		}
		if _, err := RewriteGeneration(nil, body, "up"); err != nil {
			t.Fatalf("an accepted body does not rewrite: %v", err)
		}
	})
}

// FuzzReadForm: any form is read and forwarded or refused, never a panic;
// what is forwarded is a well-formed form with each field but the images
// once, files only for the images and the mask, and the spool is
// given back when the form is closed.
func FuzzReadForm(f *testing.F) {
	f.Add([]byte("--B\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nm\r\n--B\r\nContent-Disposition: form-data; name=\"image\"; filename=\"a.png\"\r\n\r\nPNG\r\n--B--\r\n"))
	f.Add([]byte("--B\r\nContent-Disposition: form-data; name=\"image[]\"; filename=\"a.png\"\r\n\r\nPNG\r\n--B\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nm\r\n--B\r\nContent-Disposition: form-data; name=\"prompt\"\r\n\r\np\r\n--B--\r\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		sp := NewSpool(64 << 10)
		defer func() {
			if sp.Used() != 0 {
				t.Fatalf("%d bytes of the spool kept after Close", sp.Used())
			}
		}()
		form, ferr := ReadForm(bytes.NewReader(body), "B", FormOptions{Limit: 1 << 20, Spool: sp})
		if ferr != nil {
			return
		}
		defer form.Close()
		var out bytes.Buffer
		mw := multipart.NewWriter(&out)
		if err := form.WriteTo(mw, "up"); err != nil {
			if _, ok := err.(*ClientError); !ok {
				t.Fatalf("forwarding failed on the writer's side: %v", err)
			}
			return
		}
		mw.Close()
		mr := multipart.NewReader(&out, mw.Boundary())
		seen := map[string]bool{}
		for {
			p, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("the forwarded form is broken: %v", err)
			}
			name := p.FormName()
			if name != "image" && name != "image[]" {
				if seen[name] {
					t.Fatalf("%q forwarded twice", name)
				}
				seen[name] = true
				if p.FileName() != "" && name != "mask" {
					t.Fatalf("a file forwarded as %q", name)
				}
			}
			if p.FormName() == "model" {
				if v, _ := io.ReadAll(p); string(v) != "up" {
					t.Fatalf("model forwarded as %q", v)
				}
			}
		}
	})
}
