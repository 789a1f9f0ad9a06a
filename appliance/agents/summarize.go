package agents

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"holon.dev/holon/gateway"
	"holon.dev/holon/gateway/contract"
	"holon.dev/holon/journal"
)

// holon-labs/summarize: agents/summarize/holon.yaml. It asks Anthropic's
// Messages API for a summary with the operator's key and bills per 1,000
// tokens, as the API counts them (input and output together, rounded up).
// With a max_cost, it first estimates the run, one token per three bytes of
// text plus the instructions plus the longest summary it lets the model
// write, and refuses with over_budget before any request when the estimate
// is above the cap.

// SummarizeConfig is what holon-labs/summarize needs from the operator.
type SummarizeConfig struct {
	// APIKey is the Anthropic API key (ANTHROPIC_API_KEY); without it every
	// run fails with agent_error.
	APIKey string
	// BaseURL is the Messages API's origin (ANTHROPIC_BASE_URL; default
	// https://api.anthropic.com).
	BaseURL string
	// Model is the Claude model (HOLON_SUMMARIZE_MODEL; default
	// DefaultSummarizeModel).
	Model string
	// Client makes the requests (a client without a timeout when nil: the
	// run's hard timeout bounds them).
	Client *http.Client
}

// DefaultSummarizeModel is the model holon-labs/summarize asks for unless
// configured otherwise.
const DefaultSummarizeModel = "claude-haiku-4-5"

// anthropicVersion is the Messages API version the requests are written for.
const anthropicVersion = "2023-06-01"

// Estimation and request bounds.
const (
	defaultMaxWords = 150
	// promptTokens covers the instructions around the text.
	promptTokens = 120
	// maxAnswerBytes bounds the API's answer read into memory.
	maxAnswerBytes = 4 << 20
)

// SummarizeConfigFromEnv reads the operator's settings for summarize.
func SummarizeConfigFromEnv(getenv func(string) string) SummarizeConfig {
	return SummarizeConfig{
		APIKey:  getenv("ANTHROPIC_API_KEY"),
		BaseURL: getenv("ANTHROPIC_BASE_URL"),
		Model:   getenv("HOLON_SUMMARIZE_MODEL"),
	}
}

type summarizer struct{ cfg SummarizeConfig }

func newSummarizer(cfg SummarizeConfig) *summarizer {
	if cfg.BaseURL == "" {
		cfg.BaseURL = "https://api.anthropic.com"
	}
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	if cfg.Model == "" {
		cfg.Model = DefaultSummarizeModel
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{}
	}
	return &summarizer{cfg: cfg}
}

type summarizeInput struct {
	Text     string `json:"text"`
	MaxWords int    `json:"max_words"`
}

type summarizeOutput struct {
	Summary string `json:"summary"`
}

// maxTokens is the longest summary the model may write for maxWords words.
func maxTokens(maxWords int) int { return 2*maxWords + 16 }

// estimateUnits is the run's estimated units (thousands of tokens, rounded up).
func estimateUnits(in summarizeInput) int64 {
	tokens := int64((len(in.Text)+2)/3) + promptTokens + int64(maxTokens(in.MaxWords))
	return (tokens + 999) / 1000
}

