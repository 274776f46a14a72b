// Package nftrulestest gives code that programs nftables through
// google/nftables, package nftrules first, a real *nftables.Conn whose
// socket reaches an in-memory nftables instead of the kernel's, so that
// writing, checking and deleting rules can be unit-tested without
// privileges or a network namespace.
//
// New makes a Kernel; Kernel.Dial returns a lasting Conn on it. Everything
// the Conn does goes through google/nftables' own encoder and decoder and
// its batch and acknowledgement handling: only the socket is fake,
// plugged in by google/nftables' own option for it (WithTestDial).
// Kernel.Transactions records each batch in nft's words with the errno
// that refused it; Kernel.Tables and Kernel.Dump show the ruleset; the
// Conn's List and Get methods read it back as from a kernel.
//
// # Why a fake kernel rather than a seam in nftrules
//
// nftrules and dataplane hand an *nftables.Conn around and call a dozen
// of its methods (AddTable, DelTable, AddChain, DelChain, FlushChain,
// AddRule, DelRule, Flush, ListTables, ListChains, GetRules); an interface
// of them in nftrules would be a second API to keep in step with
// google/nftables, and a fake behind it would not exercise the encoding,
// the batching or google/nftables' reading of acknowledgements and echoes,
// which is where a rule writer meets the kernel. So, as ipvstest and
// ipsettest do for their packages, the fake plays the kernel's side of the
// netlink conversation, and the code under test is the code that runs.
//
// # What the fake models
//
// It answers as net/netfilter/nfnetlink.c and nf_tables_api.c do:
//
//   - a batch is one transaction: every message is tried, even after one
//     fails; if all succeed it is committed, else nothing changes; each
//     refused message gets its errno and each other that asked for an
//     acknowledgement a zero, one datagram each; a committed batch's echoed
//     rules come first, packed several to a datagram as the kernel packs
//     notifications;
//   - tables by family and name: add of one that exists leaves it (EEXIST
//     with NLM_F_EXCL), delete takes everything in it, ENOENT if missing,
//     EAFNOSUPPORT for a family nftables lacks; a delete without family or
//     name flushes the ruleset;
//   - chains: ENOENT without their table; base chains with a type
//     registered for the family (filter everywhere, nat in ip, ip6 and
//     inet, route in ip and ip6; Kernel.UnregisterChainType removes one,
//     as on a kernel built without it) at a hook the type allows (no nat
//     at forward, route only at output; else EOPNOTSUPP), policy accept
//     unless given; delete of a chain another chain's rule jumps to is
//     EBUSY, and takes the chain's own rules with it;
//   - rules: appended, inserted, placed by position or replaced by
//     handle; a jump or goto to a chain that does not exist is ENOENT,
//     as is an xt set match naming a set that Options.SetExists says does
//     not exist, and a jump to a base chain EOPNOTSUPP; delete by handle (ENOENT if none), flush of
//     a chain or a table; handles numbered per table as the kernel does;
//   - dumps of tables, chains and rules by family, table and chain, and
//     gets of one table or chain (ENOENT if missing);
//   - the ruleset's generation (NFT_MSG_GETGEN, Kernel.Generation), moved
//     on by each committed batch and by no refused one.
//
// Rules are dumped back with the expressions they were written with;
// google/nftables reads them back the same as from Linux 6.18 for every
// expression package nftrules writes (TestScenarioMatchesKernel).
//
// # What it does not model
//
// Packets: expressions are kept, not evaluated, and not checked beyond
// their jumps and, with Options.SetExists, their set matches. Sets, maps, objects and
// flowtables; table flags (dormant, owner); chain renames and updates
// other than a hook move; jump loops (ELOOP); the kernel's limits;
// privileges and module loading; events to listeners other than the
// requester. Several namespaces: each Kernel is one.
package nftrulestest
