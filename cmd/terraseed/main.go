// Command terraseed reconciles Infrastructure objects with Terraform.
package main

import (
	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

const usage = `usage: terraseed <command> [flags]

commands:
  run     run the controller against a seed cluster (in-cluster, or --kubeconfig)
  local   start an embedded local control plane, run the controller against it with the
          local executor and create a sample Infrastructure; keeps running until interrupted
  render  print the terraform files and tfvars for an Infrastructure: render -f infra.yaml [--cluster c.yaml] [--providers dir]
  mutate  print a control-plane Deployment as the control-plane webhook stores it:
          mutate -f deployment.yaml --type aws [--cluster c.yaml] [--providers dir]
  state   list the kept states of an Infrastructure (or of --kind), or roll its state back to one:
          state history [--kubeconfig file] [--kind KIND] NAMESPACE/NAME; state rollback [...] NAMESPACE/NAME SERIAL
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var err error
	switch os.Args[1] {
	case "run":
		ctrl.SetLogger(zap.New(zap.Level(logLevel(os.Getenv("TERRASEED_LOG_LEVEL")))))
		err = runController(ctx, os.Args[2:])
	case "local":
		giveBack := takeTerminal()
		err = runLocal(ctx, os.Args[2:])
		giveBack()
	case "render":
		err = runRender(os.Args[2:], os.Stdout)
	case "mutate":
		err = runMutate(os.Args[2:], os.Stdout, os.Stderr)
	case "state":
		err = runState(ctx, os.Args[2:], os.Stdout)
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if errors.Is(err, flag.ErrHelp) {
		return // --help printed the command's usage
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// logLevel reads debug, info or error (TERRASEED_LOG_LEVEL, set by the chart); info otherwise.
func logLevel(name string) zapcore.Level {
	switch name {
	case "debug":
		return zapcore.DebugLevel
	case "error":
		return zapcore.ErrorLevel
	default:
		return zapcore.InfoLevel
	}
}
