package appliance

import "holon.dev/holon/webui"

// The console's upload form posts the file as multipart/form-data to
// consoleUploadPath; the page streams the file part into POST /v0/files
// (Backend.Send), whose limits apply as it reads. The request body may
// hold the file and consoleUploadOverhead more: the form's token and the
// parts' headers.
const (
	consoleUploadPath     = webui.Prefix + "/files"
	consoleUploadOverhead = 64 << 10
)
