package images

import (
	"cmp"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"os"
	"strconv"
	"sync"

	"github.com/modelgate/modelgate/formats"
)

// Limits of an edit form.
const (
	maxTextField = 256 << 10 // one text field (a 32000-character prompt is at most 128 KiB)
	maxTextTotal = 1 << 20   // every text field together
	maxParts     = 64
	maxImages    = 16 // image or image[] parts
)

// Form is a POST /v1/images/edits request: a multipart form (wire/openai.md
// §4.2) that is forwarded to the upstream as it arrives, never held whole.
//
// The gateway must know the model before it can pick an upstream, and
// clients send the parts in any order (the OpenAI SDKs sort them by name,
// so the image comes before the model). ReadForm reads parts until the
// model is known and the next part is a file: text fields are kept in
// memory, file parts read before that go to an unlinked temporary file,
// never to memory. WriteTo sends the parts read so far, then the client's
// remaining parts straight through as they arrive.
type Form struct {
	Request
	parts   []formPart
	spool   *os.File
	spooled int64
	text    int // bytes of text fields read
	nparts  int // parts read
	images  int // image parts read
	mr      *multipart.Reader
	pending *multipart.Part // the first part not read yet, when more
	more    bool            // the client's form goes on after the parts read
	live    bool            // WriteTo forwarded parts straight from the client
}

// formPart is a part read before routing.
type formPart struct {
	header    textproto.MIMEHeader
	name      string
	text      []byte // a text field
	file      bool
	off, size int64 // a file part's bytes in the spool
}

// ClientError is a failure of the client's side of a form being forwarded
// (a malformed form, a body over the limit, a client that went away): the
// upstream is not to blame.
type ClientError struct{ Err *formats.Error }

func (e *ClientError) Error() string { return "images: the client's form: " + e.Err.Message }

// clientError turns an error reading the client's form into its answer.
func clientError(err error) *ClientError {
	var tl *http.MaxBytesError
	if errors.As(err, &tl) {
		return &ClientError{&formats.Error{Kind: formats.KindRequestTooLarge,
			Message: "The request body is larger than the limit of " + strconv.FormatInt(tl.Limit, 10) + " bytes."}}
	}
	return &ClientError{formats.InvalidRequest("", "The multipart form could not be read: "+err.Error()+".")}
}

// ReadForm reads the head of an edit form from body (at most limit bytes in
// all) up to the point where it can be routed. Close the form when done.
func ReadForm(body io.Reader, boundary string, limit int64) (*Form, *formats.Error) {
	f := &Form{Request: Request{N: 1},
		mr: multipart.NewReader(http.MaxBytesReader(nil, io.NopCloser(body), limit), boundary)}
	for {
		p, err := f.mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			f.Close()
			return nil, clientError(err).Err
		}
		if p.FileName() != "" && f.Model != "" {
			f.pending, f.more = p, true
			break
		}
		if ferr := f.keep(p); ferr != nil {
			f.Close()
			return nil, ferr
		}
	}
	ferr := f.Request.complete()
	if f.more && ferr != nil && ferr.Param == "prompt" {
		ferr = nil // the prompt may still come; the upstream checks it
	}
	if ferr == nil && !f.more && f.images == 0 {
		ferr = formats.InvalidRequest("image", "Missing required parameter: 'image' (a file part named image or image[]).")
	}
	if ferr != nil {
		f.Close()
		return nil, ferr
	}
	return f, nil
}

// countPart checks the part limits.
func (f *Form) countPart(p *multipart.Part) *formats.Error {
	if f.nparts++; f.nparts > maxParts {
		return formats.InvalidRequest("", "The form has more than "+strconv.Itoa(maxParts)+" parts.")
	}
	if name := p.FormName(); p.FileName() != "" && (name == "image" || name == "image[]") {
		f.images++
		if f.images > maxImages {
			return formats.InvalidRequest("image", "Too many images: at most "+strconv.Itoa(maxImages)+".")
		}
	}
	return nil
}

