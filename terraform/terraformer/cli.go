package terraformer

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/state"
)

const usage = "usage: terraformer {apply|destroy|plan|validate} [flags]"

// Main is the terraformer command line: it parses args, runs one command and returns the
// exit code. SIGTERM and SIGINT cancel the run, which relays them to terraform as SIGINT,
// waits for terraform to stop and saves the state.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	flags := flag.NewFlagSet("terraformer", flag.ContinueOnError)
	flags.SetOutput(stderr)
	var (
		objects                state.RunObjects
		purpose                string
		kubeconfig             = flags.String("kubeconfig", "", "kubeconfig of the cluster holding the run objects (default: in-cluster)")
		workDir                = flags.String("work-dir", filepath.Join(os.TempDir(), "terraformer"), "working directory, private to this run")
		terraformPath          = flags.String("terraform", "", "terraform binary of version "+run.TerraformVersion+" (default: found on PATH)")
		allowInstall           = flags.Bool("allow-terraform-install", false, "install terraform from releases.hashicorp.com when no binary of the pinned version is found")
		installDir             = flags.String("terraform-install-dir", filepath.Join(os.TempDir(), "terraform-install"), "where an installed terraform goes")
		parallelism            = flags.Int("parallelism", 0, "concurrent terraform operations (default: terraform's)")
		terminationMessagePath = flags.String("termination-message-path", "/dev/termination-log", "file receiving how long the run's phases took and a failed run's error")
		finalSaveTimeout       = flags.Duration("final-save-timeout", DefaultFinalSaveTimeout, "how long to retry saving the state after terraform exits")
		openTofu               = flags.Bool("opentofu", false, "the binary of --terraform is OpenTofu "+run.OpenTofuVersion)
		protected              = flags.String("protected-resource-types", "", "comma-separated resource types an apply must not destroy or replace")
		allowDestroy           = flags.Bool("allow-destroy", false, "let an apply destroy or replace resources of the protected types")
		progressInterval       = flags.Duration("progress-interval", run.DefaultProgressInterval, "how often at most the progress is written to the configuration ConfigMap")
		reportFile             = flags.String("report-file", "", "file receiving the progress and the plan instead of the configuration ConfigMap's annotations")
		plugins                run.Plugins
	)
	flags.StringVar(&objects.ID.Namespace, "namespace", "", "namespace of the run objects (required)")
	flags.StringVar(&objects.ID.Name, "name", "", "name of the owner, e.g. the Infrastructure; the object names derive from it (required)")
	// Pods started before runs had purposes pass none.
	flags.StringVar(&purpose, "purpose", string(run.PurposeInfra), "what the run is for; the object names derive from it")
	flags.StringVar(&objects.Config, "configuration-configmap-name", "", "ConfigMap holding the terraform files (default: <name>.<purpose>.tf-config)")
	flags.StringVar(&objects.Vars, "variables-secret-name", "", "Secret holding the variables (default: <name>.<purpose>.tf-vars)")
	flags.StringVar(&objects.State, "state-configmap-name", "", "ConfigMap holding the state (default: <name>.<purpose>.tf-state)")
	flags.StringVar(&plugins.Mirror, "plugin-mirror", os.Getenv("TERRAFORM_PROVIDER_MIRROR"), "filesystem mirror of provider plugins")
	flags.StringVar(&plugins.CacheDir, "plugin-cache-dir", "", "plugin cache shared between runs")
	flags.BoolVar(&plugins.AllowDownload, "allow-provider-download", false, "download providers the mirror does not hold")
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

	var t *Terraformer
	fail := func(err error) int {
		var phases run.Phases
		if t != nil {
			phases = t.Phases()
		}
		if werr := run.WriteTerminationMessage(*terminationMessagePath, phases, err); werr != nil {
			log.Error(werr, "terminationMessageNotWritten")
		}
		fmt.Fprintln(stderr, run.FailurePrefix+err.Error())
		return 1
	}
	objects.ID.Purpose = run.Purpose(purpose)
	if err := objects.ID.Validate(); err != nil {
		return fail(err)
	}
	c, err := newClientFromKubeconfig(*kubeconfig)
	if err != nil {
		return fail(err)
	}
	// A binary named on the command line is used as is: the run checks its version with
	// the `terraform version` that terraform-exec runs anyway, instead of a second one here.
	tfPath := *terraformPath
	if tfPath == "" && *openTofu {
		return fail(run.InvalidInput("terraform", "must name the OpenTofu binary with --opentofu"))
	}
	if tfPath == "" {
		if tfPath, err = FindTerraform(ctx, "", *allowInstall, *installDir); err != nil {
			return fail(err)
		}
	}
	t = &Terraformer{
		Client:           c,
		Objects:          objects,
		Command:          command,
		WorkDir:          *workDir,
		TerraformPath:    tfPath,
		OpenTofu:         *openTofu,
		ProtectedTypes:   splitList(*protected),
		AllowDestroy:     *allowDestroy,
		ProgressInterval: *progressInterval,
		ReportFile:       *reportFile,
		Plugins:          plugins,
		Parallelism:      *parallelism,
		Stdout:           stdout,
		Stderr:           stderr,
		StateFallback:    stdout,
		FinalSaveTimeout: *finalSaveTimeout,
	}
	started := time.Now()
	result, err := t.Run(ctx)
	if err != nil {
		return fail(err)
	}
	if err := run.WriteTerminationMessage(*terminationMessagePath, result.Phases, nil); err != nil {
		log.Error(err, "terminationMessageNotWritten")
	}
	log.Info("runFinished", "duration", time.Since(started).String())
	return 0
}

func newClientFromKubeconfig(kubeconfig string) (client.Client, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig == "" {
		cfg, err = rest.InClusterConfig()
	} else {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig: %w", err)
	}
	// client-go's default of 5 requests a second would make state writes queue behind
	// each other; a run makes one write per resource at most.
	cfg.QPS, cfg.Burst = 50, 100
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

func splitList(s string) []string {
	var items []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			items = append(items, item)
		}
	}
	return items
}
