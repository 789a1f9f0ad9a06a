package canonical

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// This file is the strict reader of JSON that comes from outside: request
// bodies, call inputs and agents' answers. It is the parser of JSON, so what
// is checked here is exactly what the Idempotency-Key and approval paths
// hash.

// Error is a problem in a JSON input: what is wrong, and the byte offset
// where it is.
type Error struct {
	Offset int    // the byte offset of the problem in the input
	Msg    string // what is wrong, such as `duplicate key "a"`
}

// Error formats the problem as "message at byte offset".
func (e *Error) Error() string { return fmt.Sprintf("%s at byte %d", e.Msg, e.Offset) }

// Check checks that b is strict JSON, I-JSON (RFC 7493): one value in valid
// UTF-8, with no lone surrogate in a string, no duplicate key, no number
// outside the range of a double, and nothing after it. Any value that
// passes reads the same to every conforming decoder. The error is an *Error
// that names the problem and its byte offset.
func Check(b []byte) error {
	p := canonParser{in: b}
	defer p.release()
	_, err := p.parse()
	return err
}

// Value checks b as Check does and returns its value as encoding/json
// decodes it with UseNumber (the form JSON Schema validators take):
// map[string]any, []any, string, json.Number (the number as written),
// bool or nil. For any b that passes Check the value is the one
// encoding/json gives; Value only saves decoding b a second time.
func Value(b []byte) (any, error) {
	p := canonParser{in: b}
	defer p.release()
	root, err := p.parse()
	if err != nil {
		return nil, err
	}
	return p.valueOf(&root), nil
}

// valueOf is n as encoding/json decodes it with UseNumber.
func (p *canonParser) valueOf(n *canonNode) any {
	switch n.kind {
	case '[':
		a := make([]any, len(n.elems))
		for i := range n.elems {
			a[i] = p.valueOf(&n.elems[i])
		}
		return a
	case '{':
		m := make(map[string]any, len(n.members))
		for i := range n.members {
			m[n.members[i].key] = p.valueOf(&n.members[i].value)
		}
		return m
	}
	switch p.scalars[n.lo] {
	case '"':
		return n.text
	case 't':
		return true
	case 'f':
		return false
	case 'n':
		return nil
	default:
		return json.Number(n.text)
	}
}

// Decode decodes b, which must pass Check, into v, strictly: a field of v's
// structs matches only a key spelt exactly as its json name (encoding/json
// alone would match any case), and an unknown field is refused. A problem
// in b or in its field names is an *Error; one in the values (a string
// where v has a number) is the error of encoding/json.
func Decode(b []byte, v any) error {
	p := canonParser{in: b}
	defer p.release()
	root, err := p.parse()
	if err != nil {
		return err
	}
	// Into a zero value (as every body is decoded), decoded here, or left
	// zero again for encoding/json.
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && !rv.IsNil() && rv.Elem().IsZero() {
		if p.decode(&root, rv.Elem()) {
			return nil
		}
		rv.Elem().SetZero()
	}
	if err := p.checkFields(&root, reflect.TypeOf(v)); err != nil {
		return err
	}
	// Every object key b holds for a struct is now known to name one of
	// its fields exactly (a value decoded by its own UnmarshalJSON, or
	// into an interface, is checked by its own rules, as
	// DisallowUnknownFields would leave it): b is decoded as it is.
	return json.Unmarshal(b, v)
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	rawMessage      = reflect.TypeFor[json.RawMessage]()
	jsonNumber      = reflect.TypeFor[json.Number]()
)

