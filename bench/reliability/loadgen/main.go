// loadgen: open-loop HTTPS load on gpu-admission with Go's own net/http client, the client
// kube-apiserver calls webhooks with: HTTP/1.1 keep-alive (the server offers no h2), 25 idle
// connections per host (client-go's transport cache), a context deadline per call (the webhook's
// timeoutSeconds) that abandons the call and closes its connection when it passes.
//
// Calls are made at -rate per second for -duration, on schedule whatever the answers (open loop),
// each on its own goroutine. One line per call on stdout:
//
//	due_ns lag_ns latency_ns status outcome allowed
//
// due_ns: when the call was due, from -start (unix ns); lag_ns: how late it was made; latency_ns:
// from the call to its answer or failure; outcome: ok, shed (503), timeout, http-N, bad-answer,
// conn (a connection-level failure before an answer; with -retry, retried once first).
// Standard library only (no module downloads): go build -o loadgen .
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

type call struct {
	path string
	body []byte
}

func main() {
	ports := flag.String("ports", "", "comma-separated ports on 127.0.0.1 (a new connection picks one at random)")
	caFile := flag.String("ca", "", "CA bundle that signed the serving certificate")
	bodies := flag.String("bodies", "", "file of calls: a path line, then a JSON body line with UID where the uid goes; repeated")
	rate := flag.Float64("rate", 100, "calls per second")
	duration := flag.Duration("duration", 10*time.Second, "how long to make calls")
	start := flag.Int64("start", 0, "unix ns of the first call (0: now)")
	offset := flag.Int("offset", 0, "index of this generator among -of generators (interleaved schedules)")
	of := flag.Int("of", 1, "number of generators sharing -rate")
	timeout := flag.Duration("timeout", 3*time.Second, "per-call deadline (timeoutSeconds)")
	idle := flag.Int("idle", 25, "idle connections kept per host")
	retry := flag.Bool("retry", false, "retry a connection-level failure once, on a new connection")
	concurrency := flag.Int("concurrency", 0, "closed loop instead: this many calls in flight, back to back")
	flag.Parse()

	pem, err := os.ReadFile(*caFile)
	check(err)
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		check(errors.New("no certificate in -ca"))
	}
	calls := readCalls(*bodies)
	portList := strings.Split(*ports, ",")
	transport := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12},
		MaxIdleConnsPerHost: *idle,
		MaxIdleConns:        *idle * len(portList),
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
		DisableCompression:  true,
	}
	client := &http.Client{Transport: transport}
	// a fresh client for retries: a retry must not reuse a pooled connection
	fresh := &http.Client{Transport: &http.Transport{TLSClientConfig: transport.TLSClientConfig, DisableKeepAlives: true}}

	t0 := time.Now()
	if *start > 0 {
		t0 = time.Unix(0, *start)
	}
	n := int(*rate * duration.Seconds())
	out := bufio.NewWriterSize(os.Stdout, 1<<20)
	var mu sync.Mutex
	var wg sync.WaitGroup
	if *concurrency > 0 { // capacity: back to back on `concurrency` goroutines until the duration is up
		end := t0.Add(*duration)
		var counter int64
		for g := 0; g < *concurrency; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(end) {
					mu.Lock()
					counter++
					i := counter
					mu.Unlock()
					c := calls[int(i)%len(calls)]
					uid := fmt.Sprintf("c%d", i)
					body := bytes.Replace(c.body, []byte(`"uid":"UID"`), []byte(`"uid":"`+uid+`"`), 1)
					began := time.Now()
					ctx, cancel := context.WithTimeout(context.Background(), *timeout)
					status, outcome, allowed := do(ctx, client, "https://127.0.0.1:"+portList[0]+c.path, body, uid)
					cancel()
					mu.Lock()
					fmt.Fprintf(out, "%d 0 %d %d %s %t\n", began.Sub(t0).Nanoseconds(), time.Since(began).Nanoseconds(),
						status, outcome, allowed)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		check(out.Flush())
		return
	}
	step := time.Duration(float64(time.Second) / *rate)
	for i := *offset; i < n; i += *of {
		due := t0.Add(time.Duration(i) * step)
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		wg.Add(1)
		go func(i int, due time.Time) {
			defer wg.Done()
			c := calls[i%len(calls)]
			uid := fmt.Sprintf("g%d", i)
			body := bytes.Replace(c.body, []byte(`"uid":"UID"`), []byte(`"uid":"`+uid+`"`), 1)
			port := portList[rand.Intn(len(portList))]
			url := "https://127.0.0.1:" + port + c.path
			began := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), *timeout)
			defer cancel()
			status, outcome, allowed := do(ctx, client, url, body, uid)
			if outcome == "conn" && *retry && ctx.Err() == nil {
				port = portList[rand.Intn(len(portList))]
				status, outcome, allowed = do(ctx, fresh, "https://127.0.0.1:"+port+c.path, body, uid)
				outcome = "retried-" + outcome
			}
			latency := time.Since(began)
			mu.Lock()
			fmt.Fprintf(out, "%d %d %d %d %s %t\n", due.Sub(t0).Nanoseconds(), began.Sub(due).Nanoseconds(),
				latency.Nanoseconds(), status, outcome, allowed)
			mu.Unlock()
		}(i, due)
	}
	wg.Wait()
	check(out.Flush())
}

func do(ctx context.Context, client *http.Client, url string, body []byte, uid string) (int, string, bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	check(err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return 0, "timeout", false
		}
		return 0, "conn", false
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		if ctx.Err() != nil {
			return resp.StatusCode, "timeout", false
		}
		return resp.StatusCode, "conn", false
	}
	switch {
	case resp.StatusCode == 503:
		return 503, "shed", false
	case resp.StatusCode != 200:
		return resp.StatusCode, fmt.Sprintf("http-%d", resp.StatusCode), false
	case !bytes.Contains(data, []byte(`"response":{"uid":"`+uid+`"`)):
		return 200, "bad-answer", false
	}
	return 200, "ok", bytes.Contains(data, []byte(`"allowed":true`))
}

func readCalls(path string) []call {
	f, err := os.Open(path)
	check(err)
	defer f.Close()
	var calls []call
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 16<<20)
	for scanner.Scan() {
		p := scanner.Text()
		if !scanner.Scan() {
			break
		}
		calls = append(calls, call{path: p, body: append([]byte(nil), scanner.Bytes()...)})
	}
	check(scanner.Err())
	if len(calls) == 0 {
		check(errors.New("no calls in -bodies"))
	}
	return calls
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(2)
	}
}
