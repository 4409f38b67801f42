package modelgate

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/modelgate/modelgate/formats/images"
	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/mockupstream"
)

// The red team (#16): each case is an adversarial client against a real
// gateway, and each asserts that what the gateway billed is at least what
// the upstream did.

// Hole 3: image edit forms

// editPart is one part of an edit form: a text field, or a file when
// filename is set.
type editPart struct{ name, filename, content string }

func editField(name, value string) editPart { return editPart{name: name, content: value} }

// editFile is an image file part of size bytes.
func editFile(name string, size int) editPart {
	return editPart{name: name, filename: "in.png", content: string(imageBytes(size, uint64(size)))}
}

// editFormOf is a multipart form of parts, in order.
func editFormOf(parts ...editPart) (contentType string, body []byte) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for _, p := range parts {
		h := textproto.MIMEHeader{}
		if p.filename == "" {
			h.Set("Content-Disposition", fmt.Sprintf("form-data; name=%q", p.name))
		} else {
			h.Set("Content-Disposition", fmt.Sprintf("form-data; name=%q; filename=%q", p.name, p.filename))
			h.Set("Content-Type", "image/png")
		}
		w, _ := mw.CreatePart(h)
		io.WriteString(w, p.content)
	}
	mw.Close()
	return mw.FormDataContentType(), b.Bytes()
}

// editRecord is the mock's record of an edit: the fields it read and what
// it made.
type editRecord struct {
	Fields map[string]string          `json:"fields"`
	Files  []struct{ Name string }    `json:"files"`
	Served *mockupstream.ImagesServed `json:"served"`
}

// upstreamEdits waits until the mock has finished every request it began,
// then returns the edits it recorded after the first skip records.
func upstreamEdits(t *testing.T, g *gateway, skip int) []editRecord {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for g.mock.KeyStats(upstreamKey).Active != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the mock upstream is still serving")
		}
		time.Sleep(5 * time.Millisecond)
	}
	var out []editRecord
	for _, r := range g.mock.Requests()[skip:] {
		if r.Path != "/v1/images/edits" {
			continue
		}
		var e editRecord
		if err := json.Unmarshal(r.Body, &e); err != nil {
			t.Fatalf("the mock's record %s: %v", r.Body, err)
		}
		out = append(out, e)
	}
	return out
}

// checkBilled runs send, then checks the account's bill against what the
// mock upstream made meanwhile: billed at least its cost at the model's
// prices (its token usage, or per image for dalle-test), every new usage
// row within its hold (never over_hold) and debited whole, nothing left
// held. It returns what was made and the upstream's records of the edits.
func checkBilled(t *testing.T, g *gateway, acct, model string, send func()) (made mockupstream.ImagesServed, edits []editRecord) {
	t.Helper()
	before, _ := g.balance(acct)
	rowsBefore := len(g.rows(acct))
	skip := len(g.mock.Requests())
	send()
	edits = upstreamEdits(t, g, skip)
	for _, e := range edits {
		if e.Served != nil {
			made.Images += e.Served.Images
			made.InputTokens += e.Served.InputTokens
			made.OutputTokens += e.Served.OutputTokens
		}
	}
	upstreamCost := ledger.Money(made.InputTokens)*imagePriceIn + ledger.Money(made.OutputTokens)*imagePriceOut
	if model == "dalle-test" {
		upstreamCost = ledger.Money(made.Images) * dallePerImage
	}
	after, held := g.balance(acct)
	billed := before - after
	rows := g.rows(acct)
	var charged ledger.Money
	for _, r := range rows[:len(rows)-rowsBefore] {
		charged += r.Charged
		if r.OverHold || r.Charged != r.Cost {
			t.Errorf("row %s: charged %s of %s, hold %s, over_hold %v", r.RequestID, r.Charged, r.Cost, r.Hold, r.OverHold)
		}
	}
	if billed < upstreamCost || charged != billed || held != 0 {
		t.Errorf("billed %s (rows %s, still held %s) for upstream work costing %s: %d images, %d input and %d output tokens",
			billed, charged, held, upstreamCost, made.Images, made.InputTokens, made.OutputTokens)
	}
	return made, edits
}

