// Command trafficclient is the load of the cluster's takeover test
// (daemon/e2e/cluster, TestTakeoverFromKubeProxy): from inside a pod it
// holds connections to a Service's echo port, each echoing a line a few
// times a second, and opens new HTTP connections to the Service one after
// the other, each after a fresh name lookup through the cluster DNS. It
// does in one process what a shell loop of curl does with a process per
// request, which in an emulated node costs more than the request: the
// node's slowness must not pass for a failed request. For the same reason
// a request fails on an error or a lost packet (see get), not on a wall
// clock; one that only took long is counted as slow.
//
// It reports through files in -dir, which the test reads with kubectl exec:
// counts ("<ok> <failed>", rewritten after each request), fails (one line
// per failed request: the time, the error and how far it got), latency
// (the requests' count, failed and slow ones, and times, at the end),
// open-<i> (connection i is open), resets (a held connection that broke,
// or could not open), held (each held connection's echoes and
// retransmitted segments at the end). Creating
// <dir>/stop ends the load; <dir>/done says it ended. The process then
// stays, so that the files can still be read.
package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	echo := flag.String("echo", "echo:7000", "host:port of the echo server whose connections are held")
	target := flag.String("url", "http://echo/hostname", "the URL requested again and again, each time on a new connection")
	hold := flag.Int("hold", 4, "connections held open to -echo")
	pause := flag.Duration("pause", 50*time.Millisecond, "wait after each request")
	timeout := flag.Duration("timeout", 15*time.Second, "limit of one request, name lookup included: beyond the resolver's second try and TCP's third SYN")
	slow := flag.Duration("slow", 2*time.Second, "a request that took longer is counted as slow")
	dir := flag.String("dir", "/tmp", "where the report files go")
	flag.Parse()
	c := &client{dir: *dir}
	var held sync.WaitGroup
	for i := 1; i <= *hold; i++ {
		held.Add(1)
		go func() {
			defer held.Done()
			c.holdEcho(i, *echo)
		}()
	}
	c.requests(*target, *timeout, *slow, *pause)
	held.Wait()
	c.write("done", "")
	for {
		time.Sleep(time.Hour)
	}
}

// client writes the report files; mu orders the appends of its goroutines.
type client struct {
	dir string
	mu  sync.Mutex
}

func (c *client) stopped() bool {
	_, err := os.Stat(filepath.Join(c.dir, "stop"))
	return err == nil
}

// write replaces the file name with text, through a rename, so that the
// test never reads it half written.
func (c *client) write(name, text string) {
	path := filepath.Join(c.dir, name)
	if err := os.WriteFile(path+".new", []byte(text), 0o644); err != nil {
		log.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		log.Fatal(err)
	}
}

// appendLine adds a line to the file name.
func (c *client) appendLine(name, format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, err := os.OpenFile(filepath.Join(c.dir, name), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		_, err = fmt.Fprintf(f, format+"\n", args...)
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		log.Fatal(err)
	}
}

func now() string { return fmt.Sprintf("%.6f", float64(time.Now().UnixMicro())/1e6) }

