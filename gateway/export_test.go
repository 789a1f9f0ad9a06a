package gateway

// ParseStoredMandate exposes the reader of mandates the gateway stored
// itself (derived sub-mandates, which name a parent) to black-box tests.
var ParseStoredMandate = parseStoredMandate
