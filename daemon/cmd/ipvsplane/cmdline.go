package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// noArgsSuggest refuses arguments, as cobra.NoArgs does, and names the
// nearest command to one that looks like a misspelt command.
func noArgsSuggest(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	var names []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	if near := nearest(args[0], names); near != "" {
		msg += fmt.Sprintf("; did you mean %q?", near)
	}
	return errors.New(msg)
}

// flagError explains an unknown flag: the commands that have it when
// this one does not read it, else the nearest of this command's flags.
func flagError(cmd *cobra.Command, err error) error {
	ne, ok := errors.AsType[*pflag.NotExistError](err)
	if !ok || ne.GetSpecifiedShortnames() != "" {
		return err
	}
	name := ne.GetSpecifiedName()
	if owners := commandsWithFlag(cmd.Root(), name); len(owners) > 0 {
		return fmt.Errorf("--%s: %s does not read it; it is a flag of %s", name, cmd.CommandPath(), strings.Join(owners, ", "))
	}
	if near := nearestFlag(cmd.Flags(), name); near != "" {
		return fmt.Errorf("%w; did you mean --%s?", err, near)
	}
	return err
}

// commandsWithFlag lists the commands below root that have the flag name
// (root's own flags are run's).
func commandsWithFlag(root *cobra.Command, name string) []string {
	var out []string
	for _, c := range root.Commands() {
		if c.Flags().Lookup(name) != nil || c.PersistentFlags().Lookup(name) != nil {
			out = append(out, c.CommandPath())
		}
	}
	return out
}

// nearestFlag is the visible flag of fs nearest to name (see nearest), or
// "".
func nearestFlag(fs *pflag.FlagSet, name string) string {
	var names []string
	fs.VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			names = append(names, f.Name)
		}
	})
	return nearest(name, names)
}

// nearest is the first of names at the least edit distance from name, if
// that distance is at most a third of name's length, and at least 2; or
// "".
func nearest(name string, names []string) string {
	best, bestDist := "", max(2, len(name)/3)+1
	for _, n := range names {
		if d := editDistance(name, n); d < bestDist {
			best, bestDist = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b: the fewest
// insertions, deletions and substitutions of bytes that make one the
// other.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