// decode sets v to n as encoding/json would, for the values most bodies
// hold (structs of plain fields by their exact json names, strings,
// booleans, numbers, json.RawMessage, pointers, slices and maps of
// those): it reports false for anything else (a key no field has, a type
// with its own unmarshaling, an interface, a value of the wrong kind, a
// number out of range): Decode then sets v back to zero and decodes b by
// encoding/json, for its value and its error.
func (p *canonParser) decode(n *canonNode, v reflect.Value) bool {
	t := v.Type()
	if t == rawMessage {
		v.SetBytes(append(json.RawMessage(nil), p.in[n.start:n.end]...))
		return true
	}
	if t == jsonNumber || t.Kind() != reflect.Pointer && (reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler)) {
		return false // decoded by rules of their own
	}
	var first byte
	if n.kind == 's' {
		first = p.scalars[n.lo]
	}
	if first == 'n' { // null
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Map:
			v.SetZero()
		case reflect.Interface:
			return false
		}
		return true
	}
	switch t.Kind() {
	case reflect.Pointer:
		if t.Implements(jsonUnmarshaler) || t.Implements(textUnmarshaler) {
			return false
		}
		if v.IsNil() {
			v.Set(reflect.New(t.Elem()))
		}
		return p.decode(n, v.Elem())
	case reflect.String:
		if first != '"' {
			return false
		}
		v.SetString(n.text)
	case reflect.Bool:
		if first != 't' && first != 'f' {
			return false
		}
		v.SetBool(first == 't')
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if n.kind != 's' || first == '"' || first == 't' || first == 'f' {
			return false
		}
		x, err := strconv.ParseInt(n.text, 10, 64)
		if err != nil || v.OverflowInt(x) {
			return false
		}
		v.SetInt(x)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if n.kind != 's' || first == '"' || first == 't' || first == 'f' {
			return false
		}
		x, err := strconv.ParseUint(n.text, 10, 64)
		if err != nil || v.OverflowUint(x) {
			return false
		}
		v.SetUint(x)
	case reflect.Float32, reflect.Float64:
		if n.kind != 's' || first == '"' || first == 't' || first == 'f' {
			return false
		}
		x, err := strconv.ParseFloat(n.text, t.Bits())
		if err != nil {
			return false
		}
		v.SetFloat(x)
	case reflect.Struct:
		if n.kind != '{' {
			return false
		}
		f := plainFieldsOf(t)
		if f == nil {
			return false
		}
		for i := range n.members {
			m := &n.members[i]
			idx, ok := f[m.key]
			if !ok || !p.decode(&m.value, v.Field(idx)) {
				return false
			}
		}
	case reflect.Slice:
		if n.kind != '[' || t.Elem().Kind() == reflect.Uint8 {
			return false // a []byte is base64 to encoding/json
		}
		s := reflect.MakeSlice(t, len(n.elems), len(n.elems))
		for i := range n.elems {
			if !p.decode(&n.elems[i], s.Index(i)) {
				return false
			}
		}
		v.Set(s)
	case reflect.Map:
		if n.kind != '{' || t.Key().Kind() != reflect.String || reflect.PointerTo(t.Key()).Implements(textUnmarshaler) {
			return false
		}
		if v.IsNil() {
			v.Set(reflect.MakeMapWithSize(t, len(n.members)))
		}
		for i := range n.members {
			m := &n.members[i]
			e := reflect.New(t.Elem()).Elem()
			if !p.decode(&m.value, e) {
				return false
			}
			v.SetMapIndex(reflect.ValueOf(m.key).Convert(t.Key()), e)
		}
	default:
		return false
	}
	return true
}

// plainName reports whether a json name is letters, digits, '_' and '-'
// only (any such name is one encoding/json takes as it is written).
func plainName(name string) bool {
	for _, c := range name {
		if !(c == '_' || c == '-' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			return false
		}
	}
	return name != ""
}

// plainOf caches plainFieldsOf.
var plainOf sync.Map // reflect.Type -> map[string]int (nil: not plain)

// plainFieldsOf maps the json names of a struct's fields to their index,
// when every field is plain: exported or skipped, not embedded, with no
// ",string" option, its name plain and its own (nil otherwise: decode
// leaves the struct to encoding/json).
func plainFieldsOf(t reflect.Type) map[string]int {
	if f, ok := plainOf.Load(t); ok {
		return f.(map[string]int)
	}
	f := map[string]int{}
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if sf.Anonymous || strings.Contains(","+opts+",", ",string,") {
			f = nil
			break
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		if _, twice := f[name]; twice || !plainName(name) {
			// Names encoding/json resolves by rules of its own.
			f = nil
			break
		}
		f[name] = i
	}
	v, _ := plainOf.LoadOrStore(t, f)
	return v.(map[string]int)
}

// checkFields refuses, in the value n to be decoded into a t, any object
// key that is not the exact json name of a field of its struct.
func (p *canonParser) checkFields(n *canonNode, t reflect.Type) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
		return nil // decoded by its own rules, or anything goes (any)
	}
	switch {
	case n.kind == '{' && t.Kind() == reflect.Struct:
		fields := structFields(t)
		for i := range n.members {
			m := &n.members[i]
			ft, ok := fields[m.key]
			if !ok {
				for name := range fields {
					if strings.EqualFold(name, m.key) {
						return p.errorAt(m.at, "unknown field %q (field names are case-sensitive: %q)", m.key, name)
					}
				}
				return p.errorAt(m.at, "unknown field %q", m.key)
			}
			if err := p.checkFields(&m.value, ft); err != nil {
				return err
			}
		}
	case n.kind == '{' && t.Kind() == reflect.Map:
		for i := range n.members {
			if err := p.checkFields(&n.members[i].value, t.Elem()); err != nil {
				return err
			}
		}
	case n.kind == '[' && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
		for i := range n.elems {
			if err := p.checkFields(&n.elems[i], t.Elem()); err != nil {
				return err
			}
		}
	}
	return nil
}

// fieldsOf caches structFields: a struct's fields never change.
var fieldsOf sync.Map // reflect.Type -> map[string]reflect.Type

// structFields is the json names of a struct's fields and their types
// (jsonFields), shared: not to be changed.
func structFields(t reflect.Type) map[string]reflect.Type {
	if f, ok := fieldsOf.Load(t); ok {
		return f.(map[string]reflect.Type)
	}
	fields := map[string]reflect.Type{}
	jsonFields(t, fields)
	f, _ := fieldsOf.LoadOrStore(t, fields)
	return f.(map[string]reflect.Type)
}

// jsonFields adds the json names of a struct's fields and their types,
// those of embedded structs after the struct's own, as encoding/json
// promotes them.
func jsonFields(t reflect.Type, into map[string]reflect.Type) {
	var embedded []reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				embedded = append(embedded, ft)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, ok := into[name]; !ok {
			into[name] = f.Type
		}
	}
	for _, e := range embedded {
		jsonFields(e, into)
	}
}
