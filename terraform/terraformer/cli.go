package terraformer

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/run/report"
	"github.com/terraseed/terraseed/terraform/run/termination"
	"github.com/terraseed/terraseed/terraform/run/tracing"
	"github.com/terraseed/terraseed/terraform/state"
)

const usage = "usage: terraformer {apply|destroy|plan|validate} [flags]"

// tracingFlushTimeout bounds how long an exiting terraformer tries to send its spans: a
// receiver that is down must not hold a run pod.
const tracingFlushTimeout = 5 * time.Second

// Main is the terraformer command line: it parses args, runs one command and returns the
// exit code. SIGTERM and SIGINT cancel the run, which relays them to terraform as SIGINT,
// waits for terraform to stop and saves the state.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) (code int) {
	record := &termination.Record{Started: time.Now()}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	flags := flag.NewFlagSet("terraformer", flag.ContinueOnError)
	flags.SetOutput(stderr)
	o := bindFlags(flags)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flags)
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	command, err := run.ParseCommand(args[0])
	if err != nil {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	if err := flags.Parse(args[1:]); err != nil {
		return 2
	}
	log := zap.New(zap.UseFlagOptions(&zapOpts), zap.WriteTo(stderr))
	ctx = logf.IntoContext(ctx, log)
	// The debug messages mark where a run's time goes, for a run pod that is slow to start.
	log.V(1).Info("terraformerStarted")
	// Deferred first, so that it runs last, after the spans were sent: nothing of the run
	// is left to do once the executor reads that it succeeded.
	var succeeded func()
	defer func() {
		if code == 0 && succeeded != nil {
			succeeded()
		}
	}()
	// The run pod's TRACEPARENT makes this run's spans part of the reconcile's trace; they
	// are sent before the process exits.
	flush, err := tracing.Setup(ctx, "terraseed-terraformer", "")
	if err != nil {
		log.Error(err, "tracingNotStarted")
	} else {
		defer func() {
			flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tracingFlushTimeout)
			defer cancel()
			if err := flush(flushCtx); err != nil {
				log.Error(err, "tracesNotSent")
			}
		}()
	}
	ctx = tracing.FromEnv(ctx)

	r, err := o.runner(ctx, command, stdout, stderr)
	if err != nil {
		return o.fail(ctx, nil, o.finish(record, nil), err, stderr)
	}
	started := time.Now()
	result, err := r.Run(ctx)
	if err != nil {
		return o.fail(ctx, r.Phases(), o.finish(record, r), err, stderr)
	}
	if err := termination.Write(o.terminationMessagePath, result.Phases, o.finish(record, r), nil); err != nil {
		log.Error(err, "terminationMessageNotWritten")
	} else {
		succeeded = func() { o.announceSuccess(ctx, r) }
	}
	log.Info("runFinished", "duration", time.Since(started).String())
	return 0
}

// EnvPodUID names the variable that gives a run pod's terraformer its pod's UID.
const EnvPodUID = "TERRASEED_POD_UID"

// announceTimeout bounds the write that tells the executor a run pod's run succeeded:
// without it, the executor learns it from the kubelet.
const announceTimeout = 5 * time.Second

// announceSuccess tells the executor of a run pod that its run succeeded, with the
// termination message it wrote (report.AnnotationSucceeded): the executor need not wait
// for the kubelet to see the container end. Only a run pod does, which reports to the
// annotations and knows its UID.
func (o *cliOptions) announceSuccess(ctx context.Context, r *Runner) {
	annotations, ok := r.report().(report.Annotations)
	uid := os.Getenv(EnvPodUID)
	if !ok || uid == "" {
		return
	}
	message, err := os.ReadFile(o.terminationMessagePath)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), announceTimeout)
		defer cancel()
		err = annotations.WriteSucceeded(ctx, report.Succeeded{Pod: types.UID(uid), Message: string(message)})
	}
	if err != nil {
		logf.FromContext(ctx).Error(err, "successNotAnnounced")
	}
}

