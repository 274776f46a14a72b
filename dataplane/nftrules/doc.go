// Package nftrules compiles a node's settings ([model.Node]) into the
// packet rules of kube-proxy's IPVS mode, as one nftables table per family
// that ipvsplane owns ([TableName]), and writes, checks and deletes those
// tables through google/nftables.
//
// The rules match the KUBE-* ipsets through the kernel's xt set match, so
// they do not grow with the number of services: the tables change only
// with the node's settings. [Render] prints them in an nft-like syntax
// (golden-tested, and what a plan compares); [Write] replaces each table
// in one transaction, ip first; [Current] tells, by a digest the first rule
// carries, whether the kernel holds them as they are now.
package nftrules
