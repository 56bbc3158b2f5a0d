package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/terraseed/terraseed/api/scheme"
	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/controlplane"
	"github.com/terraseed/terraseed/controller/extension"
	"github.com/terraseed/terraseed/controller/kinds"
	"github.com/terraseed/terraseed/controller/serving"
	"github.com/terraseed/terraseed/controller/webhook"
	"github.com/terraseed/terraseed/templates"
	"github.com/terraseed/terraseed/terraform/executor"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/run/tracing"
	"github.com/terraseed/terraseed/terraform/state"
	"github.com/terraseed/terraseed/terraform/terraformer"
)

// managerOptions configure the controller, in a cluster or embedded.
type managerOptions struct {
	types                   string
	concurrency             int
	leaderElect             bool
	leaderElectionNamespace string
	metricsAddress          string
	pprofAddress            string
	metricsSecure           bool
	probeAddress            string
	providersDir            string
	// classes is --extension-classes; class is Gardener's single-class flag of old,
	// --extension-class, which it stands for when given alone.
	classes, class     givenString
	heartbeatNamespace string
	// kinds are the kinds besides the Infrastructure to serve where a provider ships them.
	kinds string
	// runsNamespace keeps the runs of the cluster-scoped kinds, BackupBucket and BackupEntry.
	runsNamespace      string
	extensionName      string
	controlPlaneHealth time.Duration
	controlPlaneImages string

	executor                  string
	terraform                 string
	allowTerraformDownload    bool
	pluginMirror, pluginCache string
	workDir                   string
	terraformerImage          string
	terraformerAccount        string
	runTimeout                time.Duration
	podCreationTimeout        time.Duration
	terraformerPodLabels      string
	terraformerMemoryLimit    string
	terraformerCPULimit       string
	terraformerStorageLimit   string
	maxStateSize              string
	stateStorage              string
	openTofu                  bool
	driftInterval             time.Duration
	maxRuns                   int
	driftShare                float64
	driftAging                time.Duration
	runsPerAccount            int
	// The run pods' placement (pod executor): see executor.Placement.
	terraformerPriorityClass, terraformerNodeSelector string
	terraformerTolerations, terraformerSpread         string
	stateHistory                                      int
	// allowCrossNamespaceSecretRefs lets an Infrastructure's spec.secretRef name another namespace.
	allowCrossNamespaceSecretRefs bool
	// allowOperatorOnlyCredentials lets credentials secrets set the keys providers mark operatorOnly.
	allowOperatorOnlyCredentials bool

	// tracingEndpoint is the base URL of an OTLP/HTTP receiver of traces.
	tracingEndpoint string

	webhook webhookOptions
}

