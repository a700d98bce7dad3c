package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// startLogged starts cmd with its stdout and stderr in a new file at
// logPath. exited is closed once the process has exited; stop ends it
// (SIGTERM, then SIGKILL after 5 s) and returns once it has exited.
func startLogged(cmd *exec.Cmd, logPath string) (exited <-chan struct{}, stop func(), err error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, nil, err
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, nil, fmt.Errorf("starting %s: %w", cmd.Path, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(done)
	}()
	stop = func() {
		select {
		case <-done:
			return
		default:
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	return done, stop, nil
}
