package catalog

import (
	_ "embed"
	"fmt"

	"gopkg.in/yaml.v3"
)

//go:embed samples/records.yaml
var sampleRecordsYAML []byte

// sampleNote labels every sample record: HOLON_RECORDS (gateway.md §7,
// "off by default: sample records are not measurements").
const sampleNote = "sample record shipped with the gateway (HOLON_RECORDS=1), not a measurement"

// sampleRecord is a shipped sample record, shown beside the measured one.
type sampleRecord struct {
	Runs        int64       `json:"runs" yaml:"runs"`
	SuccessRate string      `json:"success_rate" yaml:"success_rate"`
	LatencyMS   latencyView `json:"latency_ms" yaml:"latency_ms"`
	Note        string      `json:"note" yaml:"-"`
}

// loadSampleRecords reads the shipped sample records, by agent ref.
func loadSampleRecords() (map[string]sampleRecord, error) {
	out := map[string]sampleRecord{}
	if err := yaml.Unmarshal(sampleRecordsYAML, &out); err != nil {
		return nil, fmt.Errorf("sample records: %w", err)
	}
	for ref, s := range out {
		s.Note = sampleNote
		out[ref] = s
	}
	return out, nil
}
