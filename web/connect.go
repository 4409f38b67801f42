package web

import (
	"io"
	"strings"
)

// ClientSetup is how one client is pointed at the gateway: its name, what
// the snippet is (a shell session, Python, a config file) and the snippet.
type ClientSetup struct {
	Client, Kind, Code string
}

// keyVar is the environment variable the snippets read the key from when
// they are shown without it.
const keyVar = "MODELGATE_API_KEY"

// ClientSetups are copy-paste set-ups of every client the gateway serves
// (docs/api.md, "Base URLs for clients"), for the gateway at base (scheme
// and host, no trailing slash) and a model the catalogue has. With key
// empty the snippets read the key from $MODELGATE_API_KEY; with a key (the
// panel that shows a new key once) they carry it. OpenAI clients use
// base + "/v1"; Anthropic and Google clients use base itself.
func ClientSetups(base, key, model string) []ClientSetup {
	shellKey, pyKey := "$"+keyVar, `os.environ["`+keyVar+`"]`
	pyImport, codexKey := "import os\n", ""
	if key != "" {
		// Codex reads its key from the environment only
		shellKey, pyKey, pyImport = key, `"`+key+`"`, ""
		codexKey = "# in your shell: export " + keyVar + "=" + key + "\n"
	}
	r := strings.NewReplacer("{base}", base, "{key}", shellKey, "{pykey}", pyKey, "{model}", model, "{import}", pyImport,
		"{codexkey}", codexKey)
	setups := []ClientSetup{
		{"curl", "shell", `curl {base}/v1/chat/completions \
  -H "Authorization: Bearer {key}" -H "Content-Type: application/json" \
  -d '{"model":"{model}","messages":[{"role":"user","content":"Hello"}]}'`},
		{"OpenAI SDK (Python)", "python", `{import}from openai import OpenAI

client = OpenAI(base_url="{base}/v1", api_key={pykey})
print(client.chat.completions.create(model="{model}",
    messages=[{"role": "user", "content": "Hello"}]).choices[0].message.content)`},
		{"Anthropic SDK (Python)", "python", `{import}from anthropic import Anthropic

client = Anthropic(base_url="{base}", api_key={pykey})  # no /v1
print(client.messages.create(model="{model}", max_tokens=256,
    messages=[{"role": "user", "content": "Hello"}]).content[0].text)`},
		{"Google GenAI SDK (Python)", "python", `{import}from google import genai

client = genai.Client(api_key={pykey}, http_options={"base_url": "{base}"})
print(client.models.generate_content(model="{model}", contents="Hello").text)`},
		{"Claude Code", "shell", `export ANTHROPIC_BASE_URL={base}
export ANTHROPIC_AUTH_TOKEN={key}
claude`},
		{"Codex CLI (~/.codex/config.toml)", "toml", `{codexkey}model = "{model}"
model_provider = "modelgate"

[model_providers.modelgate]
name = "modelgate"
base_url = "{base}/v1"
env_key = "` + keyVar + `"
wire_api = "responses"`},
		{"Gemini CLI", "shell", `export GOOGLE_GEMINI_BASE_URL={base}
export GEMINI_API_KEY={key}
gemini -m {model}`},
	}
	for i := range setups {
		setups[i].Code = r.Replace(setups[i].Code)
	}
	return setups
}

// IndexPage is what a browser gets at the gateway's root: where to point a
// client, and how (API clients get the JSON index instead).
type IndexPage struct {
	Title   string
	BaseURL string
	Setups  []ClientSetup
}

// RenderIndex writes the root page.
func RenderIndex(w io.Writer, p *IndexPage) error { return render(w, "index", p) }
