package conntrack

import (
	"cmp"
	"slices"
)

// sortFlows orders flows by their original tuple, for comparisons.
func sortFlows(fs []Flow) {
	slices.SortFunc(fs, func(a, b Flow) int {
		return cmp.Or(
			a.Orig.Src.Compare(b.Orig.Src),
			a.Orig.Dst.Compare(b.Orig.Dst),
			cmp.Compare(a.Orig.Protocol, b.Orig.Protocol),
			cmp.Compare(a.Orig.SrcPort, b.Orig.SrcPort),
			cmp.Compare(a.Orig.DstPort, b.Orig.DstPort),
		)
	})
}
