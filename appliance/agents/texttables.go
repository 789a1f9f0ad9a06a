package agents

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"holon.dev/holon"
	"holon.dev/holon/gateway"
)

// holon-labs/text-tables: examples/text-tables/holon.yaml.
//
// The table of a text is its lines with at least two comma-separated cells,
// in order; each cell is trimmed of surrounding white space. Blank lines and
// lines without a comma (a title, a sentence) are not rows. Cells are split
// on every comma: there is no quoting. The run reports one unit per row.

type textTablesInput struct {
	Text string `json:"text,omitempty"`
	File string `json:"file,omitempty"`
}

type textTablesOutput struct {
	Rows [][]string `json:"rows"`
}

func textTables(ctx context.Context, input json.RawMessage, c *gateway.Ctx) (any, error) {
	var in textTablesInput
	if err := json.Unmarshal(input, &in); err != nil {
		return nil, fmt.Errorf("read input: %w", err)
	}
	if in.File != "" {
		text, err := documentText(ctx, c, in.File)
		if err != nil {
			return nil, err
		}
		in.Text = text
	}
	rows := tableRows(in.Text)
	if len(rows) == 0 {
		return nil, c.Error("no_table_found", "no line of the text has two or more comma-separated cells")
	}
	c.Units(int64(len(rows)))
	return textTablesOutput{Rows: rows}, nil
}

// documentText downloads the file of a handle (size and SHA-256 checked)
// and reads it as UTF-8 text; either failure is the declared
// unreadable_document, never billed.
func documentText(ctx context.Context, c *gateway.Ctx, handle string) (string, error) {
	b, err := c.Download(ctx, handle)
	if err != nil {
		return "", err
	}
	if !utf8.Valid(b) {
		return "", c.Error(holon.CodeUnreadableDocument, fmt.Sprintf("%s is not UTF-8 text (cut short in the middle of a character, or not text at all)", handle))
	}
	return string(b), nil
}

// tableRows splits every line with a comma into its trimmed cells.
func tableRows(text string) [][]string {
	var rows [][]string
	for line := range strings.Lines(text) {
		if !strings.Contains(line, ",") {
			continue
		}
		cells := strings.Split(line, ",")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows = append(rows, cells)
	}
	return rows
}
