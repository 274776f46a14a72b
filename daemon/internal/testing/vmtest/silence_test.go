package main

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// A guest whose heartbeat stops gets an NMI through qemu's QMP socket
// once its silence limit passes, and is killed if it does not end; one
// that beats, and one that ends, get neither.
func TestWatchHeartbeat(t *testing.T) {
	for _, tt := range []struct {
		name       string
		beats      bool // the heartbeat file keeps growing
		endsOnNMI  bool // the guest ends when the NMI comes
		wantSilent bool
		wantKilled bool
	}{
		{"beats", true, false, false, false},
		{"silent, panics on the NMI", false, true, true, false},
		{"silent, ignores the NMI", false, false, true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			heartbeat, socket := filepath.Join(dir, "heartbeat"), filepath.Join(dir, "qmp")
			exited := make(chan struct{})
			commands := fakeQMP(t, socket, func() {
				if tt.endsOnNMI {
					close(exited)
				}
			})
			stopBeating := make(chan struct{})
			if tt.beats {
				go beat(t, heartbeat, stopBeating)
			}
			killed := false
			done := make(chan bool)
			go func() {
				done <- watchHeartbeat(heartbeat, socket, heartbeatLimits{boot: 2 * time.Second, silence: 2 * time.Second, nmiGrace: time.Second}, exited, func() { killed = true })
			}()
			var silent bool
			select {
			case silent = <-done:
			case <-time.After(6 * time.Second):
				close(stopBeating)
				close(exited)
				silent = <-done
			}
			if silent != tt.wantSilent || killed != tt.wantKilled {
				t.Errorf("silent %v, killed %v; want %v, %v", silent, killed, tt.wantSilent, tt.wantKilled)
			}
			want := []string{"qmp_capabilities", "inject-nmi"}
			if !tt.wantSilent {
				want = nil
			}
			if got := commands(); !slices.Equal(got, want) {
				t.Errorf("qemu was sent %q, want %q", got, want)
			}
		})
	}
}

// beat appends a line to file every half second until stop is closed.
func beat(t *testing.T, file string, stop <-chan struct{}) {
	f, err := os.Create(file)
	if err != nil {
		t.Error(err)
		return
	}
	defer f.Close()
	for {
		select {
		case <-stop:
			return
		case <-time.After(500 * time.Millisecond):
			_, _ = f.WriteString("\n")
		}
	}
}

// fakeQMP serves qemu's QMP protocol on socket, as far as vmtest speaks
// it, calling onNMI on inject-nmi; commands returns what it was sent.
func fakeQMP(t *testing.T, socket string, onNMI func()) (commands func() []string) {
	l, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	got := make(chan []string, 1)
	got <- nil
	go func() {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = conn.Write([]byte(`{"QMP": {"version": {}, "capabilities": []}}` + "\n"))
		r := bufio.NewScanner(conn)
		for r.Scan() {
			var c struct{ Execute string }
			if err := json.Unmarshal(r.Bytes(), &c); err != nil {
				t.Errorf("vmtest sent %q: %v", r.Text(), err)
				return
			}
			got <- append(<-got, c.Execute)
			// An event first, as qemu may send one before its answer.
			_, _ = conn.Write([]byte(`{"event": "NMI_SOMETHING", "timestamp": {}}` + "\n" + `{"return": {}}` + "\n"))
			if c.Execute == "inject-nmi" {
				onNMI()
			}
		}
	}()
	return func() []string {
		c := <-got
		got <- c
		return c
	}
}
