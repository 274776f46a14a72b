// Package failing is testfailures' fixture: go test -json runs it with a
// short -timeout, and testfailures summarizes what it printed.
package failing

import (
	"testing"
	"time"
)

func TestGood(t *testing.T) {
	t.Log("a line of a test that passed")
}

func TestBad(t *testing.T) {
	t.Log("first complaint")
	t.Log("second complaint")
	t.Run("sub", func(t *testing.T) {
		t.Error("the subtest's complaint")
	})
}

func TestChatty(t *testing.T) {
	for i := range 10 {
		t.Logf("progress %d", i)
	}
	t.Error("what went wrong, after the progress")
}

func TestHangs(t *testing.T) {
	t.Log("about to wait for ever")
	time.Sleep(time.Hour)
}
