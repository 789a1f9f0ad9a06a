package webui

// routePages registers the pages past sign-in.
func (c *Console) routePages() {}
