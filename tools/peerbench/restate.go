package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	restate "github.com/restatedev/sdk-go"
	"github.com/restatedev/sdk-go/server"
)

// openRestate starts restate-server (from npm) with its data under the
// scratch directory, serves a Go service (sdk-go) whose handler runs one
// restate.Run step, registers it, and invokes it through the ingress: a
// POST that returns the handler's result once the invocation completed.
// Restate records the invocation and the step's result in its log and
// partition store (RocksDB, WAL fsync on: its defaults) before answering.
func openRestate(ctx context.Context, e *env) (func(context.Context) error, func(), error) {
	if _, err := os.Stat(e.restate); err != nil {
		return nil, nil, fmt.Errorf("restate-server not found (run npm ci in tools/peerbench, or give --restate-server): %w", err)
	}
	ports, err := freePorts(5)
	if err != nil {
		return nil, nil, err
	}
	ingress, admin, node, pgsql, svc := ports[0], ports[1], ports[2], ports[3], ports[4]
	base := filepath.Join(e.dir, "restate")
	if err := os.MkdirAll(base, 0o755); err != nil {
		return nil, nil, err
	}
	logf, err := os.Create(filepath.Join(e.dir, "restate.log"))
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(e.restate, "--no-logo", "--listen-mode", "tcp", "--base-dir", base, "--node-name", "peerbench")
	cmd.Env = append(os.Environ(),
		"RESTATE_INGRESS__BIND_ADDRESS=127.0.0.1:"+strconv.Itoa(ingress),
		"RESTATE_ADMIN__BIND_ADDRESS=127.0.0.1:"+strconv.Itoa(admin),
		"RESTATE_BIND_ADDRESS=127.0.0.1:"+strconv.Itoa(node),
		"RESTATE_ADMIN__QUERY_ENGINE__PGSQL_BIND_ADDRESS=127.0.0.1:"+strconv.Itoa(pgsql),
		"RESTATE_DISABLE_TELEMETRY=true",
		"RESTATE_LOG_FILTER=warn",
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, nil, err
	}
	svcCtx, stopSvc := context.WithCancel(context.WithoutCancel(ctx))
	stop := func() {
		stopSvc()
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		logf.Close()
	}

	service := restate.NewService("Bench").Handler("Step", restate.NewServiceHandler(
		func(ctx restate.Context, i int64) (int64, error) {
			return restate.Run(ctx, func(restate.RunContext) (int64, error) { return effect(i) })
		}))
	go func() {
		_ = server.NewRestate().WithLogger(slog.DiscardHandler, true).Bind(service).Start(svcCtx, "127.0.0.1:"+strconv.Itoa(svc))
	}()

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * e.callers, MaxConnsPerHost: 0}}
	adminURL := fmt.Sprintf("http://127.0.0.1:%d", admin)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		// Registration succeeds once the admin API is up and the
		// service answers discovery.
		body := fmt.Sprintf(`{"uri":"http://127.0.0.1:%d"}`, svc)
		resp, err := client.Post(adminURL+"/deployments", "application/json", bytes.NewBufferString(body))
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				break
			}
			err = fmt.Errorf("register deployment: %s: %s", resp.Status, b)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			stop()
			return nil, nil, fmt.Errorf("restate did not come up (log: %s): %w", logf.Name(), errors.Join(err, ctx.Err()))
		}
		time.Sleep(200 * time.Millisecond)
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/Bench/Step", ingress)
	var seq atomic.Int64
	op := func(ctx context.Context) error {
		i := seq.Add(1)
		want := strconv.FormatInt(i, 10)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewBufferString(want))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK || string(bytes.TrimSpace(b)) != want {
			return fmt.Errorf("restate: invocation %d: %s: %s", i, resp.Status, b)
		}
		return nil
	}
	// The first invocations may find the partitions still electing
	// leaders: wait until one succeeds.
	for {
		err := op(ctx)
		if err == nil {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			stop()
			return nil, nil, fmt.Errorf("restate: no invocation succeeded: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return op, stop, nil
}

// freePorts returns n distinct free loopback ports.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
