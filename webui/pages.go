package webui

// routePages registers the pages past sign-in: one handler per page
// action, each in the file of its page.
func (c *Console) routePages() {
	m := c.mux
	m.Handle("GET "+Prefix+"/mandates", c.page(c.mandateList))
	m.Handle("GET "+Prefix+"/mandates/new", c.page(c.mandateNew))
	m.Handle("POST "+Prefix+"/mandates", c.page(c.mandateCreate))
	m.Handle("GET "+Prefix+"/mandates/{ns}/{name}", c.page(c.mandateView))
	m.Handle("POST "+Prefix+"/keys", c.page(c.keyCreate))
	m.Handle("POST "+Prefix+"/keys/{prefix}/revoke", c.page(c.keyRevoke))
	m.Handle("GET "+Prefix+"/approvals", c.page(c.approvalList))
	m.Handle("GET "+Prefix+"/approvals/{id}", c.page(c.approvalView))
	m.Handle("POST "+Prefix+"/approvals/{id}", c.page(c.approvalDecide))
	m.Handle("GET "+Prefix+"/spend", c.page(c.spend))
	m.Handle("GET "+Prefix+"/spend.csv", c.page(c.spendCSV))
	m.Handle("GET "+Prefix+"/receipts", c.page(c.receiptList))
	m.Handle("GET "+Prefix+"/receipts.csv", c.page(c.receiptCSV))
	m.Handle("GET "+Prefix+"/receipts/{id}", c.page(c.receiptView))
	c.routeRefunds()
	m.Handle("GET "+Prefix+"/agents", c.page(c.catalogue))
	m.Handle("GET "+Prefix+"/agents/{ns}/{name}", c.page(c.agentView))
	m.Handle("POST "+Prefix+"/agents/{ns}/{name}/try", c.page(c.agentTry))
	m.Handle("GET "+Prefix+"/operator", c.page(c.operator))
	m.Handle("POST "+Prefix+"/operator/{action}", c.page(c.operatorAction))
	c.routeConnect()
	m.Handle("GET "+Prefix+"/files", c.page(c.fileList))
	m.Handle("POST "+Prefix+"/files", c.upload(c.fileUpload))
	c.routeAuthors()
	c.routeAlerts()
}