// runningSpool is the bound on spooled uploads of the running gateway.
func runningSpool(t *testing.T) *images.Spool {
	t.Helper()
	var sp *images.Spool
	imageSpools.Range(func(_, v any) bool {
		sp = v.(spoolHandle).Spool
		return false
	})
	if sp == nil {
		t.Fatal("no upload spool")
	}
	return sp
}

// TestRedTeamImageEditForms: an edit form cannot make the upstream do more
// than was held for it. Each field but the input images may come once (a
// second n, model, quality, size, prompt or mask is a 400 naming it, before
// or after the hold); a part that comes after the first image file that
// follows the model (when the request is held) is forwarded only if the
// hold still covers the form: n, more images (at high input fidelity), a
// long prompt beyond what the balance could hold are 400s naming them and
// never reach the upstream, while with the balance to cover them (the hold
// is taken for the dearest the form can still ask) they are served and
// billed. Files other than the images and the mask are refused. Forms in
// the orders real clients send (the Go SDK's, curl's documented one) work.
// Before any file is spooled (a file before the model), the balance must
// cover an edit at the cheapest image model.
func TestRedTeamImageEditForms(t *testing.T) {
	g := startGateway(t, gatewayOptions{extra: imageModels})
	model, prompt := editField("model", "image-test"), editField("prompt", imageTestPrompt)
	low, square := editField("quality", "low"), editField("size", "1024x1024")
	image := editFile("image[]", 2048)
	images16 := make([]editPart, 16)
	for i := range images16 {
		images16[i] = editFile("image[]", 1024+i)
	}
	longPrompt := editField("prompt", strings.Repeat("a ", images.MaxPromptRunes/2)) // 16000 words
	cat := func(groups ...[]editPart) []editPart {
		var out []editPart
		for _, g := range groups {
			out = append(out, g...)
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		balance string
		model   string // default image-test
		parts   []editPart
		status  int
		param   string // the field a 400 names
		images  int    // images made, for a 200
		message string // in the refusal
	}{
		// the reproduction: -F n=1 -F image[]=@fox.png -F n=10 made 10
		// images costing 1.67 and charged 0.33, all that was left
		{name: "n again after the image", balance: "0.33",
			parts: []editPart{editField("n", "1"), model, prompt, image, editField("n", "10")}, status: 400, param: "n"},
		{name: "n twice before the image", balance: "10.00",
			parts: []editPart{editField("n", "1"), editField("n", "10"), model, prompt, image}, status: 400, param: "n"},
		{name: "model again after the image", balance: "10.00",
			parts: []editPart{model, prompt, image, editField("model", "dalle-test")}, status: 400, param: "model"},
		{name: "quality raised after the image", balance: "0.05",
			parts: []editPart{low, editField("n", "1"), model, prompt, image, editField("quality", "high")}, status: 400, param: "quality"},
		{name: "size changed after the image", balance: "10.00",
			parts: []editPart{square, low, model, prompt, image, editField("size", "1536x1024")}, status: 400, param: "size"},
		{name: "a second mask", balance: "10.00",
			parts: []editPart{model, prompt, image, editFile("mask", 64), editFile("mask", 65)}, status: 400, param: "mask"},
		{name: "a file that is no input", balance: "10.00",
			parts: []editPart{model, prompt, image, editFile("extra", 64)}, status: 400, param: "extra"},
		{name: "n after the image, beyond the hold", balance: "0.10",
			parts: []editPart{model, prompt, low, square, image, editField("n", "10")}, status: 400, param: "n",
			message: "asks for more than was held"},
		{name: "n after the image, covered", balance: "10.00",
			parts: []editPart{model, prompt, low, square, image, editField("n", "10")}, status: 200, images: 10},
		{name: "n after the image, beyond the hold, per-image price", balance: "0.10", model: "dalle-test",
			parts: []editPart{editField("model", "dalle-test"), prompt, image, editField("n", "10")}, status: 400, param: "n"},
		{name: "images after the hold at high fidelity, beyond it", balance: "0.20",
			parts:  cat([]editPart{model, prompt, low, square, editField("n", "1"), editField("input_fidelity", "high")}, images16),
			status: 400, param: "image[]"},
		{name: "images after the hold at high fidelity, covered", balance: "10.00",
			parts:  cat([]editPart{model, prompt, low, square, editField("n", "1"), editField("input_fidelity", "high")}, images16),
			status: 200, images: 1},
		{name: "a long prompt after the image, beyond the hold", balance: "0.06",
			parts: []editPart{model, low, square, editField("n", "1"), image, longPrompt}, status: 400, param: "prompt"},
		{name: "a long prompt after the image, covered", balance: "10.00",
			parts: []editPart{model, low, square, editField("n", "1"), image, longPrompt}, status: 200, images: 1},
		{name: "quality after the image, held at its dearest", balance: "0.25",
			parts: []editPart{model, prompt, square, editField("n", "1"), image, editField("quality", "high")}, status: 200, images: 1},
		{name: "curl's documented order", balance: "10.00",
			parts: []editPart{model, image, editFile("image[]", 3000), editFile("image[]", 3001), editFile("image[]", 3002), prompt}, status: 200, images: 1},
		{name: "an image before the model, below any image's price", balance: "0.003",
			parts: []editPart{editFile("image", 1<<20), model, prompt}, status: 403, message: "cheapest image model"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			acct, key := g.account(tc.balance)
			m := cmp.Or(tc.model, "image-test")
			var r response
			made, edits := checkBilled(t, g, acct, m, func() {
				ct, body := editFormOf(tc.parts...)
				r = g.do("POST", "/v1/images/edits", string(body), "Authorization", "Bearer "+key, "Content-Type", ct)
			})
			var e struct {
				Error struct{ Message, Type, Param string }
			}
			json.Unmarshal([]byte(r.body), &e)
			if r.status != tc.status || (tc.status != 200 && (e.Error.Param != tc.param || !strings.Contains(e.Error.Message, tc.message))) {
				t.Fatalf("%d %s", r.status, r.body)
			}
			if tc.status == 400 && (e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, "'"+tc.param+"'")) {
				t.Fatalf("the 400 does not name the field: %s", r.body)
			}
			if made.Images != tc.images {
				t.Fatalf("the upstream made %d images, want %d", made.Images, tc.images)
			}
			if tc.status == 400 {
				// the refused part (the last) never reached the upstream
				last := tc.parts[len(tc.parts)-1]
				sent := 0
				for _, p := range tc.parts {
					if p.name == last.name && (p.filename != "") == (last.filename != "") {
						sent++
					}
				}
				for _, up := range edits {
					got := 0
					for _, f := range up.Files {
						if f.Name == last.name {
							got++
						}
					}
					if last.filename == "" && up.Fields[last.name] == last.content || last.filename != "" && got >= sent {
						t.Fatalf("the upstream got the refused %s: %+v", last.name, up)
					}
				}
			}
			if used := runningSpool(t).Used(); used != 0 {
				t.Fatalf("%d bytes still counted in the upload spool", used)
			}
		})
	}

	// the Go SDK's order (fields sorted by name: the images and the mask
	// before the model), every field set: read whole before the hold
	t.Run("the Go SDK's order", func(t *testing.T) {
		acct, key := g.account("10.00")
		c := g.client(key)
		made, edits := checkBilled(t, g, acct, "image-test", func() {
			_, err := c.Images.Edit(context.Background(), openai.ImageEditParams{
				Image: openai.ImageEditParamsImageUnion{OfFileArray: []io.Reader{
					openai.File(bytes.NewReader(imageBytes(4096, 1)), "a.png", "image/png"),
					openai.File(bytes.NewReader(imageBytes(4096, 2)), "b.png", "image/png")}},
				Mask:          openai.File(bytes.NewReader(imageBytes(512, 3)), "mask.png", "image/png"),
				Background:    openai.ImageEditParamsBackgroundTransparent,
				InputFidelity: openai.ImageEditParamsInputFidelityHigh,
				Model:         "image-test",
				N:             openai.Int(2),
				OutputFormat:  openai.ImageEditParamsOutputFormatPNG,
				Prompt:        imageTestPrompt,
				Quality:       openai.ImageEditParamsQualityLow,
				Size:          openai.ImageEditParamsSize1024x1024,
			})
			if err != nil {
				t.Fatal(err)
			}
		})
		if made.Images != 2 || len(edits) != 1 || edits[0].Fields["n"] != "2" || edits[0].Fields["input_fidelity"] != "high" || len(edits[0].Files) != 3 {
			t.Fatalf("made %+v from %+v", made, edits)
		}
	})
	g.audit()
}

