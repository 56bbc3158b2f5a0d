package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/terraseed/terraseed/api/scheme"
	"github.com/terraseed/terraseed/controller/kinds"
)

const stateUsage = `usage: terraseed state <command> [--kubeconfig file] [--kind KIND] [--runs-namespace NS] NAMESPACE/NAME
  history NAMESPACE/NAME          list the states kept of the object: serial, lineage, time, resources
  rollback NAMESPACE/NAME SERIAL  make the kept state of SERIAL the live one, as a new serial of the same lineage;
                                  what the live state holds and SERIAL lacks is imported by the next apply
                                  (refused where its import ID is not known); refused where SERIAL holds a
                                  resource under another ID than the live state (replaced since)
  --kind: infrastructure (the default), backupbucket, backupentry, dnsrecord, bastion or
  selfhostedshootexposure. A BackupBucket
  and a BackupEntry are cluster-scoped: name them by NAME alone, and their runs' namespace (the
  controller's --runs-namespace) by --runs-namespace.
`

// runState serves the state commands, against the seed of the kubeconfig.
func runState(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) < 1 {
		return fmt.Errorf("%s", stateUsage)
	}
	command := args[0]
	flags := flag.NewFlagSet("state "+command, flag.ContinueOnError)
	kubeconfig := flags.String("kubeconfig", "", "kubeconfig of the seed (default: $KUBECONFIG, then in-cluster)")
	kind := flags.String("kind", "infrastructure", "the kind of the object")
	runsNamespace := flags.String("runs-namespace", "", "where the runs of a cluster-scoped kind are kept: the controller's --runs-namespace")
	if err := flags.Parse(args[1:]); err != nil {
		return err
	}
	want := map[string]int{"history": 1, "rollback": 2}[command]
	if want == 0 || flags.NArg() != want {
		return fmt.Errorf("%s", stateUsage)
	}
	ref := kinds.StateRef{Kind: *kind, RunsNamespace: *runsNamespace}
	if namespace, name, ok := strings.Cut(flags.Arg(0), "/"); ok {
		ref.Key = client.ObjectKey{Namespace: namespace, Name: name}
		if namespace == "" || name == "" {
			return fmt.Errorf("NAMESPACE/NAME: %q names no object", flags.Arg(0))
		}
	} else {
		ref.Key = client.ObjectKey{Name: flags.Arg(0)}
	}
	if err := ref.Validate(); err != nil {
		return err
	}
	var serial int64
	if command == "rollback" {
		var err error
		if serial, err = strconv.ParseInt(flags.Arg(1), 10, 64); err != nil {
			return fmt.Errorf("SERIAL: %q is not a serial", flags.Arg(1))
		}
	}
	if *kubeconfig != "" {
		os.Setenv("KUBECONFIG", *kubeconfig)
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("--kubeconfig: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	if command == "history" {
		entries, err := kinds.StateHistory(ctx, c, ref)
		if err != nil {
			return err
		}
		w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "SERIAL\tLINEAGE\tTIME\tRESOURCES")
		for _, e := range entries {
			fmt.Fprintf(w, "%d\t%s\t%s\t%d\n", e.Serial, e.Lineage, e.Time.UTC().Format("2006-01-02T15:04:05Z"), e.Resources)
		}
		return w.Flush()
	}
	next, err := kinds.RollbackState(ctx, c, ref, serial)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "the state of %s is now serial %d, the state of serial %d; the next reconcile applies it, importing what the live state held and serial %d lacks (annotation %s)\n",
		ref.Key, next, serial, serial, kinds.AnnotationImport)
	return nil
}
