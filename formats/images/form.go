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
	"strings"
	"sync"
	"sync/atomic"

	"github.com/dustin/go-humanize"

	"github.com/modelgate/modelgate/formats"
)

// Limits of an edit form.
const (
	maxTextField = 256 << 10 // one text field (a 32000-character prompt is at most 128 KiB)
	maxTextTotal = 1 << 20   // every text field together
	maxParts     = 64
	maxImages    = 16 // image or image[] parts

	// MaxInputFiles is the most file parts an edit form may have: 16 input
	// images and a mask.
	MaxInputFiles = maxImages + 1
	// MaxPromptBytes is the most UTF-8 bytes of a prompt of MaxPromptRunes.
	MaxPromptBytes = 4 * MaxPromptRunes
)

// Form is a POST /v1/images/edits request: a multipart form
// that is forwarded to the upstream as it arrives, never held whole.
//
// The gateway must know the model before it can pick an upstream, and
// clients send the parts in any order (the Go SDK sorts them by name, so
// the image comes before the model; curl sends them as typed). ReadForm
// reads parts until the model is known and the next part is a file: text
// fields are kept in memory, file parts read before that go to an unlinked
// temporary file, never to memory. WriteTo sends the parts read so far,
// then the client's remaining parts straight through as they arrive.
//
// What the gateway holds for is what the upstream gets: every field
// but image and image[] may appear once; only image, image[] and mask may
// be files; each part is forwarded with a header the gateway writes from
// the name (and file name) it read, so that the upstream cannot read a part
// otherwise; and each part that arrives after the form was routed (and the
// request held for) passes Late before it is forwarded.
type Form struct {
	Request

	// Late, if set, is called by WriteTo for each part that arrives after
	// ReadForm returned, once the part is applied to Request and counted
	// and before anything of it is forwarded, with the part's name: an
	// error ends the forwarding there (WriteTo returns it as a
	// *ClientError), the part unsent.
	Late func(name string) *formats.Error

	opts    FormOptions
	parts   []formPart
	spool   *os.File
	spooled int64
	taken   int64 // bytes of opts.Spool taken by this form
	text    int   // bytes of text fields read
	nparts  int   // parts read
	images  int   // image parts read
	files   int   // file parts read
	seen    map[string]bool
	mr      *multipart.Reader
	pending *multipart.Part // the first part not read yet, when more
	more    bool            // the client's form goes on after the parts read
	live    bool            // WriteTo forwarded parts straight from the client
}

// FormOptions bound what ReadForm accepts.
type FormOptions struct {
	// Limit is the most bytes the whole body may have.
	Limit int64
	// Spool, if set, bounds the bytes of file parts spooled at once by
	// every form that shares it.
	Spool *Spool
	// BeforeSpool, if set, is called once, before the first byte of a file
	// part that comes before the model is spooled: an error refuses the
	// form.
	BeforeSpool func() *formats.Error
}

// Spool bounds the bytes that edit forms keep in temporary files at once
// (the file parts that come before the model). One Spool is shared by
// every form of a gateway instance; it is safe for concurrent use.
type Spool struct {
	limit, used atomic.Int64
}

// NewSpool returns a spool bound of limit bytes.
func NewSpool(limit int64) *Spool {
	s := new(Spool)
	s.limit.Store(limit)
	return s
}

// SetLimit changes the bound; bytes already spooled stay.
func (s *Spool) SetLimit(limit int64) { s.limit.Store(limit) }

// Limit is the bound, in bytes.
func (s *Spool) Limit() int64 { return s.limit.Load() }

// Used is the number of bytes spooled now.
func (s *Spool) Used() int64 { return s.used.Load() }

