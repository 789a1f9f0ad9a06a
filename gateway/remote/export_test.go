package remote

// ForgetIdleConnections closes the runner's idle connections, as its HTTP
// transport does by itself moments after an agent closes them: a test that
// restarts an agent calls it to stand for those moments, instead of racing
// them.
func (r *MCPRunner) ForgetIdleConnections() { r.http.closeIdle() }
