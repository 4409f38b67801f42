package relay

import (
	"math"
	"strconv"

	"github.com/modelgate/modelgate/formats"
	"github.com/modelgate/modelgate/formats/images"
	"github.com/modelgate/modelgate/ledger"
)

// Sizing a request's hold, in one place (docs/billing.md, "Holds"): every
// route quotes the most its request can cost before anything is sent
// upstream, and the hold is taken from the quote (openBill).

// quote is what a request may cost: its hold is refused below least and
// is the lesser of most and the available balance otherwise.
type quote struct {
	least, most ledger.Money
	// short says in a few words what least covers, for the refusal ("its
	// input and at least 256 output tokens", "1 image(s)").
	short string

	// A generation's parts: the cost of its input and hosted tools, the
	// price of one output token of every choice, and the output cap the
	// whole of most covers.
	input       ledger.Money
	outputPrice ledger.Money
	outputCap   int
}

// dearestInputPrice is the most one input token can cost at m: the
// dearest of its input, cache read and cache write prices. Every bound of
// an input is priced at it, since the cache buckets are known only from the
// answer.
func (m *Model) dearestInputPrice() ledger.Money {
	return max(m.Price.Input, m.Price.CacheRead, m.Price.CacheWrite)
}

// generationQuote sizes the hold of a generation: the input bound at the
// dearest input price, plus what its hosted tools may cost, plus the output
// cap (the request's max_tokens, or the model's max_output, whichever is
// lower), for each choice, at the output price. least covers the input,
// the hosted tools and minOutput tokens (or the whole cap, if lower).
func generationQuote(m *Model, req *genRequest, hosted ledger.Money, minOutput int) quote {
	q := quote{outputCap: m.MaxOutput}
	if req.maxTokens > 0 && req.maxTokens < q.outputCap {
		q.outputCap = req.maxTokens
	}
	q.input = addMoney(mulMoney(req.inputBound, m.dearestInputPrice()), hosted)
	q.outputPrice = mulMoney(int64(max(req.choices, 1)), m.Price.Output) // per token of every choice
	minOut := min(minOutput, q.outputCap)
	q.least = addMoney(q.input, mulMoney(int64(minOut), q.outputPrice))
	q.most = addMoney(q.input, mulMoney(int64(q.outputCap), q.outputPrice))
	q.short = "its input and at least " + strconv.Itoa(minOut) + " output tokens"
	return q
}

// outputCapFor is the output cap a hold of held leaves: the quoted cap,
// or, when held is less than the quote's most, what it covers beyond the
// input (capped then says the cap was lowered).
func (q quote) outputCapFor(held ledger.Money) (outputCap int, capped bool) {
	if held < q.most && q.outputPrice > 0 {
		return int(min(int64(q.outputCap), int64((held-q.input)/q.outputPrice))), true
	}
	return q.outputCap, false
}

// hostedBound is the most uses of a hosted tool of kind k can cost at m:
// each its fee plus an allowance of input tokens for its results, at the
// dearest input price.
func (m *Model) hostedBound(k formats.HostedKind, uses int64) ledger.Money {
	perUse := addMoney(m.hostedUsePrice(k), mulMoney(k.ResultTokens(), m.dearestInputPrice()))
	return mulMoney(uses, perUse)
}

// inputImageTokens bounds the input tokens of one image given to an edit,
// for the hold (GPT image models bill a high-fidelity input image at a few
// thousand tokens).
const inputImageTokens = 6000

// perImage is the most one image of the given size and quality can cost
// at m: the per-image price, or the output tokens of its size and quality,
// whichever is dearer (a size or quality not given, or not known, is taken
// at its dearest).
func (m *Model) perImage(size, quality string) ledger.Money {
	return max(m.ImagePrice, mulMoney(images.OutputTokens(size, quality), m.Price.Output))
}

// imageBound is the most an images request of n images, a prompt of
// promptBytes and, for an edit, files input files (at least one) can cost
// at m: the input tokens (the prompt's bytes and a fixed allowance per
// input file) at the dearest input price, and n images at perImage.
func (m *Model) imageBound(req *images.Request, edit bool, n, promptBytes, files int) ledger.Money {
	tokens := int64(promptBytes)
	if edit {
		tokens += int64(max(files, 1)) * inputImageTokens
	}
	in := mulMoney(tokens, m.dearestInputPrice())
	return addMoney(in, mulMoney(int64(n), m.perImage(req.Size, req.Quality)))
}

// leastEdit is the least an edit of m can be held for: one input image, one
// image out at the cheapest size and quality, no prompt.
func (m *Model) leastEdit() ledger.Money {
	in := mulMoney(inputImageTokens, m.dearestInputPrice())
	return addMoney(in, max(m.ImagePrice, mulMoney(images.MinOutputTokens, m.Price.Output)))
}

// imageQuote sizes the hold of an images request as read so far (form is
// nil for a generation). An edit whose form goes on past its first file
// after the model (curl's order: model, images, prompt) is quoted the
// dearest request the rest of the form can still make (n images not given
// yet: 10; a prompt not given yet: the longest; 17 input files), and never
// less than the form read so far: each later part is checked against what
// was held (imageCall.late).
func imageQuote(m *Model, req *images.Request, form *images.Form) quote {
	q := quote{least: m.imageNow(req, form), short: strconv.Itoa(req.N) + " image(s)"}
	q.most = q.least
	if form != nil && !form.Complete() {
		n, prompt := req.N, len(req.Prompt)
		if !req.NGiven {
			n = images.MaxN
		}
		if !form.Given("prompt") {
			prompt = images.MaxPromptBytes
		}
		q.most = m.imageBound(req, true, n, prompt, images.MaxInputFiles)
	}
	return q
}

// imageNow is the bound of an images request as read so far.
func (m *Model) imageNow(req *images.Request, form *images.Form) ledger.Money {
	files := 0
	if form != nil {
		files = form.Files()
	}
	return m.imageBound(req, form != nil, req.N, len(req.Prompt), files)
}

// mulMoney multiplies a token count by a per-token price, saturating instead
// of overflowing (a saturated hold is refused, never wrapped around).
func mulMoney(tokens int64, price ledger.Money) ledger.Money {
	if tokens <= 0 || price <= 0 {
		return 0
	}
	if tokens > math.MaxInt64/int64(price) {
		return math.MaxInt64
	}
	return ledger.Money(tokens) * price
}

// addMoney adds, saturating.
func addMoney(a, b ledger.Money) ledger.Money {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
