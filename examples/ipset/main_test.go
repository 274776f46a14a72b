package main

import (
	"testing"

	"github.com/ipvsplane/ipvsplane/internal/testutil"
)

func TestMain(m *testing.M) { testutil.MainWithLeakCheck(m) }