func (o *managerOptions) bind(flags *flag.FlagSet) {
	flags.StringVar(&o.types, "provider-types", "", "comma-separated provider types to serve (default: every provider known)")
	flags.IntVar(&o.concurrency, "concurrency", 10, "objects reconciled at once; a reconcile never waits for a terraform run")
	flags.IntVar(&o.maxRuns, "max-runs", executor.DefaultMaxRuns, "terraform runs under way at once, controller-wide; more wait for a slot, deletions first, then creations and restorations, then reconciles, then drift plans; a DNSRecord's runs, which gardenlet waits for at most two minutes, before the other kinds'")
	flags.Float64Var(&o.driftShare, "drift-share", executor.DefaultDriftShare, "share of --max-runs that drift plans may hold at once (at least one run)")
	flags.DurationVar(&o.driftAging, "drift-aging", executor.DefaultDriftAging, "how long a drift plan waits before it goes ahead of every reconcile (never ahead of deletions and creations)")
	flags.IntVar(&o.runsPerAccount, "runs-per-account", 0, "terraform runs under way at once per project (of the credentials Secret's namespace) and region, for providers whose provider.yaml declares an account; 0: bounded by --max-runs alone")
	flags.IntVar(&o.stateHistory, "state-history", state.DefaultHistoryDepth, "states of each Infrastructure kept besides the live one, compressed, for recovery and rollback (0: none)")
	flags.BoolVar(&o.leaderElect, "leader-elect", false, "elect a leader, so that only one replica reconciles")
	flags.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election lease (default: the pod's)")
	flags.StringVar(&o.metricsAddress, "metrics-bind-address", ":8080", "address of the Prometheus metrics endpoint; 0 disables it")
	flags.BoolVar(&o.metricsSecure, "metrics-secure", true, "serve the metrics over HTTPS to callers the API server authenticates and authorizes for GET /metrics")
	flags.StringVar(&o.probeAddress, "health-probe-bind-address", ":8081", "address of the health and readiness probes; 0 disables them")
	flags.StringVar(&o.pprofAddress, "pprof-bind-address", "0", "address of Go's profiling endpoints (/debug/pprof/), unauthenticated: bind it to localhost; 0 disables them")
	o.classes = givenString{value: string(extensionsv1alpha1.ExtensionClassShoot)}
	flags.Var(&o.classes, "extension-classes", "comma-separated `classes` of the extension objects to serve (shoot, seed, garden), by their spec.class; an object without a class, and an empty list, are of class shoot")
	flags.Var(&o.class, "extension-class", "one extension `class` to serve: Gardener's flag before v1.135, kept for deployments that still pass it; --extension-classes takes a list")
	flags.StringVar(&o.kinds, "kinds", strings.Join(kindNames(), ","), "comma-separated kinds besides the Infrastructure to serve ("+strings.Join(kindNames(), ", ")+"), each for the served types whose provider ships its templates; empty: none")
	flags.StringVar(&o.runsNamespace, "runs-namespace", os.Getenv("POD_NAMESPACE"), "namespace of the runs of cluster-scoped kinds (BackupBucket, BackupEntry), which have none of their own; empty: those kinds are not served")
	flags.StringVar(&o.heartbeatNamespace, "heartbeat-namespace", os.Getenv("POD_NAMESPACE"), "namespace of the gardener-extension-heartbeat Lease renewed every 30s; empty disables it")
	flags.StringVar(&o.extensionName, "extension-name", "terraseed", "name of the extension in the heartbeat Lease")
	flags.DurationVar(&o.controlPlaneHealth, "controlplane-health-period", controlplane.DefaultHealthPeriod, "how often the ControlPlaneHealthy condition of every ControlPlane is refreshed, besides whenever one of its workloads changes")
	flags.StringVar(&o.controlPlaneImages, "controlplane-allowed-images", "registry.k8s.io/", "comma-separated prefixes every container image a control plane renders must start with (the images of the embedded providers are under registry.k8s.io/); a prefix not ending in /, : or @ stands for itself followed by one of them; empty allows every image")
	flags.StringVar(&o.providersDir, "providers-dir", "", "directory of provider directories that add to or override the embedded ones")
	flags.StringVar(&o.executor, "executor", "pod", "where terraform runs: pod (one pod per run) or local (on this machine)")
	flags.StringVar(&o.terraform, "terraform", os.Getenv("TERRASEED_TERRAFORM"), "terraform binary for the local executor; found on PATH when empty")
	flags.BoolVar(&o.allowTerraformDownload, "allow-terraform-download", false, "let the local executor install terraform from the releases site when it is not found")
	flags.StringVar(&o.pluginMirror, "plugin-mirror", os.Getenv("TERRASEED_PROVIDER_MIRROR"), "terraform filesystem mirror holding the providers")
	flags.StringVar(&o.pluginCache, "plugin-cache-dir", "", "terraform plugin cache shared by runs (default: under --work-dir)")
	flags.StringVar(&o.workDir, "work-dir", filepath.Join(os.TempDir(), "terraseed"), "working directories of local runs")
	flags.StringVar(&o.terraformerImage, "terraformer-image", "", "image of terraformer pods (pod executor)")
	flags.StringVar(&o.terraformerAccount, "terraformer-service-account", "terraseed-terraformer", "ServiceAccount of terraformer pods (pod executor)")
	flags.DurationVar(&o.runTimeout, "run-timeout", defaultRunTimeout, "how long one terraform run may take: then it is stopped, its state saved, and it fails naming how far it got (either executor); the default fits inside the 10 minutes Gardener waits for an Infrastructure")
	flags.DurationVar(&o.podCreationTimeout, "pod-creation-timeout", 10*time.Minute, "how long a terraformer pod may stay pending (pod executor)")
	flags.BoolVar(&o.openTofu, "opentofu", false, "run OpenTofu "+terraformer.OpenTofuVersion+" instead of terraform; --terraform names its binary (in the terraformer image with the pod executor)")
	flags.DurationVar(&o.driftInterval, "drift-interval", time.Hour, "how often an up-to-date Infrastructure is planned, without an apply, to report drift in its InfrastructureInSync condition; 0 disables it")
	flags.StringVar(&o.terraformerMemoryLimit, "terraformer-memory-limit", "2Gi", "memory limit of terraformer pods (pod executor): a provider plugin that leaks is killed there, not on the node")
	flags.StringVar(&o.terraformerCPULimit, "terraformer-cpu-limit", "2", "CPU limit of terraformer pods (pod executor; request 100m): a provider plugin that spins is throttled in its pod")
	flags.StringVar(&o.terraformerStorageLimit, "terraformer-ephemeral-storage-limit", "1Gi", "ephemeral-storage limit of terraformer pods, and the size limit of each of their emptyDir volumes (pod executor): a run that fills its disk is evicted, not the node's")
	flags.StringVar(&o.maxStateSize, "max-state-size", "", "the most bytes a reconcile decodes one terraform state to (default: a share of the memory limit in $TERRASEED_MEMORY_LIMIT per reconcile and run at once, else the 64Mi a state may take); a larger state fails naming the figure")
	flags.StringVar(&o.stateStorage, "state-storage", string(state.StorageConfigMap), "kind of object an Infrastructure's terraform state is kept in: configmap (as Gardener's terraformer keeps it) or secret (which the view role cannot read and encryption at rest covers); a state kept in the other kind is moved, without a run, before the Infrastructure's next run")
	flags.StringVar(&o.terraformerPriorityClass, "terraformer-priority-class-name", "", "priorityClassName of terraformer pods (pod executor)")
	flags.StringVar(&o.terraformerNodeSelector, "terraformer-node-selector", "", "comma-separated key=value node labels terraformer pods must run on (pod executor)")
	flags.StringVar(&o.terraformerTolerations, "terraformer-tolerations", "", "tolerations of terraformer pods as a JSON list of Kubernetes tolerations (pod executor)")
	flags.StringVar(&o.terraformerSpread, "terraformer-topology-spread-constraints", "", "topologySpreadConstraints of terraformer pods as a JSON list; one without a labelSelector spreads the terraformer pods among themselves (pod executor)")
	flags.StringVar(&o.terraformerPodLabels, "terraformer-pod-labels", os.Getenv("TERRASEED_TERRAFORMER_POD_LABELS"), "comma-separated key=value labels added to terraformer pods, e.g. the ones the seed's network policies select on (pod executor)")
	flags.BoolVar(&o.allowCrossNamespaceSecretRefs, "allow-cross-namespace-secret-refs", false, "let an Infrastructure's spec.secretRef name a Secret in another namespace than its own")
	flags.StringVar(&o.tracingEndpoint, "tracing-endpoint", "", "base URL of an OTLP/HTTP receiver (http://collector:4318) that the reconciles' and runs' traces go to, run pods' included; empty: the OTEL_EXPORTER_OTLP_ENDPOINT and OTEL_EXPORTER_OTLP_TRACES_ENDPOINT variables, and without them no tracing")
	flags.BoolVar(&o.allowOperatorOnlyCredentials, "allow-operator-only-credentials", false, "let credentials secrets set the keys providers mark operatorOnly, such as aws's endpoint, which sends every cloud call to the URL it names")
	o.webhook.bind(flags)
}

// defaultRunTimeout fits a run inside the 10 minutes gardenlet waits for an Infrastructure
// (Gardener's kinds.DefaultTimeout): a run stopped at 8 minutes, with the moments
// terraform takes to stop and the final save, fails before that wait ends, so that the error
// gardenlet reports is the run's, naming how far it got, rather than its own timeout.
const defaultRunTimeout = 8 * time.Minute

// resolvedOptions are the options parsed and checked: what the manager is built from.
type resolvedOptions struct {
	webhook   *webhook.Webhook
	providers *templates.Registry
	types     []string
	classes   []extensionsv1alpha1.ExtensionClass
	kinds     []templates.Kind
	executor  executor.Config
	// imagePrefixes are --controlplane-allowed-images, each ending at a boundary of an
	// image reference.
	imagePrefixes []string
	// state is how states are kept, the one value the actuator and the executors share.
	state state.Options
}

// resolve parses and checks every option that can be checked without the API server,
// each error naming its flag: newManager calls it before it writes anything there (the
// webhook's certificate Secret and configuration), so that a mistyped flag leaves the
// seed as it was.
func (o managerOptions) resolve() (*resolvedOptions, error) {
	if o.concurrency < 1 {
		return nil, fmt.Errorf("--concurrency: %d must be at least 1", o.concurrency)
	}
	if o.maxRuns < 1 {
		return nil, fmt.Errorf("--max-runs: %d must be at least 1", o.maxRuns)
	}
	if o.runsPerAccount < 0 {
		return nil, fmt.Errorf("--runs-per-account: %d is negative; 0 bounds the runs of an account by --max-runs alone", o.runsPerAccount)
	}
	if o.driftAging <= 0 {
		return nil, fmt.Errorf("--drift-aging: %s must be positive", o.driftAging)
	}
	if o.driftShare <= 0 || o.driftShare > 1 {
		return nil, fmt.Errorf("--drift-share: %g must be more than 0 and at most 1", o.driftShare)
	}
	if o.stateHistory < 0 {
		return nil, fmt.Errorf("--state-history: %d is negative; 0 keeps no history", o.stateHistory)
	}
	if o.driftInterval < 0 {
		return nil, fmt.Errorf("--drift-interval: %s is negative; 0 disables the drift checks", o.driftInterval)
	}
	if err := checkTracingEndpoint(o.tracingEndpoint); err != nil {
		return nil, err
	}
	for flag, d := range map[string]time.Duration{"--run-timeout": o.runTimeout, "--pod-creation-timeout": o.podCreationTimeout, "--controlplane-health-period": o.controlPlaneHealth} {
		if d < 0 {
			return nil, fmt.Errorf("%s: %s is negative", flag, d)
		}
	}
	r := &resolvedOptions{}
	var err error
	if r.kinds, err = o.servedKinds(); err != nil {
		return nil, err
	}
	if r.classes, err = o.extensionClasses(); err != nil {
		return nil, err
	}
	if r.providers, r.types, err = o.providerTypes(); err != nil {
		return nil, err
	}
	if r.imagePrefixes, err = controlplane.ParseImagePrefixes(o.controlPlaneImages); err != nil {
		return nil, fmt.Errorf("--controlplane-allowed-images: %w", err)
	}
	if r.webhook, err = o.webhook.build(); err != nil {
		return nil, err
	}
	if r.executor, err = o.executorConfig(); err != nil {
		return nil, err
	}
	if r.state, err = o.stateOptions(); err != nil {
		return nil, err
	}
	r.executor.State = r.state
	return r, nil
}

// executorFlagError names the flag of the executor's configuration field that err names;
// nil stays nil.
func executorFlagError(err error) error {
	var input *run.InputError
	if !errors.As(err, &input) {
		return err
	}
	flag := map[string]string{"kind": "--executor", "terraform": "--terraform", "image": "--terraformer-image"}[input.Field]
	if flag == "" {
		return err
	}
	return fmt.Errorf("%s: %s", flag, input.Problem)
}

// providerTypes are the embedded providers and those of --providers-dir, and the types
// to serve: --provider-types, or every one known.
func (o managerOptions) providerTypes() (*templates.Registry, []string, error) {
	var dirs []string
	if o.providersDir != "" {
		dirs = append(dirs, o.providersDir)
	}
	registry, err := templates.NewRegistry(dirs...)
	if err != nil {
		return nil, nil, fmt.Errorf("--providers-dir: %w", err)
	}
	if o.types == "" {
		return registry, registry.Types(), nil
	}
	types := strings.Split(o.types, ",")
	for _, t := range types {
		if _, err := registry.Provider(t); err != nil {
			return nil, nil, fmt.Errorf("--provider-types: %w", err)
		}
	}
	return registry, types, nil
}

// newManager builds a manager running the Infrastructure controller with the configured executor.
func newManager(ctx context.Context, cfg *rest.Config, o managerOptions) (manager.Manager, error) {
	r, err := o.resolve()
	if err != nil {
		return nil, err
	}
	// The local runs, once built: a lease taken over holds them back.
	var local *executor.LocalExecutor
	hold := func(until time.Time) {
		if local != nil {
			local.HoldRunsUntil(until)
		}
	}
	mgr, err := o.newControllerManager(cfg, r.webhook, r.executor.ShutdownTimeout(), hold)
	if err != nil {
		return nil, err
	}
	if r.webhook != nil {
		if err := r.webhook.SetupWithManager(ctx, mgr, r.providers, r.types); err != nil {
			return nil, fmt.Errorf("the control-plane webhook: %w", err)
		}
	}
	if o.heartbeatNamespace != "" {
		if err := mgr.Add(&extension.Heartbeat{Client: mgr.GetClient(), Namespace: o.heartbeatNamespace, Holder: o.extensionName}); err != nil {
			return nil, err
		}
	}
	runner, err := setupInfrastructures(ctx, mgr, r, o)
	if err != nil {
		return nil, err
	}
	local, _ = runner.(*executor.LocalExecutor)
	controlPlaneTypes, err := setupControlPlanes(ctx, mgr, r, o)
	if err != nil {
		return nil, err
	}
	ctrl.LoggerFrom(ctx).Info("servingProviderTypes", "types", r.types, "controlPlaneTypes", controlPlaneTypes, "executor", o.executor)
	return &drainingManager{Manager: mgr, runs: local, bound: r.executor.ShutdownTimeout()}, nil
}

// newControllerManager is the manager with its leader election, metrics, probes, caches
// and the webhook's server.
func (o managerOptions) newControllerManager(cfg *rest.Config, controlPlaneWebhook *webhook.Webhook, shutdownTimeout time.Duration, hold func(time.Time)) (manager.Manager, error) {
	// client-go's default of 5 requests per second would queue the writes of concurrent runs.
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 50, 100
	}
	var lock resourcelock.Interface
	if o.leaderElect {
		var err error
		if lock, err = o.leaderLock(cfg, shutdownTimeout, hold); err != nil {
			return nil, err
		}
	}
	managerScheme := scheme.New()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                              managerScheme,
		LeaderElection:                      o.leaderElect,
		LeaderElectionResourceLockInterface: lock,
		// Runs end with the state saved; a new leader adopts what is still running.
		LeaderElectionReleaseOnCancel: true,
		Metrics:                       serving.MetricsOptions(o.metricsAddress, o.metricsSecure),
		HealthProbeBindAddress:        o.probeAddress,
		PprofBindAddress:              o.pprofAddress,
		Client:                        client.Options{Cache: &client.CacheOptions{DisableFor: kinds.UncachedObjects()}},
		// The health check watches workloads of ControlPlanes only, not every one of the seed.
		// Nothing reads the managed fields of a cached object; kept, they were nearly half of
		// what the cache of a seed's Infrastructures and Secrets' metadata held.
		Cache:         cache.Options{ByObject: cachedObjects(managerScheme), DefaultTransform: cache.TransformStripManagedFields()},
		WebhookServer: controlPlaneWebhook.Server(),
		// The runs the controller hosts stop and save their state before it exits.
		GracefulShutdownTimeout: &shutdownTimeout,
		Controller:              ctrlconfig.Controller{SkipNameValidation: ptr.To(skipControllerNameValidation)},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return nil, err
	}
	return mgr, nil
}