// keep reads a part before routing: text into memory, a file into the spool.
func (f *Form) keep(p *multipart.Part) *formats.Error {
	if ferr := f.countPart(p); ferr != nil {
		return ferr
	}
	fp := formPart{header: p.Header, name: p.FormName()}
	if p.FileName() == "" {
		text, ferr := f.readText(p)
		if ferr != nil {
			return ferr
		}
		fp.text = text
	} else {
		fp.file = true
		if f.spool == nil {
			spool, err := os.CreateTemp("", "modelgate-upload-*")
			if err != nil {
				return formats.NewError(formats.KindInternal, "The gateway could not take the upload; try again.")
			}
			// unlinked at once: the space is freed when it is closed,
			// whatever happens to the process
			_ = os.Remove(spool.Name())
			f.spool = spool
		}
		fp.off = f.spooled
		n, rerr, werr := copyPart(f.spool, p)
		f.spooled += n
		fp.size = n
		if werr != nil {
			return formats.NewError(formats.KindInternal, "The gateway could not take the upload; try again.")
		}
		if rerr != nil {
			return clientError(rerr).Err
		}
	}
	f.parts = append(f.parts, fp)
	return nil
}

// readText reads a text field and applies it to the request.
func (f *Form) readText(p *multipart.Part) ([]byte, *formats.Error) {
	room := min(maxTextField, maxTextTotal-f.text)
	text, err := io.ReadAll(io.LimitReader(p, int64(room)+1))
	if err != nil {
		return nil, clientError(err).Err
	}
	if len(text) > room {
		return nil, formats.InvalidRequest(p.FormName(), "The form field '"+p.FormName()+"' is too long.")
	}
	f.text += len(text)
	if ferr := f.setText(p.FormName(), string(text)); ferr != nil {
		return nil, ferr
	}
	return text, nil
}

// Images is the number of image parts read so far.
func (f *Form) Images() int { return f.images }

// Complete reports whether the whole form has been read (so n, if given,
// is known).
func (f *Form) Complete() bool { return !f.more }

// Replayable reports whether WriteTo can send the form again (to another
// upstream): true until parts were forwarded straight from the client.
func (f *Form) Replayable() bool { return !f.live }

// WriteTo writes the form to w with the model set to upstreamModel: the
// parts read so far, then the client's remaining parts as they arrive. It
// does not close w. A failure on the client's side is a *ClientError; any
// other error is w's.
func (f *Form) WriteTo(w *multipart.Writer, upstreamModel string) error {
	if f.live {
		return errors.New("images: the form was already forwarded from the client")
	}
	for i := range f.parts {
		p := &f.parts[i]
		out, err := w.CreatePart(p.header)
		if err != nil {
			return err
		}
		switch {
		case p.file:
			var rerr error
			_, rerr, err = copyPart(out, io.NewSectionReader(f.spool, p.off, p.size))
			err = cmp.Or(err, rerr)
		case p.name == "model":
			_, err = io.WriteString(out, upstreamModel)
		default:
			_, err = out.Write(p.text)
		}
		if err != nil {
			return err
		}
	}
	if !f.more {
		return nil
	}
	f.live = true
	for p := f.pending; p != nil; {
		if ferr := f.countPart(p); ferr != nil {
			return &ClientError{ferr}
		}
		if err := f.forward(w, p, upstreamModel); err != nil {
			return err
		}
		next, err := f.mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return clientError(err)
		}
		p = next
	}
	f.pending = nil
	return nil
}

// forward writes one part straight from the client.
func (f *Form) forward(w *multipart.Writer, p *multipart.Part, upstreamModel string) error {
	isText := p.FileName() == ""
	var text []byte
	if isText {
		t, ferr := f.readText(p)
		if ferr != nil {
			return &ClientError{ferr}
		}
		text = t
		if p.FormName() == "model" {
			text = []byte(upstreamModel) // a second model field: still ours
		}
	}
	out, err := w.CreatePart(p.Header)
	if err != nil {
		return err
	}
	if isText {
		_, err = out.Write(text)
		return err
	}
	_, rerr, werr := copyPart(out, p)
	if rerr != nil {
		return clientError(rerr)
	}
	return werr
}

// copyPart copies src to dst through a pooled buffer, telling the failures
// of either side apart.
func copyPart(dst io.Writer, src io.Reader) (n int64, readErr, writeErr error) {
	buf := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(buf)
	for {
		k, rerr := src.Read(*buf)
		if k > 0 {
			if _, err := dst.Write((*buf)[:k]); err != nil {
				return n, nil, err
			}
			n += int64(k)
		}
		if rerr == io.EOF {
			return n, nil, nil
		}
		if rerr != nil {
			return n, rerr, nil
		}
	}
}

// Close frees the spool.
func (f *Form) Close() {
	if f.spool != nil {
		f.spool.Close()
		f.spool = nil
	}
}

// copyBuffers are the buffers of the copies.
var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}
