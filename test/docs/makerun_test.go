package docs

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	. "github.com/onsi/gomega"
)

// `make run` in a terminal, stopped with Ctrl-C as its last line asks: the controller and
// the control plane stop, it says so, and make exits 0 with no error line.
func TestMakeRunStopsCleanlyOnCtrlC(t *testing.T) {
	g := NewWithT(t)
	cmd := exec.Command("make", "--no-print-directory", "run",
		fmt.Sprintf("RUN_FLAGS=--work-dir=%s --metrics-bind-address=0 --health-probe-bind-address=0 --webhook-port=%d", t.TempDir(), freePort(t)))
	cmd.Dir = "../.."
	terminal, err := pty.Start(cmd)
	g.Expect(err).NotTo(HaveOccurred())
	defer terminal.Close()
	exited := make(chan error, 1)
	asked := make(chan struct{})
	var output lockedBuilder
	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		scanner := bufio.NewScanner(terminal)
		for scanner.Scan() {
			lines <- scanner.Text()
		}
	}()
	go func() {
		for line := range lines {
			output.WriteString(line + "\n")
			if strings.Contains(line, "press Ctrl-C to stop") {
				close(asked)
			}
		}
		exited <- cmd.Wait()
	}()
	select {
	case <-asked:
	case err := <-exited:
		t.Fatalf("make run ended before it asked for Ctrl-C (%v):\n%s", err, output.String())
	case <-time.After(10 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("make run did not ask for Ctrl-C within 10 minutes:\n%s", output.String())
	}
	_, err = terminal.Write([]byte{3}) // the terminal's interrupt character: what Ctrl-C types
	g.Expect(err).NotTo(HaveOccurred())
	select {
	case err = <-exited:
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("make run did not stop within 2 minutes of Ctrl-C:\n%s", output.String())
	}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		t.Fatalf("make run exited with %v after Ctrl-C:\n%s", exitErr, output.String())
	}
	g.Expect(err).NotTo(HaveOccurred(), output.String())
	g.Expect(output.String()).To(ContainSubstring("stopping the local control plane"))
	g.Expect(output.String()).To(MatchRegexp(`(?m)^stopped\r?$`))
	g.Expect(output.String()).NotTo(MatchRegexp(`(?mi)\berror\b`))
}

func freePort(t *testing.T) int {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close()
	return listener.Addr().(*net.TCPAddr).Port
}

// lockedBuilder collects the terminal's output while the test reads it.
type lockedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuilder) WriteString(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(s)
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