// skipControllerNameValidation lets one process build managers one after the other: the
// names of controllers are registered for the whole process, and a command's tests start
// the controller more than once.
var skipControllerNameValidation = false

// setupInfrastructures serves Infrastructures of the served types with the configured
// executor, behind the run pipeline that the manager starts.
func setupInfrastructures(ctx context.Context, mgr manager.Manager, r *resolvedOptions, o managerOptions) (executor.Executor, error) {
	runner, err := executor.New(ctx, mgr.GetClient(), mgr.GetConfig(), r.executor)
	if err != nil {
		return nil, executorFlagError(err)
	}
	recorder := mgr.GetEventRecorder("terraseed-infrastructure")
	runs := executor.NewPipeline(runner, r.executor, kinds.RunHooks(recorder))
	runs.Log = mgr.GetLogger()
	if err := mgr.Add(runs); err != nil {
		return nil, err
	}
	actuator := &kinds.Actuator{
		Client:        mgr.GetClient(),
		APIReader:     mgr.GetAPIReader(),
		Metadata:      mgr.GetCache(),
		Recorder:      recorder,
		Providers:     r.providers,
		Runs:          runs,
		DriftInterval: o.driftInterval,

		AllowCrossNamespaceSecretRefs: o.allowCrossNamespaceSecretRefs,
		AllowOperatorOnlyCredentials:  o.allowOperatorOnlyCredentials,
		State:                         r.state,
		Namespace:                     o.runsNamespace,
	}
	reconciler := kinds.NewInfrastructureReconciler(actuator, r.types, r.classes)
	options := controller.Options{MaxConcurrentReconciles: o.concurrency}
	if err := kinds.SetupInfrastructure(ctx, mgr, reconciler, runs.Ends(run.PurposeInfra, false), options); err != nil {
		return nil, err
	}
	served, err := kinds.Setup(ctx, mgr, actuator, r.kinds, r.types, r.classes, runs.Ends, options)
	if err != nil {
		return nil, err
	}
	ctrl.LoggerFrom(ctx).Info("servingKinds", "kinds", served)
	return runner, nil
}

