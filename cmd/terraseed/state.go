package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/terraseed/terraseed/api/scheme"
	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/infrastructure"
	tfstate "github.com/terraseed/terraseed/terraform/state"
)

const stateUsage = `usage: terraseed state <command> [--kubeconfig file] NAMESPACE/NAME
  history NAMESPACE/NAME          list the states kept of the Infrastructure: serial, lineage, time, resources
  rollback NAMESPACE/NAME SERIAL  make the kept state of SERIAL the live one, as a new serial of the same lineage
`

// runState serves the state commands, against the seed of the kubeconfig.
func runState(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) < 1 {
		return fmt.Errorf("%s", stateUsage)
	}
	command := args[0]
	flags := flag.NewFlagSet("state "+command, flag.ContinueOnError)
	kubeconfig := flags.String("kubeconfig", "", "kubeconfig of the seed (default: $KUBECONFIG, then in-cluster)")
	if err := flags.Parse(args[1:]); err != nil {
		return err
	}
	want := map[string]int{"history": 1, "rollback": 2}[command]
	if want == 0 || flags.NArg() != want {
		return fmt.Errorf("%s", stateUsage)
	}
	namespace, name, ok := strings.Cut(flags.Arg(0), "/")
	if !ok || namespace == "" || name == "" {
		return fmt.Errorf("NAMESPACE/NAME: %q names no Infrastructure", flags.Arg(0))
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
	key := client.ObjectKey{Namespace: namespace, Name: name}
	if command == "history" {
		entries, err := stateHistory(ctx, c, key)
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
	next, err := rollbackState(ctx, c, key, serial)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "the state of %s is now serial %d, the state of serial %d; the next reconcile applies it\n", key, next, serial)
	return nil
}

// errRunUnderWay refuses a rollback while a run may write the state.
var errRunUnderWay = errors.New("an operation of the Infrastructure is under way")

// errNotInHistory is a rollback to a serial the history does not hold.
var errNotInHistory = errors.New("the state history holds no such serial")

// stateHistory lists the states kept of the Infrastructure key, newest first.
func stateHistory(ctx context.Context, c client.Client, key client.ObjectKey) ([]tfstate.HistoryEntry, error) {
	infra := &extensionsv1alpha1.Infrastructure{}
	if err := c.Get(ctx, key, infra); err != nil {
		return nil, fmt.Errorf("reading Infrastructure %s: %w", key, err)
	}
	objects, err := tfstate.RunObjects{ID: infrastructure.RunID(infra)}.Found(ctx, c)
	if err != nil {
		return nil, err
	}
	history, err := objects.ReadHistory(ctx, c)
	if err != nil {
		return nil, err
	}
	return history.Entries, nil
}

// rollbackState makes the state of serial in the history of the Infrastructure key the
// live one, as a new serial of the same lineage, so that every writer of the state takes
// it for the newest. It refuses while an operation is under way or a run pod exists, and
// a state of another lineage than the live one. It returns the new serial.
func rollbackState(ctx context.Context, c client.Client, key client.ObjectKey, serial int64) (int64, error) {
	infra := &extensionsv1alpha1.Infrastructure{}
	if err := c.Get(ctx, key, infra); err != nil {
		return 0, fmt.Errorf("reading Infrastructure %s: %w", key, err)
	}
	if last := infra.Status.LastOperation; last != nil && last.State == extensionsv1alpha1.LastOperationStateProcessing {
		return 0, fmt.Errorf("%w: %s is %s; roll back once it ended", errRunUnderWay, last.Type, last.State)
	}
	id := infrastructure.RunID(infra)
	if err := c.Get(ctx, client.ObjectKey{Namespace: id.Namespace, Name: id.PodName()}, &corev1.Pod{}); err == nil {
		return 0, fmt.Errorf("%w: run pod %s exists", errRunUnderWay, id.PodName())
	} else if !apierrors.IsNotFound(err) {
		return 0, fmt.Errorf("looking for a run pod: %w", err)
	}
	// The state is written back in the kind of object that holds it.
	objects, err := tfstate.RunObjects{ID: id}.Found(ctx, c)
	if err != nil {
		return 0, err
	}
	history, err := objects.ReadHistory(ctx, c)
	if err != nil {
		return 0, err
	}
	entry, ok := history.Find(serial)
	if !ok {
		return 0, fmt.Errorf("%w: serial %d; it holds %s", errNotInHistory, serial, serials(history.Entries))
	}
	target, err := history.State(entry)
	if err != nil {
		return 0, err
	}
	store := objects.Store(c)
	live, err := store.Inspect(ctx)
	if err != nil {
		return 0, err
	}
	if live.Lineage != "" && live.Lineage != entry.Lineage {
		return 0, fmt.Errorf("%w: the live state is of lineage %s, serial %d of the history of lineage %s", tfstate.ErrLineageMismatch, live.Lineage, serial, entry.Lineage)
	}
	next := live.Serial
	for _, e := range history.Lineage(entry.Lineage) {
		next = max(next, e.Serial)
	}
	next++
	rolledBack, err := withSerial(target, next)
	if err != nil {
		return 0, err
	}
	if live.State != nil {
		_, err = store.Save(ctx, rolledBack)
	} else {
		// A live state that is lost or unreadable is replaced.
		err = store.Replace(ctx, rolledBack)
	}
	if err != nil {
		return 0, fmt.Errorf("writing the rolled back state: %w", err)
	}
	return next, nil
}

// withSerial is state with its serial set, everything else as it was.
func withSerial(state []byte, serial int64) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(state, &fields); err != nil {
		return nil, fmt.Errorf("%w: %v", tfstate.ErrInvalid, err)
	}
	fields["serial"] = json.RawMessage(strconv.FormatInt(serial, 10))
	return json.MarshalIndent(fields, "", "  ")
}

func serials(entries []tfstate.HistoryEntry) string {
	if len(entries) == 0 {
		return "none"
	}
	s := ""
	for i, e := range entries {
		if i > 0 {
			s += ", "
		}
		s += strconv.FormatInt(e.Serial, 10)
	}
	return s
}