// take reserves n bytes, if they fit.
func (s *Spool) take(n int64) bool {
	for {
		u := s.used.Load()
		if u+n > s.limit.Load() {
			return false
		}
		if s.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

// errSpoolFull is a spool write past the bound.
var errSpoolFull = errors.New("images: the upload spool is full")

// spoolFull is the answer to a form whose files do not fit in the spool.
func spoolFull(limit int64) *formats.Error {
	return &formats.Error{Kind: formats.KindOverloaded, RetryAfter: 1,
		Message: "The gateway is holding as many image uploads as it can (" + humanize.IBytes(uint64(limit)) + //nolint:gosec // the spool's limit is a positive size
			") for forms that send their image files before the model field. Try again shortly, or send the model field first: " +
			"the files of such a form are forwarded as they arrive and take no room here."}
}

// spoolWriter writes to the form's spool within the shared bound.
type spoolWriter struct{ f *Form }

func (w spoolWriter) Write(b []byte) (int, error) {
	if s := w.f.opts.Spool; s != nil {
		if !s.take(int64(len(b))) {
			return 0, errSpoolFull
		}
		w.f.taken += int64(len(b))
	}
	return w.f.spool.Write(b)
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

// ReadForm reads the head of an edit form from body up to the point where
// it can be routed. Close the form when done.
func ReadForm(body io.Reader, boundary string, opts FormOptions) (*Form, *formats.Error) {
	f := &Form{Request: Request{N: 1}, opts: opts, seen: make(map[string]bool, 8),
		mr: multipart.NewReader(http.MaxBytesReader(nil, io.NopCloser(body), opts.Limit), boundary)}
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

// countPart checks the part limits and the part's name: named, once unless
// it is an input image, a file only if it is an input image or the mask.
func (f *Form) countPart(p *multipart.Part) *formats.Error {
	if f.nparts++; f.nparts > maxParts {
		return formats.InvalidRequest("", "The form has more than "+strconv.Itoa(maxParts)+" parts.")
	}
	name, file := p.FormName(), p.FileName() != ""
	if name == "" {
		return formats.InvalidRequest("", "A part of the form has no name: each part needs a Content-Disposition of form-data with a name.")
	}
	image := name == "image" || name == "image[]"
	if !image {
		if f.seen[name] {
			return formats.InvalidRequest(name, "The form field '"+name+"' appears more than once; send each field once "+
				"(only image and image[] may repeat).")
		}
		f.seen[name] = true
	}
	if file {
		if !image && name != "mask" {
			return formats.InvalidRequest(name, "The form field '"+name+"' is a file, but only image, image[] and mask take files.")
		}
		f.files++
	}
	if image && file {
		f.images++
		if f.images > maxImages {
			return formats.InvalidRequest("image", "Too many images: at most "+strconv.Itoa(maxImages)+".")
		}
	}
	return nil
}

// quoteEscaper escapes a Content-Disposition parameter as mime/multipart's
// writer does.
var quoteEscaper = strings.NewReplacer("\\", "\\\\", `"`, "\\\"")

// partHeader is the header a part is forwarded with: its name (and file
// name) as the gateway read them and, for a file, its Content-Type; nothing
// else, so that the upstream reads the part as the gateway did.
func partHeader(p *multipart.Part) textproto.MIMEHeader {
	h := make(textproto.MIMEHeader, 2)
	cd := `form-data; name="` + quoteEscaper.Replace(p.FormName()) + `"`
	if fn := p.FileName(); fn != "" {
		cd += `; filename="` + quoteEscaper.Replace(fn) + `"`
		h.Set("Content-Type", cmp.Or(p.Header.Get("Content-Type"), "application/octet-stream"))
	}
	h.Set("Content-Disposition", cd)
	return h
}

// wireText is the value a text field is forwarded with: the model the
// route names, n as the gateway read it, any other field as it came.
func (f *Form) wireText(name string, text []byte, upstreamModel string) []byte {
	switch name {
	case "model":
		return []byte(upstreamModel)
	case "n":
		return strconv.AppendInt(nil, int64(f.N), 10)
	}
	return text
}

// keep reads a part before routing: text into memory, a file into the spool.
func (f *Form) keep(p *multipart.Part) *formats.Error {
	if ferr := f.countPart(p); ferr != nil {
		return ferr
	}
	fp := formPart{header: partHeader(p), name: p.FormName()}
	if p.FileName() == "" {
		text, ferr := f.readText(p)
		if ferr != nil {
			return ferr
		}
		fp.text = text
	} else {
		fp.file = true
		if f.spool == nil {
			if f.opts.BeforeSpool != nil {
				if ferr := f.opts.BeforeSpool(); ferr != nil {
					return ferr
				}
			}
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
		n, rerr, werr := copyPart(spoolWriter{f}, p)
		f.spooled += n
		fp.size = n
		if errors.Is(werr, errSpoolFull) {
			return spoolFull(f.opts.Spool.Limit())
		}
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

// Files is the number of file parts (input images and mask) read so far.
func (f *Form) Files() int { return f.files }

// Given reports whether the form had a field of that name so far.
func (f *Form) Given(name string) bool { return f.seen[name] }

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
		default:
			_, err = out.Write(f.wireText(p.name, p.text, upstreamModel))
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

// forward writes one part straight from the client, once it is counted,
// applied and passed by Late.
func (f *Form) forward(w *multipart.Writer, p *multipart.Part, upstreamModel string) error {
	if ferr := f.countPart(p); ferr != nil {
		return &ClientError{ferr}
	}
	isText := p.FileName() == ""
	var text []byte
	if isText {
		t, ferr := f.readText(p)
		if ferr != nil {
			return &ClientError{ferr}
		}
		text = f.wireText(p.FormName(), t, upstreamModel)
	}
	if f.Late != nil {
		if ferr := f.Late(p.FormName()); ferr != nil {
			return &ClientError{ferr}
		}
	}
	out, err := w.CreatePart(partHeader(p))
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
	if f.taken > 0 {
		f.opts.Spool.used.Add(-f.taken)
		f.taken = 0
	}
}

// copyBuffers are the buffers of the copies.
var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}