// setupControlPlanes serves ControlPlanes of the served types whose provider has a control
// plane, and returns those types.
func setupControlPlanes(ctx context.Context, mgr manager.Manager, r *resolvedOptions, o managerOptions) ([]string, error) {
	var controlPlaneTypes []string
	for _, t := range r.types {
		if p, err := r.providers.Provider(t); err == nil && p.ControlPlane != nil {
			controlPlaneTypes = append(controlPlaneTypes, t)
		}
	}
	if len(controlPlaneTypes) == 0 {
		return nil, nil
	}
	// Applied objects are read live: caching every kind a provider renders would cost
	// memory in proportion to the seed.
	live, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return nil, err
	}
	actuator := &controlplane.Actuator{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder("terraseed-controlplane"),
		Providers: r.providers,
		Resources: controlplane.NewResourceManager(live),
	}
	actuator.AllowedImages = r.imagePrefixes
	reconciler := controlplane.NewReconciler(actuator, controlPlaneTypes, r.classes)
	if err := controlplane.SetupWithManager(ctx, mgr, reconciler, actuator, controller.Options{MaxConcurrentReconciles: o.concurrency}, o.controlPlaneHealth); err != nil {
		return nil, err
	}
	return controlPlaneTypes, nil
}

// cachedObjects is what the cache keeps of a kind when not all of it: the workloads a
// ControlPlane deployed, and Infrastructures without their index.
func cachedObjects(s *k8sruntime.Scheme) map[client.Object]cache.ByObject {
	byObject := controlPlaneWorkloads(s)
	maps.Copy(byObject, kinds.CachedObjects())
	return byObject
}

