package web

import "net/http"

// CodeWriter remembers the status code of a response.
type CodeWriter struct {
	http.ResponseWriter
	// Code is the status written (0: none yet).
	Code int
}

func (w *CodeWriter) WriteHeader(code int) {
	if w.Code == 0 {
		w.Code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *CodeWriter) Write(b []byte) (int, error) {
	if w.Code == 0 {
		w.Code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush lets streaming handlers (the MCP server) flush through the wrapper.
func (w *CodeWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the underlying writer.
func (w *CodeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