// TestRedTeamImageEditSpool: the files that forms send before their model
// wait in a spool bounded for the whole gateway (max_image_spool): an
// upload that does not fit beside the others is a 503 in OpenAI's format,
// with Retry-After and the way out (send the model first), nothing billed;
// the others go on, and every byte is given back.
func TestRedTeamImageEditSpool(t *testing.T) {
	g := startGateway(t, gatewayOptions{extra: imageModels + "\t\tmax_image_spool 5MiB\n"})
	acct, key := g.account("10.00")
	sp := runningSpool(t)
	if sp.Limit() != 5<<20 {
		t.Fatalf("spool limit %d", sp.Limit())
	}
	// the first upload stops halfway through its image, spooled
	reached, resume := make(chan struct{}), make(chan struct{})
	pr, pw := io.Pipe()
	ct, write := editForm(pw, "image-test", true, 4<<20, func() error {
		close(reached)
		<-resume
		return nil
	})
	go func() { pw.CloseWithError(write()) }()
	req, _ := http.NewRequest("POST", gatewayAddr+"/v1/images/edits", pr)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", ct)
	var first struct {
		status int
		body   string
		err    error
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		resp, err := http.DefaultClient.Do(req)
		if first.err = err; err == nil {
			first.status = resp.StatusCode
			first.body = readAllString(resp.Body)
			resp.Body.Close()
		}
	}()
	<-reached
	deadline := time.Now().Add(10 * time.Second)
	for sp.Used() < 2<<20 {
		if time.Now().After(deadline) {
			t.Fatalf("the first upload's half is not spooled: %d bytes", sp.Used())
		}
		time.Sleep(5 * time.Millisecond)
	}
	made, _ := checkBilled(t, g, acct, "image-test", func() {
		r := postForm(t, key, func(w io.Writer) (string, func() error) {
			return editForm(w, "image-test", true, 4<<20, nil)
		})
		if r.status != 503 || r.header.Get("Retry-After") == "" || !strings.Contains(r.body, `{"error":{"message":"The gateway is holding as many image uploads as it can (5.0 MiB)`) ||
			!strings.Contains(r.body, "send the model field first") {
			t.Fatalf("an upload beyond the spool: %d %s", r.status, r.body)
		}
	})
	if made.Images != 0 {
		t.Fatalf("the refused upload made %d images", made.Images)
	}
	close(resume)
	wg.Wait()
	if first.err != nil || first.status != 200 {
		t.Fatalf("the first upload: %v %d %s", first.err, first.status, first.body)
	}
	// the model first: forwarded as it arrives, whatever the spool holds
	r := postForm(t, key, func(w io.Writer) (string, func() error) {
		return editForm(w, "image-test", false, 8<<20, nil)
	})
	if r.status != 200 {
		t.Fatalf("model first: %d %s", r.status, r.body)
	}
	if sp.Used() != 0 {
		t.Fatalf("%d bytes still counted in the spool", sp.Used())
	}
	g.audit()
}