// controlPlaneWorkloads limits the cache of the workloads the health check watches to
// those a ControlPlane deployed.
func controlPlaneWorkloads(s *k8sruntime.Scheme) map[client.Object]cache.ByObject {
	selector := labels.NewSelector()
	owned, err := labels.NewRequirement(controlplane.OwnerLabelGroup+"/name", selection.Exists, nil)
	if err != nil {
		panic(err)
	}
	selector = selector.Add(*owned)
	byObject := map[client.Object]cache.ByObject{}
	for _, kind := range controlplane.WorkloadKinds() {
		gvk, err := apiutil.GVKForObject(kind, s)
		if err != nil {
			panic(err)
		}
		metadata := &metav1.PartialObjectMetadata{}
		metadata.SetGroupVersionKind(gvk)
		byObject[metadata] = cache.ByObject{Label: selector}
	}
	return byObject
}

// executorConfig is the executor the flags configure, checked.
func (o managerOptions) executorConfig() (executor.Config, error) {
	cfg := executor.Config{
		Kind: o.executor,
		Settings: terraformer.Settings{
			Terraform: o.terraform,
			OpenTofu:  o.openTofu,
			Plugins:   terraformer.Plugins{Mirror: o.pluginMirror, CacheDir: o.pluginCache},
		},
		AllowTerraformDownload: o.allowTerraformDownload,
		WorkDir:                o.workDir,
		Image:                  o.terraformerImage,
		ServiceAccountName:     o.terraformerAccount,
		RunTimeout:             o.runTimeout,
		CreationTimeout:        o.podCreationTimeout,
		MaxRuns:                o.maxRuns,
		DriftShare:             o.driftShare,
		DriftAging:             o.driftAging,
		RunsPerAccount:         o.runsPerAccount,
	}
	if o.executor == executor.KindPod {
		var err error
		if cfg.PodLabels, err = parseLabels(o.terraformerPodLabels); err != nil {
			return cfg, fmt.Errorf("--terraformer-pod-labels: %w", err)
		}
		if cfg.Resources, err = o.terraformerResources(); err != nil {
			return cfg, err
		}
		if cfg.Placement, err = o.terraformerPlacement(); err != nil {
			return cfg, err
		}
	}
	return cfg, executorFlagError(cfg.Validate())
}