// cliOptions are the terraformer's flags.
type cliOptions struct {
	objects                state.RunObjects
	purpose                string
	stateStorage           string
	kubeconfig             string
	workDir                string
	allowInstall           bool
	installDir             string
	terminationMessagePath string
	finalSaveTimeout       time.Duration
	protected              string
	allowDestroy           bool
	allowDestroyPlan       string
	reportFile             string
	settings               Settings
	// cgroupRoot is where the container's cgroup is mounted, read for its peak memory.
	cgroupRoot string
}

func bindFlags(flags *flag.FlagSet) *cliOptions {
	o := &cliOptions{cgroupRoot: "/sys/fs/cgroup"}
	flags.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster holding the run objects (default: in-cluster)")
	flags.StringVar(&o.workDir, "work-dir", filepath.Join(os.TempDir(), "terraformer"), "working directory, private to this run")
	flags.BoolVar(&o.allowInstall, "allow-terraform-install", false, "install terraform from releases.hashicorp.com when no binary of the pinned version is found")
	flags.StringVar(&o.installDir, "terraform-install-dir", filepath.Join(os.TempDir(), "terraform-install"), "where an installed terraform goes")
	flags.StringVar(&o.terminationMessagePath, "termination-message-path", "/dev/termination-log", "file receiving how long the run's phases took and a failed run's error")
	flags.DurationVar(&o.finalSaveTimeout, "final-save-timeout", DefaultFinalSaveTimeout, "how long to retry saving the state after terraform exits")
	flags.StringVar(&o.protected, "protected-resource-types", "", "comma-separated resource types an apply must not destroy or replace")
	flags.BoolVar(&o.allowDestroy, "allow-destroy", false, "let an apply destroy or replace resources of the protected types")
	flags.StringVar(&o.allowDestroyPlan, "allow-destroy-plan", "", "digest of the one plan that may destroy or replace resources of the protected types")
	flags.StringVar(&o.reportFile, "report-file", "", "file receiving the progress and the plan instead of the configuration ConfigMap's annotations")
	flags.StringVar(&o.objects.ID.Namespace, "namespace", "", "namespace of the run objects (required)")
	flags.StringVar(&o.objects.ID.Name, "name", "", "name of the owner, e.g. the Infrastructure; the object names derive from it (required)")
	// Pods started before runs had purposes pass none.
	flags.StringVar(&o.purpose, "purpose", string(run.PurposeInfra), "what the run is for; the object names derive from it")
	flags.StringVar(&o.objects.Config, "configuration-configmap-name", "", "ConfigMap holding the terraform files (default: <name>.<purpose>.tf-config)")
	flags.StringVar(&o.objects.Vars, "variables-secret-name", "", "Secret holding the variables (default: <name>.<purpose>.tf-vars)")
	flags.StringVar(&o.objects.State, "state-configmap-name", "", "object holding the state, a ConfigMap or a Secret (--state-storage) (default: <name>.<purpose>.tf-state)")
	flags.StringVar(&o.stateStorage, "state-storage", string(state.StorageConfigMap), "kind of object the state is kept in: configmap or secret")
	// The settings of the executor's configuration, as Settings.Args passes them.
	o.settings.bindFlags(flags)
	return o
}

// runner is the run the flags describe.
func (o *cliOptions) runner(ctx context.Context, command run.Command, stdout, stderr io.Writer) (*Runner, error) {
	o.objects.ID.Purpose = run.Purpose(o.purpose)
	if err := o.objects.ID.Validate(); err != nil {
		return nil, err
	}
	storage, err := state.ParseStorage("--state-storage", o.stateStorage)
	if err != nil {
		return nil, err
	}
	o.objects.Storage = storage
	c, err := newClientFromKubeconfig(o.kubeconfig)
	if err != nil {
		return nil, err
	}
	logf.FromContext(ctx).V(1).Info("apiClientReady")
	// A binary named on the command line is used as is: the run checks its version (by its
	// build information, else with `terraform version`), instead of a second check here.
	settings := o.settings
	if settings.Terraform == "" && settings.OpenTofu {
		return nil, run.InvalidInput("terraform", "must name the OpenTofu binary with --opentofu")
	}
	if settings.Terraform == "" {
		if settings.Terraform, err = FindTerraform(ctx, "", o.allowInstall, o.installDir); err != nil {
			return nil, err
		}
		logf.FromContext(ctx).V(1).Info("terraformFound")
	}
	return &Runner{
		Client:           c,
		Objects:          o.objects,
		Command:          command,
		WorkDir:          o.workDir,
		Settings:         settings,
		ProtectedTypes:   splitList(o.protected),
		AllowDestroy:     o.allowDestroy,
		AllowDestroyPlan: o.allowDestroyPlan,
		ReportFile:       o.reportFile,
		Stdout:           stdout,
		Stderr:           stderr,
		FinalSaveTimeout: o.finalSaveTimeout,
	}, nil
}

