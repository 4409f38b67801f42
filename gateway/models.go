package gateway

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/modelgate/modelgate/ledger"
	"github.com/modelgate/modelgate/relay"
)

// The model catalogue, in the three shapes the vendors' SDKs expect from
// GET /v1/models (OpenAI; Anthropic when anthropic-version is sent; Gemini
// when the key came as x-goog-api-key or ?key=) and GET /v1beta/models.

// openAIModel is an OpenAI model object.
type openAIModel struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// anthropicModel is an Anthropic model object.
type anthropicModel struct {
	Type        string `json:"type"`
	ID          string `json:"id"`
	DisplayName string `json:"display_name"`
	CreatedAt   string `json:"created_at"`
	MaxTokens   int    `json:"max_tokens"`
}

// geminiModel is a Gemini model object.
type geminiModel struct {
	Name                       string   `json:"name"`
	Version                    string   `json:"version"`
	DisplayName                string   `json:"displayName"`
	Description                string   `json:"description,omitempty"`
	OutputTokenLimit           int      `json:"outputTokenLimit"`
	SupportedGenerationMethods []string `json:"supportedGenerationMethods"`
}

func openAIOf(m *relay.Model) openAIModel {
	return openAIModel{ID: m.ID, Object: "model", Created: m.Created, OwnedBy: m.OwnedBy}
}

func anthropicOf(m *relay.Model) anthropicModel {
	return anthropicModel{Type: "model", ID: m.ID, DisplayName: m.ID,
		CreatedAt: time.Unix(m.Created, 0).UTC().Format(time.RFC3339), MaxTokens: m.MaxOutput}
}

func geminiOf(m *relay.Model) geminiModel {
	return geminiModel{Name: "models/" + m.ID, Version: "001", DisplayName: m.ID,
		Description: "Served by modelgate (owned by " + m.OwnedBy + ").", OutputTokenLimit: m.MaxOutput,
		SupportedGenerationMethods: []string{"generateContent", "streamGenerateContent", "countTokens"}}
}

// modelDoc renders the OpenAI model object of m.
func modelDoc(m *relay.Model) []byte {
	b, _ := json.Marshal(openAIOf(m))
	return b
}

// sortedModels is the catalogue sorted by ID.
func sortedModels(ms []*relay.Model) []*relay.Model {
	sorted := slices.Clone(ms)
	slices.SortFunc(sorted, func(x, y *relay.Model) int { return strings.Compare(x.ID, y.ID) })
	return sorted
}

// modelListDoc renders the OpenAI model list.
func modelListDoc(ms []*relay.Model) []byte {
	b := []byte(`{"object":"list","data":[`)
	for i, m := range ms {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, m.Doc...)
	}
	return append(b, "]}"...)
}

// serveModelList answers the model list of p in the client's shape: the
// models its plan offers (docs/caddyfile.md, "plan") and, when its key has
// a model list, that list allows.
func (h *APIHandler) serveModelList(w http.ResponseWriter, r *http.Request, f relay.Format, p relay.Principal) {
	ms, doc := h.app.modelsFor(p.Plan) // sorted by ID
	if p.Limits != nil && p.Limits.Models != nil {
		// the OpenAI document of the key's own list is rendered when asked
		ms, doc = keyModels(ms, p.Limits), nil
	}
	q := r.URL.Query()
	switch f {
	case relay.FormatMessages:
		// pages of limit models after after_id or before before_id
		limit := queryInt(q, "limit", 20, 1000)
		var start, end int
		var hasMore bool
		if before := q.Get("before_id"); before != "" {
			end = indexBefore(ms, before)
			start = max(end-limit, 0)
			hasMore = start > 0
		} else {
			if after := q.Get("after_id"); after != "" {
				start = indexAfter(ms, after)
			}
			end = min(start+limit, len(ms))
			hasMore = end < len(ms)
		}
		page := ms[start:end]
		out := struct {
			Data    []anthropicModel `json:"data"`
			HasMore bool             `json:"has_more"`
			FirstID *string          `json:"first_id"`
			LastID  *string          `json:"last_id"`
		}{Data: make([]anthropicModel, 0, len(page))}
		for _, m := range page {
			out.Data = append(out.Data, anthropicOf(m))
		}
		out.HasMore = hasMore
		if len(page) > 0 {
			out.FirstID, out.LastID = &page[0].ID, &page[len(page)-1].ID
		}
		b, _ := json.Marshal(out)
		relay.WriteJSON(w, http.StatusOK, b)
	case relay.FormatGemini:
		size := queryInt(q, "pageSize", 50, 1000)
		start := 0
		if tok := q.Get("pageToken"); tok != "" {
			start = indexAfter(ms, tok)
		}
		end := min(start+size, len(ms))
		out := struct {
			Models        []geminiModel `json:"models"`
			NextPageToken string        `json:"nextPageToken,omitempty"`
		}{Models: make([]geminiModel, 0, end-start)}
		for _, m := range ms[start:end] {
			out.Models = append(out.Models, geminiOf(m))
		}
		if end < len(ms) {
			out.NextPageToken = ms[end-1].ID
		}
		b, _ := json.Marshal(out)
		relay.WriteJSON(w, http.StatusOK, b)
	default:
		if doc == nil {
			doc = modelListDoc(ms)
		}
		relay.WriteJSON(w, http.StatusOK, doc)
	}
}

