package everyop_test

import (
	"fmt"

	"github.com/ipvsplane/ipvsplane/internal/planner/everyop"
)

// A switch over the operations is tested with every kind.
func Example() {
	fmt.Println(len(everyop.Ops()), "kinds of operation")
	// Output: 14 kinds of operation
}