// fail reports a failed run in the termination message and on stderr, and returns its
// exit code.
func (o *cliOptions) fail(ctx context.Context, phases run.Phases, record *termination.Record, err error, stderr io.Writer) int {
	if werr := termination.Write(o.terminationMessagePath, phases, record, err); werr != nil {
		logf.FromContext(ctx).Error(werr, "terminationMessageNotWritten")
	}
	fmt.Fprintln(stderr, run.FailurePrefix+err.Error())
	return 1
}

// finish completes the record of a run that ends now, r's (nil: no run started).
func (o *cliOptions) finish(record *termination.Record, r *Runner) *termination.Record {
	if r != nil {
		record.TerraformStarted = r.TerraformStarted()
	}
	record.PeakMemory = cgroupPeakMemory(o.cgroupRoot)
	record.Ended = time.Now()
	return record
}

// cgroupPeakMemory is the most memory the cgroup mounted at root (a container's own, in a
// run pod) used so far, terraform and its providers included: memory.peak of cgroup v2,
// else memory.max_usage_in_bytes of v1's memory controller; 0 when neither is readable.
func cgroupPeakMemory(root string) int64 {
	for _, file := range []string{filepath.Join(root, "memory.peak"), filepath.Join(root, "memory", "memory.max_usage_in_bytes")} {
		data, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64); err == nil {
			return n
		}
	}
	return 0
}

func newClientFromKubeconfig(kubeconfig string) (client.Client, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig == "" {
		if cfg, err = requestedTokenConfig(time.Now()); err != nil {
			return nil, err
		}
		if cfg == nil {
			cfg, err = rest.InClusterConfig()
		}
	} else {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig: %w", err)
	}
	// client-go's default of 5 requests a second would make state writes queue behind
	// each other; a run makes one write per resource at most.
	cfg.QPS, cfg.Burst = 50, 100
	cfg.WrapTransport = oneConnection(cfg.WrapTransport)
	// The run touches ConfigMaps and Secrets only: a fixed mapping spares the discovery
	// requests a client otherwise makes before its first call.
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{corev1.SchemeGroupVersion})
	for _, kind := range []string{"ConfigMap", "Secret"} {
		mapper.Add(corev1.SchemeGroupVersion.WithKind(kind), meta.RESTScopeNamespace)
	}
	c, err := client.New(cfg, client.Options{Mapper: mapper})
	if err != nil {
		return nil, errors.Join(errors.New("creating the API client"), err)
	}
	return c, nil
}

// oneConnection has the run's requests share one connection to the API server. Its first
// requests go out side by side (the configuration, the variables and the state are read
// at once), and each would dial a connection of its own, with a TLS handshake on both
// sides, to close all but one of them once the first carries HTTP/2. The transport is
// the one client-go made for the run's client, the only one of the process; the
// process's default transport, which serves other hosts, is left as it is.
func oneConnection(wrap func(http.RoundTripper) http.RoundTripper) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper {
		if t := baseTransport(rt); t != nil && t != http.DefaultTransport {
			t.MaxConnsPerHost = 1
		}
		if wrap != nil {
			return wrap(rt)
		}
		return rt
	}
}

// baseTransport is the http.Transport rt wraps; nil when it wraps none.
func baseTransport(rt http.RoundTripper) *http.Transport {
	for {
		switch t := rt.(type) {
		case *http.Transport:
			return t
		case utilnet.RoundTripperWrapper:
			rt = t.WrappedRoundTripper()
		default:
			return nil
		}
	}
}

func splitList(s string) []string {
	var items []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			items = append(items, item)
		}
	}
	return items
}
