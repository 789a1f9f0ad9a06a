// Package semver is Holon's version arithmetic: strict SemVer 2.0.0 versions
// (Version, ParseVersion) and npm-style ranges over them (Range, ParseRange,
// Highest, Range.Subset), as the manifest and mandate contracts use them
// (spec/manifest.md, spec/mandate.md).
//
// It is self-contained: it imports the standard library only, nothing of
// the project, and its errors are plain errors that callers wrap in their
// own codes.
package semver