// serveModel answers one model in the client's shape; a model p's plan
// does not offer, or its key's model list leaves out, is not found, as an
// unknown one.
func (h *APIHandler) serveModel(w http.ResponseWriter, f relay.Format, p relay.Principal, id string) {
	m, ok := h.app.svc.ModelFor(p, id)
	if !ok {
		relay.WriteError(w, f, relay.ModelNotFound(id))
		return
	}
	switch f {
	case relay.FormatMessages:
		b, _ := json.Marshal(anthropicOf(m))
		relay.WriteJSON(w, http.StatusOK, b)
	case relay.FormatGemini:
		b, _ := json.Marshal(geminiOf(m))
		relay.WriteJSON(w, http.StatusOK, b)
	default:
		relay.WriteJSON(w, http.StatusOK, m.Doc)
	}
}

// keyModels is the models of ms (sorted by ID) that limits l let their key
// call, in the same order.
func keyModels(ms []*relay.Model, l *ledger.KeyLimits) []*relay.Model {
	out := make([]*relay.Model, 0, min(len(ms), len(l.Models)))
	for _, m := range ms {
		if relay.KeyAllows(l, m.ID) {
			out = append(out, m)
		}
	}
	return out
}

// indexAfter is the position just after the model with id (or where it
// would sort).
func indexAfter(ms []*relay.Model, id string) int {
	i, found := slices.BinarySearchFunc(ms, id, func(m *relay.Model, id string) int { return strings.Compare(m.ID, id) })
	if found {
		return i + 1
	}
	return i
}

// indexBefore is the position of the model with id (or where it would sort).
func indexBefore(ms []*relay.Model, id string) int {
	i, _ := slices.BinarySearchFunc(ms, id, func(m *relay.Model, id string) int { return strings.Compare(m.ID, id) })
	return i
}

// indexDoc renders the public index of GET / and GET /v1 (docs/api.md).
func indexDoc() []byte {
	b, _ := json.Marshal(struct {
		Service   string              `json:"service"`
		Object    string              `json:"object"`
		Auth      string              `json:"auth"`
		Endpoints map[string][]string `json:"endpoints"`
	}{
		Service: "modelgate",
		Object:  "api",
		Auth:    "Send your API key as Authorization: Bearer <API_KEY>, or as x-api-key: <API_KEY> (Gemini clients: x-goog-api-key or ?key=).",
		Endpoints: map[string][]string{
			"chat-completions": {"GET /v1/models", "GET /v1/models/{model}", "POST /v1/chat/completions", "POST /v1/responses",
				"POST /v1/images/generations", "POST /v1/images/edits"},
			"messages": {"POST /v1/messages", "POST /v1/messages/count_tokens"},
			"gemini": {"GET /v1beta/models", "GET /v1beta/models/{model}", "POST /v1beta/models/{model}:generateContent",
				"POST /v1beta/models/{model}:streamGenerateContent", "POST /v1beta/models/{model}:countTokens"},
			"usage": {"GET /api/usage", "GET /api/usage/requests/{id}"},
		},
	})
	return b
}
