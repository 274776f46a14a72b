// Command trafficclient is the load of the cluster's takeover test
// (daemon/e2e/cluster, TestTakeoverFromKubeProxy): from inside a pod it
// holds connections to a Service's echo port, each echoing a line a few
// times a second, and opens new HTTP connections to the Service one after
// the other, each after a fresh name lookup through the cluster DNS. It
// does in one process what a shell loop of curl does with a process per
// request, which in an emulated node costs more than the request: the
// node's slowness must not pass for a failed request.
//
// It reports through files in -dir, which the test reads with kubectl exec:
// counts ("<ok> <failed>", rewritten after each request), fails (one line
// per failed request: the time, the error and how far it got), open-<i>
// (connection i is open), resets (a held connection that broke, or could
// not open), held (each held connection's echoes at the end). Creating
// <dir>/stop ends the load; <dir>/done says it ended. The process then
// stays, so that the files can still be read.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	echo := flag.String("echo", "echo:7000", "host:port of the echo server whose connections are held")
	url := flag.String("url", "http://echo/hostname", "the URL requested again and again, each time on a new connection")
	hold := flag.Int("hold", 4, "connections held open to -echo")
	pause := flag.Duration("pause", 50*time.Millisecond, "wait after each request")
	timeout := flag.Duration("timeout", 2*time.Second, "limit of one request, name lookup included")
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
	c.requests(*url, *timeout, *pause)
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

// write replaces the file name with text.
func (c *client) write(name, text string) {
	if err := os.WriteFile(filepath.Join(c.dir, name), []byte(text), 0o644); err != nil {
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
	c.appendLine("held", "connection %d held, %d echoes", i, n)
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
// stopped, counting the requests that succeeded and failed.
func (c *client) requests(url string, timeout, pause time.Duration) {
	dialer := &net.Dialer{Resolver: &net.Resolver{PreferGo: true}}
	httpClient := &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext, DisableKeepAlives: true}}
	ok, failed := 0, 0
	for !c.stopped() {
		if err := get(httpClient, url, timeout); err != nil {
			failed++
			c.appendLine("fails", "%s request failed: %v", now(), err)
		} else {
			ok++
		}
		c.write("counts", fmt.Sprintf("%d %d\n", ok, failed))
		time.Sleep(pause)
	}
}

// get requests url within timeout; its error says how long the name
// lookup and the connection took, or that they did not finish.
func get(httpClient *http.Client, url string, timeout time.Duration) error {
	start := time.Now()
	// The dial may still run when the timeout ends the request.
	var lookup, connect atomic.Int64
	trace := &httptrace.ClientTrace{
		DNSDone:     func(httptrace.DNSDoneInfo) { lookup.Store(int64(time.Since(start))) },
		ConnectDone: func(string, string, error) { connect.Store(int64(time.Since(start))) },
	}
	ctx, cancel := context.WithTimeout(httptrace.WithClientTrace(context.Background(), trace), timeout)
	defer cancel()
	err := fetch(ctx, httpClient, url)
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w (after %v: name lookup %s, connect %s)", err, time.Since(start).Round(time.Millisecond), took(lookup.Load()), took(connect.Load()))
}

func fetch(ctx context.Context, httpClient *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := httpClient.Do(req)
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

func took(d int64) string {
	if d == 0 {
		return "not done"
	}
	return time.Duration(d).Round(time.Millisecond).String()
}