func (s *summarizer) run(ctx context.Context, input json.RawMessage, c *gateway.Ctx) (any, error) {
	var in summarizeInput
	if err := json.Unmarshal(input, &in); err != nil {
		return nil, fmt.Errorf("decode input: %w", err)
	}
	if strings.TrimSpace(in.Text) == "" {
		return nil, c.Error("empty_text", "the text is only white space: there is nothing to summarize")
	}
	if in.MaxWords == 0 {
		in.MaxWords = defaultMaxWords
	}
	if limit, ok := c.MaxCost(); ok {
		units := estimateUnits(in)
		est, err := estimatePrice(c.Manifest(), units)
		if err != nil {
			return nil, err
		}
		if est > limit {
			return nil, c.Error("over_budget", fmt.Sprintf("the run is estimated at %d thousand tokens, %s %s, above the max_cost of %s: nothing was sent",
				units, est, c.Manifest().Currency(), limit))
		}
	}
	if s.cfg.APIKey == "" {
		return nil, errors.New("this gateway has no ANTHROPIC_API_KEY: the operator must set it to run holon-labs/summarize")
	}
	// The request to the Messages API leaves the process: the call's
	// reservation must be durable first (README "Durability").
	if err := c.Durable(); err != nil {
		return nil, err
	}
	msg, err := s.messages(ctx, in)
	if err != nil {
		return nil, err
	}
	var text strings.Builder
	for _, b := range msg.Content {
		if b.Type == "text" {
			text.WriteString(b.Text)
		}
	}
	u := msg.Usage
	tokens := u.InputTokens + u.OutputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
	c.Units((tokens + 999) / 1000)
	summary := strings.TrimSpace(text.String())
	if summary == "" {
		return nil, c.Error("upstream_failed", fmt.Sprintf("the Messages API answered no text (stop reason %q)", msg.StopReason))
	}
	return summarizeOutput{Summary: summary}, nil
}

// estimatePrice is the price of units at the manifest's per_unit pricing,
// capped at its max, as the gateway would charge it.
func estimatePrice(m *contract.Manifest, units int64) (journal.Amount, error) {
	p := m.Pricing
	if p.Model != contract.PricingPerUnit || p.Amount == nil || p.Max == nil {
		return 0, fmt.Errorf("summarize: %s is not priced per unit", m.Ref())
	}
	price, err := p.Amount.MulInt(units)
	if err != nil {
		return *p.Max, nil
	}
	return journal.Min(price, *p.Max), nil
}

// messagesRequest is the Messages API's request, as much of it as we use.
type messagesRequest struct {
	Model     string    `json:"model"`
	MaxTokens int       `json:"max_tokens"`
	System    string    `json:"system"`
	Messages  []message `json:"messages"`
}

type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// messagesResponse is the Messages API's answer.
type messagesResponse struct {
	Type    string `json:"type"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StopReason string `json:"stop_reason"`
	Usage      struct {
		InputTokens              int64 `json:"input_tokens"`
		OutputTokens             int64 `json:"output_tokens"`
		CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	} `json:"usage"`
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

const summarizeSystem = "You summarize documents faithfully and concisely. Answer with the summary only: no preamble, no title, no quotation marks around it. Write in the language of the document."

func (s *summarizer) messages(ctx context.Context, in summarizeInput) (*messagesResponse, error) {
	body, err := json.Marshal(messagesRequest{
		Model:     s.cfg.Model,
		MaxTokens: maxTokens(in.MaxWords),
		System:    summarizeSystem,
		Messages: []message{{Role: "user", Content: fmt.Sprintf(
			"Summarize the document below in at most %d words.\n\n<document>\n%s\n</document>", in.MaxWords, in.Text)}},
	})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.BaseURL+"/v1/messages", bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("ANTHROPIC_BASE_URL: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-api-key", s.cfg.APIKey)
	req.Header.Set("anthropic-version", anthropicVersion)
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &gateway.AgentError{Code: "upstream_failed", Message: fmt.Sprintf("the Messages API could not be reached: %v", err)}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		return nil, &gateway.AgentError{Code: "upstream_failed", Message: fmt.Sprintf("reading the Messages API's answer: %v", err)}
	}
	if len(raw) > maxAnswerBytes {
		return nil, &gateway.AgentError{Code: "upstream_failed", Message: "the Messages API's answer is too large"}
	}
	var msg messagesResponse
	if err := json.Unmarshal(raw, &msg); err != nil {
		return nil, &gateway.AgentError{Code: "upstream_failed", Message: fmt.Sprintf("the Messages API answered %d with a body that is not JSON", resp.StatusCode)}
	}
	if resp.StatusCode != http.StatusOK || msg.Error != nil || msg.Type != "message" {
		why := http.StatusText(resp.StatusCode)
		if msg.Error != nil {
			why = msg.Error.Type + ": " + msg.Error.Message
		}
		return nil, &gateway.AgentError{Code: "upstream_failed", Message: fmt.Sprintf("the Messages API answered %d (%s)", resp.StatusCode, why)}
	}
	return &msg, nil
}
