package holon

import _ "embed"

//go:embed README.md
var readme string

// README is the repository's README.md, the manual's front door, which the
// console serves beside the manual's pages.
func README() string { return readme }
