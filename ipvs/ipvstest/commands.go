package ipvstest

import (
	"github.com/ipvsplane/ipvsplane/internal/nl"
	"github.com/ipvsplane/ipvsplane/ipvs"
	"golang.org/x/sys/unix"
)

// info is what IPVS_CMD_GET_INFO answers: the version every kernel since
// 2.6.28 reports, and the default connection table size (conn_tab_bits 12).
func info() ipvs.Info {
	return ipvs.Info{Version: ipvs.Version{Major: 1, Minor: 2, Patch: 1}, ConnTableSize: 4096}
}

// do runs a command that is not a dump and returns the reply of a get;
// the kernel's lock is held.
func (k *Kernel) do(cmd uint8, r request) (*genlMessage, unix.Errno) {
	switch cmd {
	case cmdGetInfo:
		return reply(cmdSetInfo, func(w *nl.Writer) { encodeInfo(w, info()) }), 0
	case cmdGetConfig:
		return reply(cmdSetConfig, func(w *nl.Writer) { encodeTimeouts(w, k.timeouts) }), 0
	case cmdGetService:
		if r.svc == nil {
			return nil, unix.EINVAL
		}
		vs := k.find(*r.svc)
		if vs == nil {
			return nil, unix.ESRCH
		}
		return reply(cmdNewService, func(w *nl.Writer) { encodeService(w, vs.svc) }), 0
	case cmdNewService, cmdSetService, cmdDelService, cmdNewDest, cmdSetDest, cmdDelDest, cmdSetConfig, cmdZero, cmdFlush:
		return nil, k.setService(cmd, r)
	}
	return nil, unix.EOPNOTSUPP
}

// dumpEntries lists what a dump returns: every service, or the
// destinations of one. A dump of a missing service's destinations is
// empty, as ip_vs_genl_dump_dests leaves it.
func (k *Kernel) dumpEntries(cmd uint8, r request) ([]genlMessage, unix.Errno) {
	var out []genlMessage
	switch cmd {
	case cmdGetService:
		for _, vs := range k.services {
			out = append(out, *reply(cmdNewService, func(w *nl.Writer) { encodeService(w, vs.svc) }))
		}
	case cmdGetDest:
		if r.svc == nil {
			return nil, unix.EINVAL
		}
		if vs := k.find(*r.svc); vs != nil {
			for _, d := range vs.dests {
				out = append(out, *reply(cmdNewDest, func(w *nl.Writer) { encodeDest(w, d) }))
			}
		}
	default:
		return nil, unix.EOPNOTSUPP
	}
	return out, 0
}

// genlMessage is a generic netlink message: its command and its
// attributes, after the header.
type genlMessage struct {
	cmd  uint8
	data []byte
}

// reply builds a generic netlink message of the command with the
// attributes fill writes.
func reply(cmd uint8, fill func(w *nl.Writer)) *genlMessage {
	var w nl.Writer
	fill(&w)
	return &genlMessage{cmd: cmd, data: w.B}
}
