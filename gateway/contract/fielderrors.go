package contract

import (
	"fmt"

	"holon.dev/holon"
)

// reservedErrorCodes are the codes the gateway itself uses; an agent cannot
// declare them (manifest.md §3).
var reservedErrorCodes = map[string]bool{
	holon.CodeInvalidOutput: true, holon.CodeAgentError: true, holon.CodeTimeout: true,
	holon.CodeRuntimeUnavailable: true, holon.CodeGatewayError: true, holon.CodeGatewayRestarted: true,
	holon.CodeFileNotFound: true, holon.CodeRejectedInput: true, holon.CodeInvalidUnits: true,
	holon.CodeInvalidQuote: true, holon.CodeStoreUnavailable: true,
}

// fieldErrors collects problems while a document is checked.
type fieldErrors []holon.FieldError

func (fe *fieldErrors) add(path, format string, args ...any) {
	*fe = append(*fe, holon.FieldError{Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (fe fieldErrors) err(code, what string) error {
	if len(fe) == 0 {
		return nil
	}
	msg := fmt.Sprintf("%s is invalid (%d problem", what, len(fe))
	if len(fe) > 1 {
		msg += "s"
	}
	return &holon.Error{Code: code, Msg: msg + ")", Fields: fe}
}

// join builds a child field path: join("pricing", "max") = "pricing.max".
func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

// index builds an element path: index("calls", 1) = "calls[1]".
func index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }
