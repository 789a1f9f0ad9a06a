package web

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// ClientAddr is the address a request comes from: the connection's peer,
// or, behind a trusted proxy, the last X-Forwarded-For entry (the one the
// proxy appended; every earlier entry is whatever the client sent). An
// IPv6 address counts by its /64, which one client typically holds whole.
func ClientAddr(r *http.Request, trustProxy bool) string {
	host := r.RemoteAddr
	if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		host = h
	}
	if trustProxy {
		if vs := r.Header.Values("X-Forwarded-For"); len(vs) > 0 {
			last := vs[len(vs)-1]
			if i := strings.LastIndexByte(last, ','); i >= 0 {
				last = last[i+1:]
			}
			if last = strings.TrimSpace(last); last != "" {
				host = last
			}
		}
	}
	ip, err := netip.ParseAddr(strings.Trim(host, "[]"))
	if err != nil {
		return host
	}
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}
