package testenv

import (
	"fmt"
	"io"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// LogControllersToFile sends the controllers' log to a file, so that it does not interleave
// with test and benchmark output. The returned func ends it: when the tests failed it
// prints the end of the log, where the failure is, for CI to show.
func LogControllersToFile() (end func(failed bool)) {
	logFile, err := os.CreateTemp("", "terraseed-controller-log-")
	if err != nil {
		panic(err)
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(logFile)))
	return func(failed bool) {
		_ = logFile.Close()
		if failed {
			printTail(logFile.Name(), 64<<10)
		}
		_ = os.Remove(logFile.Name())
	}
}

func printTail(path string, size int64) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	if info, err := f.Stat(); err == nil && info.Size() > size {
		_, _ = f.Seek(-size, io.SeekEnd)
	}
	fmt.Fprintln(os.Stderr, "---- the end of the controllers' log:")
	_, _ = io.Copy(os.Stderr, f)
}
