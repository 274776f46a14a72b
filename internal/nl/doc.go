// Package nl is the netlink core the kernel packages (ipvs, ipset,
// conntrack, dummy) share: a connection in a network namespace whose
// exchanges follow a context, a batched exchange that collects each
// request's own outcome, the kernel's error replies decoded once, an
// allocation-free attribute writer and reader, and nfnetlink framing.
//
// Replies are read as raw datagrams rather than through
// netlink.Conn.Receive, which stops at the first error in a datagram and
// folds multi-part replies together: a batch of many requests needs every
// request's outcome, told apart by sequence number.
package nl
