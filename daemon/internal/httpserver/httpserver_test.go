package httpserver

import (
	"errors"
	"net"
	"testing"
	"time"
)

// A limited listener takes no more than its bound until a connection
// closes, and its Close ends an Accept that waits.
func TestLimit(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := Limit(inner, 2)
	accepted := make(chan net.Conn, 3)
	acceptErr := make(chan error, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				acceptErr <- err
				return
			}
			accepted <- c
		}
	}()
	for range 3 {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	first := <-accepted
	<-accepted
	select {
	case <-accepted:
		t.Fatal("a third connection was accepted while two were open")
	case <-time.After(100 * time.Millisecond):
	}
	first.Close()
	first.Close() // a second close gives back nothing more
	select {
	case c := <-accepted:
		defer c.Close() // both slots taken again: Close ends a wait for one
	case <-time.After(5 * time.Second):
		t.Fatal("the third connection was not accepted once one closed")
	}
	ln.Close()
	select {
	case err := <-acceptErr:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("accept after close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("accept still waits after close")
	}
}