// holdEcho opens connection i to addr (retrying for ten seconds while the
// Service comes up) and echoes a numbered line every 200 ms until stopped;
// an echo not back within 5 s, or a different one, breaks the connection.
func (c *client) holdEcho(i int, addr string) {
	var conn net.Conn
	var err error
	for try := 0; try < 20; try++ {
		if conn, err = net.DialTimeout("tcp", addr, 2*time.Second); err == nil {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err != nil {
		c.appendLine("resets", "connection %d open failed: %v", i, err)
		return
	}
	defer conn.Close()
	c.write(fmt.Sprintf("open-%d", i), "")
	buf := make([]byte, 64)
	n := 0
	for ; !c.stopped(); n++ {
		line := fmt.Sprintf("ping %d\n", n)
		got, err := roundTrip(conn, line, buf)
		if err != nil || got != line {
			c.appendLine("resets", "%s connection %d broke after %d echoes: %q %v", now(), i, n, got, err)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	retransmitted := "retransmitted segments unknown"
	if count, err := retransmissions(conn); err != nil {
		retransmitted += ": " + err.Error()
	} else {
		retransmitted = fmt.Sprintf("%d segment(s) retransmitted", count)
	}
	c.appendLine("held", "connection %d held, %d echoes, %s", i, n, retransmitted)
}

// roundTrip writes line and reads one line back.
func roundTrip(conn net.Conn, line string, buf []byte) (string, error) {
	if err := conn.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return "", err
	}
	if _, err := io.WriteString(conn, line); err != nil {
		return "", err
	}
	var got strings.Builder
	for !strings.HasSuffix(got.String(), "\n") {
		n, err := conn.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			return got.String(), err
		}
	}
	return got.String(), nil
}

// requests gets url on a new connection, after a new name lookup, until
// stopped, counting the requests that succeeded, failed, and were slow.
func (c *client) requests(target string, timeout, slow, pause time.Duration) {
	u, err := url.Parse(target)
	if err != nil {
		log.Fatal(err)
	}
	var stats requestStats
	for !c.stopped() {
		took, err := get(u, timeout)
		switch {
		case err != nil:
			stats.failed++
			c.appendLine("fails", "%s request failed: %v", now(), err)
		case took > slow:
			stats.slow++
		}
		stats.took = append(stats.took, took)
		c.write("counts", fmt.Sprintf("%d %d\n", len(stats.took)-stats.failed, stats.failed))
		time.Sleep(pause)
	}
	c.write("latency", stats.String())
}

// requestStats are the requests made so far.
type requestStats struct {
	took         []time.Duration
	failed, slow int
}

func (s requestStats) String() string {
	if len(s.took) == 0 {
		return "no requests\n"
	}
	sorted := slices.Sorted(slices.Values(s.took))
	at := func(q float64) time.Duration { return sorted[int(q*float64(len(sorted)-1))].Round(time.Millisecond) }
	return fmt.Sprintf("%d requests: %d failed, %d slow; took p50 %v, p99 %v, max %v\n",
		len(sorted), s.failed, s.slow, at(0.5), at(0.99), at(1))
}

// dnsTimeout is the Go resolver's wait for an answer before it asks again
// (resolv.conf's default; kubelet's sets no other): a lookup that took
// longer had a query or its answer lost.
const dnsTimeout = 5 * time.Second

// get requests u within timeout on a connection of its own, after a name
// lookup, and returns how long that took. A request fails when it errs
// (refused, reset, a bad status, no answer in time) or when a packet of
// it was lost: a name lookup that outlasted the resolver's first wait, or
// a retransmission on its connection (the kernel's count). Under emulation
// a node can stall for seconds without losing a packet; such a request is
// slow, not failed. The error says how far the request got.
func get(u *url.URL, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var lookup, connect time.Duration
	failed := func(err error) (time.Duration, error) {
		took := time.Since(start)
		return took, fmt.Errorf("%w (after %v: name lookup %s, connect %s)", err, took.Round(time.Millisecond), done(lookup), done(connect))
	}
	resolver := &net.Resolver{PreferGo: true}
	addrs, err := resolver.LookupIPAddr(ctx, u.Hostname())
	lookup = time.Since(start)
	switch {
	case err != nil:
		return failed(err)
	case lookup > dnsTimeout:
		return failed(fmt.Errorf("lookup %s outlasted the resolver's first wait of %v: a query or its answer was lost", u.Hostname(), dnsTimeout))
	}
	port := u.Port()
	if port == "" {
		port = "80"
	}
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, "tcp", net.JoinHostPort(addrs[0].String(), port))
	connect = time.Since(start)
	if err != nil {
		return failed(err)
	}
	defer conn.Close()
	if err := fetch(ctx, conn, u); err != nil {
		return failed(err)
	}
	if n, err := retransmissions(conn); err != nil || n > 0 {
		return failed(cmp.Or(err, fmt.Errorf("connection to %s: %d segment(s) retransmitted: a packet was lost", conn.RemoteAddr(), n)))
	}
	return time.Since(start), nil
}

// fetch sends a GET for u on conn and reads the whole answer, which must
// be 200 OK.
func fetch(ctx context.Context, conn net.Conn, u *url.URL) error {
	deadline, _ := ctx.Deadline()
	if err := conn.SetDeadline(deadline); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	req.Close = true
	if err := req.Write(conn); err != nil {
		return err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %s", resp.Status)
	}
	return nil
}

// retransmissions is the kernel's count of the connection's retransmitted
// segments, its SYN's included.
func retransmissions(conn net.Conn) (uint32, error) {
	raw, err := conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		return 0, err
	}
	var info *unix.TCPInfo
	var infoErr error
	if err := raw.Control(func(fd uintptr) { info, infoErr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }); err != nil {
		return 0, err
	}
	if infoErr != nil {
		return 0, infoErr
	}
	return info.Total_retrans, nil
}

func done(d time.Duration) string {
	if d == 0 {
		return "not done"
	}
	return d.Round(time.Millisecond).String()
}
