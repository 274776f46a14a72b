//go:build vmtest

package ipvs

import (
	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/mdlayher/netlink"
)

// GenlName is the IPVS generic netlink family's name.
const GenlName = genlName

// RawCreateRequests encodes the table's creation as this package would,
// for the floor measurement of BenchmarkCreate2000x4.
func RawCreateRequests(table []VirtualServer) []netlink.Message {
	var msgs []netlink.Message
	add := func(o op) {
		var w nl.Writer
		o.encode(&w)
		msgs = append(msgs, netlink.Message{
			Header: netlink.Header{Flags: netlink.Request | netlink.Acknowledge},
			Data:   append([]byte{o.command(), genlVersion, 0, 0}, w.B...),
		})
	}
	for _, v := range table {
		add(op{kind: opCreateService, svc: v.Service})
		for _, d := range v.Destinations {
			add(op{kind: opCreateDestination, svc: v.Service, dest: d})
		}
	}
	return msgs
}