// terraformerPlacement is where terraformer pods may go, each error naming its flag and
// the field in it.
func (o managerOptions) terraformerPlacement() (executor.Placement, error) {
	p := executor.Placement{PriorityClassName: o.terraformerPriorityClass}
	if err := p.Validate(); err != nil {
		return p, fmt.Errorf("--terraformer-priority-class-name: %w", err)
	}
	var err error
	if p.NodeSelector, err = parseLabels(o.terraformerNodeSelector); err != nil {
		return p, fmt.Errorf("--terraformer-node-selector: %w", err)
	}
	if p.Tolerations, err = executor.ParseTolerations(o.terraformerTolerations); err != nil {
		return p, fmt.Errorf("--terraformer-tolerations: %w", err)
	}
	if p.TopologySpreadConstraints, err = executor.ParseTopologySpreadConstraints(o.terraformerSpread); err != nil {
		return p, fmt.Errorf("--terraformer-topology-spread-constraints: %w", err)
	}
	return p, nil
}

// stateBound is --max-state-size, or by default a share of the controller's memory limit
// (memoryLimit, bytes or a quantity; empty without a limit): half of it for states, each
// held up to twice (decoded and encoded) by each reconcile and run that reads one at once;
// never more than the most a state may take, state.MaxSize.
func (o managerOptions) stateBound(memoryLimit string) (int, error) {
	if o.maxStateSize != "" {
		q, err := resource.ParseQuantity(o.maxStateSize)
		if err != nil || q.Sign() <= 0 || q.Value() > state.MaxSize {
			return 0, fmt.Errorf("--max-state-size: %q is no quantity of more than 0 and at most %d (64Mi), the most a state may take", o.maxStateSize, state.MaxSize)
		}
		return int(q.Value()), nil
	}
	if memoryLimit == "" {
		return state.MaxSize, nil
	}
	limit, err := resource.ParseQuantity(memoryLimit)
	if err != nil || limit.Sign() <= 0 {
		return 0, fmt.Errorf("TERRASEED_MEMORY_LIMIT: %q is no memory quantity (set --max-state-size instead)", memoryLimit)
	}
	bound := limit.Value() / 2 / 2 / int64(max(o.concurrency+o.maxRuns, 1))
	return int(min(max(bound, 1<<20), state.MaxSize)), nil
}

