// Command infrastructure-controller reconciles Infrastructure objects with Terraform.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

const usage = `usage: infrastructure-controller <command> [flags]

commands:
  local   start an embedded local control plane with the CRDs installed and keep it running
  render  print the terraform files and tfvars for an Infrastructure: render -f infra.yaml [--cluster c.yaml] [--providers dir]
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
	case "local":
		err = runLocal(ctx, os.Args[2:])
	case "render":
		err = runRender(os.Args[2:], os.Stdout)
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