// Hole 6: two servers on one SQLite ledger

// TestRedTeamTwoServersOneSQLite: each server keeps its holds in its own
// memory, so two server processes on one SQLite file would both spend the
// same balance. A second gateway process on the running gateway's ledger
// refuses to start, saying why and what to use instead (were it to start,
// the two race on one account here and the overdraft shows); `caddy
// validate` and the CLI (`caddy modelgate …`, by --config and by --db)
// work beside the running gateway; a reload keeps the lock; a server killed
// with SIGKILL leaves its file to the next one.
func TestRedTeamTwoServersOneSQLite(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	// an account whose balance covers the hold of the race's request, not
	// two of its answers
	probeAcct, probeKey := g.account("1.00")
	if st, body := generateAt(gatewayAddr, "openai", testModel, raceText, true, probeKey); st != 200 {
		t.Fatalf("probe: %d %s", st, body)
	}
	probe := g.rows(probeAcct)[0]
	if 2*probe.Charged <= probe.Hold {
		t.Fatalf("the race's request is held at %s and costs %s: two would not overdraw", probe.Hold, probe.Charged)
	}
	acct, key := g.account(probe.Hold.String())
	dir := t.TempDir()
	bin := buildGateway(t, dir)
	cfg, base := secondConfig(t, g, dir, g.dbPath)

	refused := func(what string) {
		t.Helper()
		b := runGateway(t, bin, cfg, t.TempDir(), base)
		if b.serving(60 * time.Second) {
			raceTwoServers(t, g, b, acct, key)
			t.Fatalf("%s: a second server started on the running gateway's ledger", what)
		}
		select {
		case <-b.exited:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: a second server neither serves nor exits:\n%s", what, b.output())
		}
		out := b.output()
		for _, want := range []string{"the SQLite file is in use by another modelgate server", g.dbPath,
			fmt.Sprintf("held by process %d", os.Getpid()), "One server per SQLite file", "holds in its own memory",
			"a shared PostgreSQL ledger", "caddy modelgate commands work beside a running server"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: the refusal does not say %q:\n%s", what, want, out)
			}
		}
		if b.cmd.ProcessState.Success() {
			t.Errorf("%s: the refused server exited with success", what)
		}
		t.Logf("%s, refused:\n%s", what, out[strings.LastIndex(out, "\n{")+1:])
	}
	refused("beside the gateway")

	caddy := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("caddy %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	// caddy validate provisions a config but never starts it
	caddy("validate", "--config", cfg)

	// the CLI beside the running gateway, from the Caddyfile and by --db
	cli := func(args ...string) string { return caddy(append([]string{"modelgate"}, args...)...) }
	before, _ := g.balance(acct)
	cli("credit", "--config", cfg, "--account", acct, "--amount", "1.00", "--reason", "red team")
	if after, _ := g.balance(acct); after-before != ledger.NanosPerUnit {
		t.Fatalf("the CLI's credit: balance %s → %s", before, after)
	}
	id := strings.TrimSpace(cli("account", "create", "--db", g.dbPath, "--email", "cli@example.com"))
	if a, err := g.store.GetAccount(context.Background(), id); err != nil || a.Email != "cli@example.com" {
		t.Fatalf("the CLI's account %q: %+v %v", id, a, err)
	}

	// a reload keeps the ledger and its lock
	g.reload()
	if r := g.generate("openai", testModel, "hello", false, key); r.status != 200 {
		t.Fatalf("after the reload: %d %s", r.status, r.body)
	}
	refused("after a reload")

	// SIGKILL: the system drops the lock with its holder
	other := filepath.Join(t.TempDir(), "other.db")
	cfg2, base2 := secondConfig(t, g, t.TempDir(), other)
	p1 := runGateway(t, bin, cfg2, t.TempDir(), base2)
	if !p1.serving(60 * time.Second) {
		t.Fatalf("a server on its own file did not start:\n%s", p1.output())
	}
	p1.kill()
	p2 := runGateway(t, bin, cfg2, t.TempDir(), base2)
	if !p2.serving(60 * time.Second) {
		t.Fatalf("a server on the file of one killed did not start:\n%s", p2.output())
	}
	g.audit()
}

// raceText is the request of the race: its answer is capped at the
// request's max_tokens.
const raceText = "mock:tokens=200 mock:latency=300ms race"

// raceTwoServers shows what two servers on one ledger do: one streamed
// request on each, at once, on an account whose balance covers one; it
// fails the test if the upstream made more answers than were billed.
func raceTwoServers(t *testing.T, g *gateway, b *secondInstance, acct, key string) {
	t.Helper()
	done := g.mock.KeyStats(upstreamKey).Completed
	var wg sync.WaitGroup
	statuses := make([]int, 2)
	for i, at := range []string{gatewayAddr, b.base} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i], _ = generateAt(at, "openai", testModel, raceText, true, key)
		}()
	}
	wg.Wait()
	time.Sleep(500 * time.Millisecond) // both settled, or failed to
	made := g.mock.KeyStats(upstreamKey).Completed - done
	rows := rowsAt(t, g.dbPath, acct)
	a, _ := g.balance(acct)
	if int64(len(rows)) < made || a < 0 {
		t.Errorf("two servers on one ledger: the upstream made %d answers, %d were billed (statuses %v, balance %s)", made, len(rows), statuses, a)
	}
}
