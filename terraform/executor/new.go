package executor

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/state"
	"github.com/terraseed/terraseed/terraform/terraformer"
)

// Kinds of executor New builds.
const (
	kindLocal = "local"
	KindPod   = "pod"
)

// Config is what an executor is built from, as an operator configures it.
type Config struct {
	// Kind is kindLocal or KindPod.
	Kind string
	// MaxRuns, DriftShare, DriftAging and RunsPerAccount are the settings of the
	// Pipeline's Scheduler (see there); defaults when zero.
	MaxRuns        int
	DriftShare     float64
	DriftAging     time.Duration
	RunsPerAccount int
	// Settings are how every run runs terraform. Settings.Terraform is the binary: for
	// kindLocal, found on PATH when empty (and downloaded when AllowTerraformDownload is
	// set); for KindPod, the image's when empty. With Settings.OpenTofu it must name the
	// OpenTofu binary. Settings.Plugins.Mirror is the provider mirror; Plugins.CacheDir
	// the shared plugin cache, a default below WorkDir (local) or in the pod (pod) when
	// empty. Settings.StopTimeout is localStopTimeout (local) or terraformer.DefaultStopTimeout
	// (pod) when zero.
	Settings               terraformer.Settings
	AllowTerraformDownload bool
	// WorkDir holds a local executor's runs, downloaded terraform and plugin cache.
	WorkDir string

	// The run pods' image, ServiceAccount, labels, resources and deadlines (KindPod).
	Image              string
	ServiceAccountName string
	PodLabels          map[string]string
	Resources          corev1.ResourceRequirements
	Placement          Placement
	// State is how the runs keep their states, the same options the actuator has.
	State           state.Options
	CreationTimeout time.Duration

	// RunTimeout bounds a run of either kind: it is stopped, its state saved, and it fails
	// with ErrRunDeadline.
	RunTimeout time.Duration
}

// localStopTimeout is how long a local run may take to stop after an interrupt (a
// shutdown, a deletion, its timeout) before terraform is killed.
const localStopTimeout = time.Minute

// podExecutorShutdown is controller-runtime's default: run pods go on without the controller.
const podExecutorShutdown = 30 * time.Second

// ShutdownTimeout is how long the controller must wait at its shutdown for the runs it
// hosts: a local run's stop and its final save. The controller pod's termination grace
// period must be longer.
func (c Config) ShutdownTimeout() time.Duration {
	if c.Kind != kindLocal {
		return podExecutorShutdown
	}
	return terraformer.StopBound(cmp.Or(c.Settings.StopTimeout, localStopTimeout))
}

// Validate names the field of a configuration New cannot build.
func (c Config) Validate() error {
	if c.Settings.OpenTofu && c.Settings.Terraform == "" {
		return run.InvalidInput("terraform", "must name the OpenTofu binary when OpenTofu is set")
	}
	switch c.Kind {
	case kindLocal:
	case KindPod:
		if c.Image == "" {
			return run.InvalidInput("image", "is required for the pod executor")
		}
		if err := c.Placement.Validate(); err != nil {
			return run.InvalidInput("placement", err.Error())
		}
	default:
		return run.InvalidInput("kind", fmt.Sprintf("%q is neither %s nor %s", c.Kind, KindPod, kindLocal))
	}
	return nil
}

// New builds the executor cfg names. c must not cache ConfigMaps and Secrets.
func New(ctx context.Context, c client.Client, restConfig *rest.Config, cfg Config) (Executor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Kind == kindLocal {
		return newLocal(ctx, c, cfg)
	}
	return newPod(c, restConfig, cfg)
}

func newLocal(ctx context.Context, c client.Client, cfg Config) (*LocalExecutor, error) {
	settings := cfg.Settings
	if !settings.OpenTofu {
		var err error
		if settings.Terraform, err = terraformer.FindTerraform(ctx, settings.Terraform, cfg.AllowTerraformDownload, filepath.Join(cfg.WorkDir, "bin")); err != nil {
			return nil, run.InvalidInput("terraform", err.Error())
		}
	}
	if settings.Plugins.CacheDir == "" {
		settings.Plugins.CacheDir = filepath.Join(cfg.WorkDir, "plugin-cache")
	}
	if err := os.MkdirAll(settings.Plugins.CacheDir, 0o700); err != nil {
		return nil, err
	}
	settings.StopTimeout = cmp.Or(settings.StopTimeout, localStopTimeout)
	return &LocalExecutor{
		Client:     c,
		Settings:   settings,
		BaseDir:    filepath.Join(cfg.WorkDir, "runs"),
		RunTimeout: cfg.RunTimeout,
		State:      cfg.State,
	}, nil
}

func newPod(c client.Client, restConfig *rest.Config, cfg Config) (*PodExecutor, error) {
	clientset, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return nil, err
	}
	settings := cfg.Settings
	if settings.Plugins.CacheDir == "" {
		settings.Plugins.CacheDir = "/tmp/plugin-cache"
	}
	// The image's terraform is the terraformer's default; OpenTofu is named.
	if !settings.OpenTofu {
		settings.Terraform = ""
	}
	return &PodExecutor{
		Client:             c,
		Clientset:          clientset,
		Image:              cfg.Image,
		ServiceAccountName: cfg.ServiceAccountName,
		// Shoot namespaces come and go: each run ensures its ServiceAccount and binding.
		ManageServiceAccount: true,
		Settings:             settings,
		RunTimeout:           cfg.RunTimeout,
		CreationTimeout:      cfg.CreationTimeout,
		PodLabels:            cfg.PodLabels,
		Resources:            cfg.Resources,
		Placement:            cfg.Placement,
		State:                cfg.State,
		// Run pods verify the API server as the controller does: its in-cluster CA file,
		// or its kubeconfig's CA.
		APICA:     restConfig.CAData,
		APICAFile: restConfig.CAFile,
	}, nil
}