// terraformerResources are the requests and the memory, CPU and ephemeral-storage limits of
// terraformer pods; an empty flag sets no limit.
func (o managerOptions) terraformerResources() (corev1.ResourceRequirements, error) {
	resources := corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("100m"),
		corev1.ResourceMemory: resource.MustParse("256Mi"),
	}}
	limits := corev1.ResourceList{}
	for _, l := range []struct {
		flag, value, least string
		name               corev1.ResourceName
	}{
		{"--terraformer-memory-limit", o.terraformerMemoryLimit, "256Mi", corev1.ResourceMemory},
		{"--terraformer-cpu-limit", o.terraformerCPULimit, "100m", corev1.ResourceCPU},
		{"--terraformer-ephemeral-storage-limit", o.terraformerStorageLimit, "64Mi", corev1.ResourceEphemeralStorage},
	} {
		if l.value == "" {
			continue
		}
		limit, err := resource.ParseQuantity(l.value)
		if err != nil || limit.Cmp(resource.MustParse(l.least)) < 0 {
			return resources, fmt.Errorf("%s: %q is no quantity of at least %s", l.flag, l.value, l.least)
		}
		limits[l.name] = limit
	}
	if len(limits) > 0 {
		resources.Limits = limits
	}
	return resources, nil
}

// runController runs the controller against the cluster of the kubeconfig, or in-cluster.
// checkTracingEndpoint refuses a --tracing-endpoint that is no http or https URL of a host:
// the exporter would drop every span without a word.
func checkTracingEndpoint(endpoint string) error {
	if endpoint == "" {
		return nil
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--tracing-endpoint: %q is not the http or https URL of a receiver, such as http://collector:4318", endpoint)
	}
	return nil
}

// startTracing turns tracing on when --tracing-endpoint or the OTEL_EXPORTER_OTLP_*
// variables name a receiver; the returned function sends what is left when the process
// stops.
func (o managerOptions) startTracing(ctx context.Context) (func(), error) {
	flush, err := tracing.Setup(ctx, "terraseed", o.tracingEndpoint)
	if err != nil {
		return nil, fmt.Errorf("--tracing-endpoint: %w", err)
	}
	if tracing.Enabled() {
		ctrl.LoggerFrom(ctx).Info("tracingStarted", "endpoint", tracing.Endpoint(o.tracingEndpoint))
	}
	return func() {
		flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := flush(flushCtx); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "tracesNotSent")
		}
	}, nil
}

