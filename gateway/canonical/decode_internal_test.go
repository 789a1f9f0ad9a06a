package canonical

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

type fastInner struct {
	Depth int               `json:"depth"`
	Name  *string           `json:"name,omitempty"`
	Tags  map[string]string `json:"tags"`
}

type fastKey string

type fastBody struct {
	Mandate string               `json:"mandate"`
	Agent   string               `json:"agent,omitempty"`
	Input   json.RawMessage      `json:"input"`
	Max     *json.Number         `json:"max_cost,omitempty"`
	Flag    bool                 `json:"flag"`
	Small   int8                 `json:"small"`
	Count   uint16               `json:"count"`
	Ratio   float32              `json:"ratio"`
	Inner   *fastInner           `json:"inner"`
	List    []fastInner          `json:"list"`
	Bytes   []byte               `json:"bytes"`
	Keyed   map[fastKey]*float64 `json:"keyed"`
	Any     any                  `json:"any"`
	Plain   int
	Skipped string `json:"-"`
	private int
}

// Ensure that Decode's own decoding (decode) leaves a value exactly as
// encoding/json does, or hands the body to encoding/json: for thousands
// of bodies built at random from the fields of a struct (strings,
// booleans, numbers in and out of range, nulls, nested objects, arrays
// and maps, raw JSON, a []byte, an interface, keys that are no field's
// or in the wrong case), Decode's value and error are the old path's:
// checkFields, then json.Unmarshal. It also counts how often decode took
// a body whole, so that the test sees both paths run.
func TestDecode_FastSameAsEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	scalars := []string{`"x"`, `"caf\u00e9"`, `""`, `0`, `-3`, `127`, `128`, `65535`, `70000`, `1.5`, `-0.25`, `1e3`, `3e38`, `4e38`, `true`, `false`, `null`, `"AAEC"`}
	var value func(depth int) string
	value = func(depth int) string {
		switch k := r.IntN(10); {
		case depth > 2 || k < 6:
			return scalars[r.IntN(len(scalars))]
		case k < 8:
			return object(r, depth+1, value)
		default:
			var parts []string
			for range r.IntN(3) {
				parts = append(parts, value(depth+1))
			}
			return "[" + strings.Join(parts, ", ") + "]"
		}
	}
	keys := []string{"mandate", "agent", "input", "max_cost", "flag", "small", "count", "ratio", "inner", "list", "bytes", "keyed", "any", "Plain", "depth", "name", "tags", "Mandate", "unknown", "private", "Skipped"}
	fast := 0
	for i := range 20000 {
		var parts []string
		for range r.IntN(6) {
			parts = append(parts, fmt.Sprintf("%q: %s", keys[r.IntN(len(keys))], value(0)))
		}
		b := []byte("{" + strings.Join(parts, ",") + "}")
		p := canonParser{in: b}
		root, perr := p.parse()
		if perr != nil {
			p.release()
			continue // duplicate keys: refused before either path
		}
		var probe, got, want fastBody
		if p.decode(&root, reflect.ValueOf(&probe).Elem()) {
			fast++
		}
		gerr := Decode(b, &got)
		werr := p.checkFields(&root, reflect.TypeOf(&want))
		if werr == nil {
			werr = json.Unmarshal(b, &want)
		}
		p.release()
		if fmt.Sprint(gerr) != fmt.Sprint(werr) || !reflect.DeepEqual(got, want) {
			t.Fatalf("body %d %s:\n Decode  %+v, %v\n old way %+v, %v", i, b, got, gerr, want, werr)
		}
	}
	if fast < 1000 {
		t.Errorf("decode took %d bodies of 20000 whole: the test does not exercise it", fast)
	}
}

func object(r *rand.Rand, depth int, value func(int) string) string {
	keys := []string{"depth", "name", "tags", "a", "b", "mandate"}
	var parts []string
	for range r.IntN(3) {
		parts = append(parts, fmt.Sprintf("%q:%s", keys[r.IntN(len(keys))], value(depth)))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// Ensure that a struct whose fields share a json name (a tagged field and
// an untagged one of the same name, where encoding/json sets the tagged
// one) is decoded as encoding/json decodes it, not by the tree.
func TestDecode_SharedFieldNameLeftToEncodingJSON(t *testing.T) {
	type shared struct {
		Y string `json:"X"`
		X string
		C int `json:"c"`
	}
	b := []byte(`{"X":"v","c":2}`)
	var got, want shared
	if err := Decode(b, &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("Decode = %+v, encoding/json = %+v", got, want)
	}
}