func runController(ctx context.Context, args []string) error {
	flags := flag.NewFlagSet("run", flag.ContinueOnError)
	setUsage(flags, "terraseed run [flags]")
	kubeconfig := flags.String("kubeconfig", "", "kubeconfig of the seed (default: $KUBECONFIG, then in-cluster)")
	var o managerOptions
	o.bind(flags)
	if err := flags.Parse(args); err != nil {
		return err
	}
	if *kubeconfig != "" {
		os.Setenv("KUBECONFIG", *kubeconfig)
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("--kubeconfig: %w", err)
	}
	// Tracing is on before the manager writes anything, such as the webhook's objects.
	if err := checkTracingEndpoint(o.tracingEndpoint); err != nil {
		return err
	}
	stopTracing, err := o.startTracing(ctx)
	if err != nil {
		return err
	}
	defer stopTracing()
	mgr, err := newManager(ctx, cfg, o)
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}

func kindNames() []string {
	names := make([]string, 0, len(templates.Kinds))
	for _, k := range templates.Kinds {
		names = append(names, string(k))
	}
	return names
}

// servedKinds are the kinds of --kinds.
func (o managerOptions) servedKinds() ([]templates.Kind, error) {
	var kinds []templates.Kind
	for _, name := range strings.Split(o.kinds, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if !slices.Contains(templates.Kinds, templates.Kind(name)) {
			return nil, fmt.Errorf("--kinds: %q is no kind served from templates (one of %s)", name, strings.Join(kindNames(), ", "))
		}
		kinds = append(kinds, templates.Kind(name))
	}
	return kinds, nil
}

// extensionClasses are the classes served: --extension-classes, or Gardener's former
// --extension-class when it alone is given.
func (o managerOptions) extensionClasses() ([]extensionsv1alpha1.ExtensionClass, error) {
	switch {
	case o.class.given && o.classes.given:
		return nil, errors.New("--extension-class and --extension-classes are both given: give --extension-classes alone, which takes a list")
	case o.class.given:
		if strings.Contains(o.class.value, ",") {
			return nil, fmt.Errorf("--extension-class: %q names more than one class; --extension-classes takes a list", o.class.value)
		}
		classes, err := parseClasses(o.class.value)
		if err != nil {
			return nil, fmt.Errorf("--extension-class: %w", err)
		}
		return classes, nil
	default:
		classes, err := parseClasses(o.classes.value)
		if err != nil {
			return nil, fmt.Errorf("--extension-classes: %w", err)
		}
		return classes, nil
	}
}

// parseClasses reads a comma-separated list of extension classes, each once; an empty
// list is class shoot, as Gardener's extensions read it.
func parseClasses(s string) ([]extensionsv1alpha1.ExtensionClass, error) {
	if strings.TrimSpace(s) == "" {
		return []extensionsv1alpha1.ExtensionClass{extensionsv1alpha1.ExtensionClassShoot}, nil
	}
	known := []extensionsv1alpha1.ExtensionClass{extensionsv1alpha1.ExtensionClassShoot, extensionsv1alpha1.ExtensionClassSeed, extensionsv1alpha1.ExtensionClassGarden}
	var classes []extensionsv1alpha1.ExtensionClass
	for _, name := range strings.Split(s, ",") {
		class := extensionsv1alpha1.ExtensionClass(strings.TrimSpace(name))
		if !slices.Contains(known, class) {
			return nil, fmt.Errorf("%q is not one of %v", class, known)
		}
		if !slices.Contains(classes, class) {
			classes = append(classes, class)
		}
	}
	return classes, nil
}

// givenString is a string flag that knows whether it was given.
type givenString struct {
	value string
	given bool
}

func (s *givenString) String() string {
	if s == nil {
		return ""
	}
	return s.value
}

func (s *givenString) Set(value string) error {
	s.value, s.given = value, true
	return nil
}

// parseLabels reads key=value,key=value; keys and values must be valid label keys and values.
func parseLabels(s string) (map[string]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	selector, err := labels.ConvertSelectorToLabelsMap(s)
	if err != nil {
		return nil, err
	}
	for key, value := range selector {
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			return nil, fmt.Errorf("label key %q: %s", key, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
			return nil, fmt.Errorf("label %q value %q: %s", key, value, strings.Join(errs, "; "))
		}
	}
	return selector, nil
}

// stateOptions are --state-storage, --max-state-size and --state-history, whose 0 keeps
// no history.
func (o managerOptions) stateOptions() (state.Options, error) {
	var opts state.Options
	var err error
	if opts.Storage, err = state.ParseStorage("--state-storage", o.stateStorage); err != nil {
		return opts, err
	}
	if opts.MaxSize, err = o.stateBound(os.Getenv("TERRASEED_MEMORY_LIMIT")); err != nil {
		return opts, err
	}
	opts.HistoryDepth = o.stateHistory
	if o.stateHistory == 0 {
		opts.HistoryDepth = -1
	}
	return opts, nil
}
