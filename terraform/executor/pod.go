package executor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/run/report"
	"github.com/terraseed/terraseed/terraform/run/termination"
	"github.com/terraseed/terraseed/terraform/run/tracing"
	"github.com/terraseed/terraseed/terraform/state"
	"github.com/terraseed/terraseed/terraform/terraformer"
)

// labelCommand names the terraform command a run pod executes.
const labelCommand = run.LabelPrefix + "command"

// labelDigest holds the digest of the configuration a run pod works on (Request.Digest).
const labelDigest = run.LabelPrefix + "config-digest"

var (
	// errCreationDeadline is returned when a run pod did not start in time.
	errCreationDeadline = errors.New("the terraform run did not start in time")
	// ErrRunDeadline is returned when a run did not finish in time.
	ErrRunDeadline = errors.New("the terraform run did not finish in time")
)

// PodExecutor runs the terraformer in one Pod per run.
type PodExecutor struct {
	Client client.Client
	// Clientset watches the run pods, and reads a pod's log when it left no termination
	// message.
	Clientset kubernetes.Interface
	Image     string
	// Command starts the terraformer in the image; {"/terraformer"} when empty.
	Command []string
	// ServiceAccountName is the run pods' dedicated ServiceAccount: it may read the run
	// objects and write the state, nothing else; defaultServiceAccountName when empty.
	ServiceAccountName string
	// ManageServiceAccount makes each run ensure the ServiceAccount in its namespace,
	// bound to a Role naming the run's objects (see EnsureServiceAccount), for
	// namespaces nobody prepared, such as shoot namespaces.
	ManageServiceAccount bool
	// PodLabels are added to run pods, e.g. the labels a seed's network policies select
	// on; they never replace the labels that identify a run.
	PodLabels map[string]string
	Resources corev1.ResourceRequirements
	// Placement is where run pods may go on a busy seed.
	Placement Placement
	// State is how the runs keep their states: the controller decodes a run's state to at
	// most State.MaxSize when it reads the run's outputs, and the run pods' Role names
	// objects of the kind State.Storage only.
	State state.Options
	// Settings reach each run pod as its arguments (Settings.Args), with a request's own
	// parallelism. Settings.Plugins are paths inside the image or mounted volumes;
	// Settings.Terraform names OpenTofu in the image with Settings.OpenTofu, else it is
	// empty: the image's terraform. Settings.StopTimeout is how long terraform in a run
	// pod may take to stop after SIGTERM before it is killed; the pod's termination grace
	// period adds the final save to it. The run pods write their progress, and it is
	// read, every Settings.ProgressInterval.
	Settings terraformer.Settings
	// CreationTimeout bounds how long a pod may stay pending.
	CreationTimeout time.Duration
	// RunTimeout becomes the pod's activeDeadlineSeconds.
	RunTimeout time.Duration
	// PollInterval is how often a waiting run looks at its pod in the watch's cache
	// besides at each of its changes (no request); defaultPodRecheckInterval when zero.
	PollInterval time.Duration
	// APICA (or the file APICAFile, read at each run) is the CA run pods verify the API
	// server by. With either, and both timeouts set, a run pod gets a token requested for
	// it (podtoken.go) and mounts no volume; without, the kubelet mounts its token.
	APICA     []byte
	APICAFile string

	guard runGuard
	// tokensTooShort is set once the API server gave a token too short for a run pod.
	tokensTooShort atomic.Bool

	watchMu    sync.Mutex
	watch      *podWatch
	watchUsers int
	stopWatch  context.CancelFunc
}

var _ Executor = (*PodExecutor)(nil)

// defaultPodRecheckInterval is how often a waiting run looks at its pod in the watch's
// cache besides at each of its changes: the pending deadline needs no change to pass.
const defaultPodRecheckInterval = 10 * time.Second

// pods returns the watch on run pods, started for the first run that waits and stopped
// after the last one, so that an idle executor holds no watch open.
func (e *PodExecutor) pods() (*podWatch, func(), error) {
	if e.Clientset == nil {
		return nil, nil, run.InvalidInput("clientset", "must be set to watch run pods")
	}
	e.watchMu.Lock()
	defer e.watchMu.Unlock()
	if e.watchUsers == 0 {
		ctx, cancel := context.WithCancel(context.Background())
		watch, err := newPodWatch(e.Clientset, ctx.Done())
		if err != nil {
			cancel()
			return nil, nil, err
		}
		e.watch, e.stopWatch = watch, cancel
	}
	e.watchUsers++
	watch := e.watch
	return watch, func() {
		e.watchMu.Lock()
		defer e.watchMu.Unlock()
		if e.watchUsers--; e.watchUsers == 0 {
			e.stopWatch()
		}
	}, nil
}

// Run creates the run pod, or adopts the one still running the same command after a
// restart, and waits for it. Cancelling ctx leaves the pod running, to be adopted.
func (e *PodExecutor) Run(ctx context.Context, req run.Request) (*run.Result, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if e.Image == "" {
		return nil, run.InvalidInput("image", "must not be empty")
	}
	pods, stopWatching, err := e.pods()
	if err != nil {
		return nil, err
	}
	defer stopWatching()
	release, err := e.guard.acquire(req)
	if err != nil {
		return nil, err
	}
	defer release()
	log := logf.FromContext(ctx).WithValues("pod", req.ID.PodName(), "command", req.Command)
	tracing.Set(trace.SpanFromContext(ctx), attribute.String("terraseed.executor", "pod"))

	pod, err := e.podToAdopt(ctx, req)
	if err != nil {
		return nil, err
	}
	report := report.Annotations{Client: e.Client, ID: req.ID}
	// When the pod was asked for, for its spans; unknown for an adopted one.
	var created time.Time
	if pod == nil {
		// What an earlier run reported is not this run's.
		if err := report.Clear(ctx); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("clearing the progress of an earlier run: %w", err)
		}
		created = time.Now()
		if pod, err = e.create(ctx, req); err != nil {
			return nil, err
		}
		log.Info("runPodCreated")
	}
	// An adopted pod's run started with the pod, before this process followed it. The
	// pod's deadline counts from its start, after its creation: followed from the creation
	// (to the second, as the API server keeps it, when this process did not create it),
	// the progress is not read past it.
	started := cmp.Or(created, pod.CreationTimestamp.Time)
	stopProgress := followProgress(ctx, report, req, started, e.Settings.ProgressInterval, e.RunTimeout)
	waitCtx, stopWaiting := context.WithCancel(ctx)
	result, err := e.wait(waitCtx, pods, req, pod, created, e.watchSucceeded(waitCtx, req.ID, pod.UID))
	stopWaiting()
	last := stopProgress()
	if err != nil {
		addProgressAtDeadline(err, last)
		return nil, err
	}
	return withPlan(ctx, report, req, result)
}

// podToAdopt is the run pod of req's ID that this run follows: one of the same command and
// configuration, left by this process or an earlier one; nil when there is none, or the
// one there ended or never started and is gone now. A pod of another run still under way
// is ErrRunInProgress.
func (e *PodExecutor) podToAdopt(ctx context.Context, req run.Request) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	err := e.Client.Get(ctx, client.ObjectKey{Namespace: req.ID.Namespace, Name: req.ID.PodName()}, pod)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading the run pod: %w", err)
	case pod.DeletionTimestamp != nil && !finished(pod):
		// Stopping within its grace period, the pod's terraform stops and the terraformer
		// saves the state: nothing of its run is touched until it ended.
		return nil, inProgress(req.Command, fmt.Sprintf("%s (pod %s is stopping)", run.ErrRunInProgress, pod.Name))
	case finished(pod):
		// A failed run no one followed to its end (its controller gone, its configuration
		// not this run's) may have left creates under way: they are this run's error, so
		// that they are kept before the report is cleared for this run.
		var interrupted error
		if pod.Status.Phase == corev1.PodFailed {
			earlier := &run.Error{Command: pod.Labels[labelCommand], Message: fmt.Sprintf("the earlier run pod %s failed while terraform created resources", pod.Name), Err: errEarlierRunInterrupted}
			addInterrupted(ctx, report.Annotations{Client: e.Client, ID: req.ID}, earlier)
			if len(earlier.Interrupted) > 0 {
				interrupted = earlier
			}
		}
		if err := e.cleanup(ctx, req.ID, pod); err != nil {
			return nil, err
		}
		return nil, interrupted
	case pod.Spec.NodeName == "" && pod.Status.StartTime == nil && (pod.Labels[labelCommand] != string(req.Command) || (req.Digest != "" && pod.Labels[labelDigest] != req.Digest)):
		// A pod of another run left Pending, with no node yet, ran nothing: this run
		// replaces it (the deletion of a pod on no node is immediate).
		if err := e.cleanup(ctx, req.ID, pod); err != nil {
			return nil, err
		}
		return nil, nil
	case pod.Labels[labelCommand] != string(req.Command):
		return nil, inProgress(req.Command, fmt.Sprintf("%s (pod %s runs %s)", run.ErrRunInProgress, pod.Name, pod.Labels[labelCommand]))
	case e.cutOffBeforeItsSecret(ctx, req.ID, pod):
		// Its executor stopped between the pod and its Secret: the kubelet cannot start
		// it, and it ran nothing. This run replaces it.
		if err := e.cleanup(ctx, req.ID, pod); err != nil {
			return nil, err
		}
		return nil, nil
	case req.Digest != "" && pod.Labels[labelDigest] != req.Digest:
		// A pod of another configuration, e.g. of the generation before a restart: its
		// outcome is not this run's. This run starts once it ended.
		return nil, inProgress(req.Command, fmt.Sprintf("%s (pod %s runs another configuration)", run.ErrRunInProgress, pod.Name))
	default:
		logf.FromContext(ctx).Info("adoptingRunPod", "pod", pod.Name, "command", req.Command)
		return pod, nil
	}
}

var _ activityChecker = (*PodExecutor)(nil)

// Active is true while a run pod of id exists that has not finished: also one being
// deleted, which still runs within its grace period, terraform stopping and the state
// being saved.
func (e *PodExecutor) Active(ctx context.Context, id run.ID) (bool, error) {
	pod := &corev1.Pod{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: id.Namespace, Name: id.PodName()}, pod); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("reading the run pod: %w", err)
	}
	return !finished(pod), nil
}

var _ stopper = (*PodExecutor)(nil)

// Stop deletes the run pod of id with its own grace period, its terminationGracePeriodSeconds
// (StopTimeout): the kubelet sends the terraformer SIGTERM, which it relays to terraform,
// and once terraform stopped the terraformer saves the state. A terraform still busy when
// the grace period ends (a create that hangs) is killed with the pod; every state it wrote
// was saved as it wrote it. The pod counts as active until its container ended. A pod
// that ended already is left for Run to read and clean up; no pod, nothing to stop.
func (e *PodExecutor) Stop(ctx context.Context, id run.ID) error {
	pod := &corev1.Pod{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: id.Namespace, Name: id.PodName()}, pod); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("reading the run pod: %w", err)
	}
	if finished(pod) || pod.DeletionTimestamp != nil {
		return nil
	}
	if err := e.Client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("stopping the run pod: %w", err)
	}
	logf.FromContext(ctx).Info("runPodStopping", "pod", pod.Name, "gracePeriod", ptr.Deref(pod.Spec.TerminationGracePeriodSeconds, 0))
	return nil
}

// finished says whether the pod's container ended. A deletion does not end it: the
// kubelet stops the container within the grace period and reports the phase it ended in.
func finished(pod *corev1.Pod) bool {
	_, ok := exited(pod)
	return ok || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// exited returns the exit code of the pod's container once it ended. The kubelet reports
// it as soon as it sees it, and the pod's phase only once it tore the pod's sandbox down,
// a second or two later: with restart policy Never the terraformer and every process of
// the run are gone with the container, and its state was saved.
func exited(pod *corev1.Pod) (int32, bool) {
	if len(pod.Status.ContainerStatuses) == 0 {
		return 0, false
	}
	var code int32
	for _, status := range pod.Status.ContainerStatuses {
		if status.State.Terminated == nil {
			return 0, false
		}
		code = max(code, status.State.Terminated.ExitCode)
	}
	return code, true
}

func (e *PodExecutor) create(ctx context.Context, req run.Request) (_ *corev1.Pod, err error) {
	// The terraformer's spans are children of the run's, beside this one.
	runCtx, traceEnv := ctx, tracing.Env(ctx)
	ctx, span := tracing.Start(ctx, "pod.create")
	defer func() {
		tracing.Fail(span, err)
		span.End()
	}()
	labels := req.ID.Labels()
	labels[labelCommand] = string(req.Command)
	if req.Digest != "" {
		labels[labelDigest] = req.Digest
	}
	var owners []metav1.OwnerReference
	if req.Owner != nil {
		owners = []metav1.OwnerReference{*req.Owner}
	}
	if e.ManageServiceAccount {
		if err := e.EnsureServiceAccount(ctx, req.ID); err != nil {
			return nil, err
		}
	}
	// Missing, the variables fail the run, which says so itself.
	if req.Command.WritesState() {
		if err := e.objects(req.ID).ClaimVars(ctx, e.Client); err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
	}
	secret, err := e.freshEnvSecret(ctx, req, labels, owners)
	if err != nil {
		return nil, err
	}
	requestToken := e.requestsTokens()
	if !requestToken {
		if err := e.createEnvSecret(ctx, secret); err != nil {
			return nil, err
		}
	}
	pod := e.podFor(req, labels, owners, requestToken)
	for _, kv := range traceEnv {
		name, value, _ := strings.Cut(kv, "=")
		pod.Spec.Containers[0].Env = append(pod.Spec.Containers[0].Env, corev1.EnvVar{Name: name, Value: value})
	}
	if err := e.createPod(ctx, req, pod, secret); err != nil {
		return nil, err
	}
	if !requestToken {
		return pod, nil
	}
	access, err := e.requestToken(ctx, pod)
	if err == nil {
		maps.Copy(secret.Data, access)
		err = e.createEnvSecret(ctx, secret)
	}
	if err != nil {
		// The pod cannot have started without its Secret: it goes at once.
		if derr := e.Client.Delete(ctx, pod, client.GracePeriodSeconds(0), client.Preconditions{UID: &pod.UID}); derr != nil && !apierrors.IsNotFound(derr) {
			return nil, errors.Join(err, fmt.Errorf("deleting the run pod: %w", derr))
		}
		if errors.Is(err, errTokenTooShort) && !e.tokensTooShort.Swap(true) {
			logf.FromContext(ctx).Info("runPodsMountTheirToken", "reason", err.Error())
			return e.create(runCtx, req)
		}
		return nil, err
	}
	return pod, nil
}

// freshEnvSecret is the run's credentials Secret, with an earlier run's deleted. The
// Secret is created afresh: one an earlier run left (with a token bound to its pod) would
// start this run's pod. A pod with a requested token is created before its Secret, which
// then holds the token bound to it: the kubelet starts the container only once the Secret
// is there.
func (e *PodExecutor) freshEnvSecret(ctx context.Context, req run.Request, labels map[string]string, owners []metav1.OwnerReference) (*corev1.Secret, error) {
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: req.ID.Namespace, Name: req.ID.EnvSecretName(), Labels: maps.Clone(labels), OwnerReferences: owners},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{},
	}
	secret.Labels[state.LabelObject] = "env"
	for k, v := range req.Env {
		secret.Data[k] = []byte(v)
	}
	if err := e.Client.Delete(ctx, secret); err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("deleting an earlier run's credentials Secret: %w", err)
	}
	return secret, nil
}

// createPod creates the run pod; a pod refused by a ResourceQuota is a run not started,
// whose credentials wait in no Secret while the run waits.
func (e *PodExecutor) createPod(ctx context.Context, req run.Request, pod *corev1.Pod, secret *corev1.Secret) error {
	err := e.Client.Create(ctx, pod)
	switch {
	case err == nil:
		return nil
	case apierrors.IsAlreadyExists(err):
		return inProgress(req.Command, run.ErrRunInProgress.Error())
	case refusedByQuota(err):
		if err := e.Client.Delete(ctx, secret); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting the credentials Secret: %w", err)
		}
		return &notStartedError{Reason: "the run pod is refused by a ResourceQuota: " + err.Error()}
	default:
		return fmt.Errorf("creating the run pod: %w", err)
	}
}

// createEnvSecret creates the run's credentials Secret.
func (e *PodExecutor) createEnvSecret(ctx context.Context, secret *corev1.Secret) error {
	if err := e.Client.Create(ctx, secret); err != nil {
		if refusedByQuota(err) {
			return &notStartedError{Reason: "the run's credentials Secret is refused by a ResourceQuota: " + err.Error()}
		}
		return fmt.Errorf("creating the credentials Secret: %w", err)
	}
	return nil
}

// objects are the run objects of id, as the controller reads them.
func (e *PodExecutor) objects(id run.ID) state.RunObjects {
	return e.State.Objects(id)
}

// podFor is the run pod of req. It is long because it is one pod spec, whose security
// settings, volumes and deadlines read best side by side.
func (e *PodExecutor) podFor(req run.Request, labels map[string]string, owners []metav1.OwnerReference, requestToken bool) *corev1.Pod {
	files, fileMounts, fileEnv := credentialVolumes(req)
	command := e.Command
	if len(command) == 0 {
		command = []string{"/terraformer"}
	}
	workDir, automount := "/work", (*bool)(nil)
	mounts := []corev1.VolumeMount{{Name: "work", MountPath: "/work"}, {Name: "tmp", MountPath: "/tmp"}}
	volumes := []corev1.Volume{
		{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: e.emptyDir()}},
		{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: e.emptyDir()}},
	}
	if requestToken {
		// No volume: the run writes in its container's own layer, bounded by its
		// ephemeral-storage limit and gone with the pod. The image's files are root's,
		// which the terraformer's user cannot write; /tmp is the one place it can.
		workDir, mounts, volumes = "/tmp/work", nil, nil
		automount = ptr.To(false)
	}
	args := []string{string(req.Command), "--namespace", req.ID.Namespace, "--name", req.ID.Name, "--work-dir", workDir}
	// The terraformer's default purpose: left out, so that a terraformer image of a
	// version without purposes still runs an Infrastructure's runs.
	if req.ID.Purpose != run.PurposeInfra {
		args = append(args, "--purpose", string(req.ID.Purpose))
	}
	settings := e.Settings
	settings.Parallelism = cmp.Or(req.Parallelism, settings.Parallelism)
	args = append(args, settings.Args()...)
	// Left out for the default, so that a terraformer image of a version without it
	// still runs.
	if e.State.Storage == state.StorageSecret {
		args = append(args, "--state-storage", string(e.State.Storage))
	}
	args = append(args, runArgs(req)...)
	var deadline *int64
	if e.RunTimeout > 0 {
		deadline = ptr.To(int64(e.RunTimeout.Seconds()))
	}
	grace := e.stopGrace()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: req.ID.Namespace, Name: req.ID.PodName(), Labels: e.podLabels(labels), OwnerReferences: owners},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			ServiceAccountName:            e.serviceAccountName(),
			AutomountServiceAccountToken:  automount,
			ActiveDeadlineSeconds:         deadline,
			TerminationGracePeriodSeconds: ptr.To(int64(grace.Seconds())),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				RunAsUser:      ptr.To(int64(65532)),
				FSGroup:        ptr.To(int64(65532)),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:    "terraformer",
				Image:   e.Image,
				Command: command,
				Args:    args,
				// Credentials come from the Secret, so they appear in no object but it.
				EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: req.ID.EnvSecretName()}}}},
				// The paths of the credential files, mounted from their Secrets, and the
				// pod's UID, which names it when it tells that its run succeeded.
				Env: append(fileEnv, corev1.EnvVar{Name: terraformer.EnvPodUID, ValueFrom: &corev1.EnvVarSource{
					FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.uid"},
				}}),
				Resources:                e.Resources,
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					ReadOnlyRootFilesystem:   ptr.To(!requestToken),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
				VolumeMounts: append(mounts, fileMounts...),
			}},
			Volumes: append(volumes, files...),
		},
	}
	e.Placement.apply(&pod.Spec)
	return pod
}

// emptyDir is a run pod's volume, bounded by its ephemeral-storage limit: the kubelet
// evicts a pod whose volume outgrows it.
func (e *PodExecutor) emptyDir() *corev1.EmptyDirVolumeSource {
	dir := &corev1.EmptyDirVolumeSource{}
	if limit, ok := e.Resources.Limits[corev1.ResourceEphemeralStorage]; ok {
		dir.SizeLimit = ptr.To(limit.DeepCopy())
	}
	return dir
}

func (e *PodExecutor) wait(ctx context.Context, pods *podWatch, req run.Request, pod *corev1.Pod, created time.Time, succeeded <-chan report.Succeeded) (*run.Result, error) {
	interval := e.PollInterval
	if interval == 0 {
		interval = defaultPodRecheckInterval
	}
	key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	// What the run pod wrote when its run succeeded, before the kubelet reports it.
	var announced *report.Succeeded
	for {
		// Asked for before the pod is read, so that no change between the two is missed.
		changed := pods.next(key)
		current, err := pods.get(ctx, key)
		if err != nil {
			return nil, err
		}
		if current == nil || (current.UID != pod.UID && pod.UID != "") {
			// The watch may not have seen the pod just created: the API server decides.
			if current, err = e.livePod(ctx, key, pod.UID); err != nil {
				return nil, err
			}
		}
		if current == nil {
			return nil, &run.Error{Command: string(req.Command), Message: "the run pod disappeared", Err: run.ErrTerraformFailed}
		}
		if announced != nil {
			current = exitedWith(current, announced.Message)
		}
		if outcome, done := e.outcome(ctx, req, current); done {
			result, err := outcome()
			if !errors.Is(err, errPodMoved) {
				read := time.Now()
				observePodRun(terminationMessageOf(current), created, read)
				tracePodRun(ctx, current, created, read)
				return result, err
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-changed:
		case <-time.After(interval):
		case s := <-succeeded:
			announced, succeeded = &s, nil
		}
	}
}

// livePod reads the pod from the API server: nil when it is gone or was replaced.
func (e *PodExecutor) livePod(ctx context.Context, key types.NamespacedName, uid types.UID) (*corev1.Pod, error) {
	current := &corev1.Pod{}
	if err := e.Client.Get(ctx, key, current); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading the run pod: %w", err)
	}
	if uid != "" && current.UID != uid {
		return nil, fmt.Errorf("the run pod was replaced")
	}
	return current, nil
}

// outcome tells whether the pod's run ended, and then how.
func (e *PodExecutor) outcome(ctx context.Context, req run.Request, current *corev1.Pod) (func() (*run.Result, error), bool) {
	phase := current.Status.Phase
	// A failure waits for the phase, whose reason tells a deadline from other failures.
	if code, ok := exited(current); ok && code == 0 && phase != corev1.PodFailed {
		phase = corev1.PodSucceeded
	}
	switch phase {
	case corev1.PodSucceeded:
		return func() (*run.Result, error) {
			if err := e.cleanup(ctx, req.ID, current); err != nil {
				return nil, err
			}
			// The run released the objects it may write; the vars Secret needs the
			// executor's rights.
			if req.Command == run.Destroy {
				if err := e.objects(req.ID).RemoveFinalizers(ctx, e.Client); err != nil && !apierrors.IsNotFound(err) {
					return nil, err
				}
			}
			readCtx, span := tracing.Start(ctx, "run.result")
			result, err := resultFromState(readCtx, e.objects(req.ID).Store(e.Client), req.Command)
			tracing.Fail(span, err)
			span.End()
			if err != nil {
				return nil, err
			}
			result.Phases, _, _ = termination.Parse(terminationMessageOf(current))
			return result, nil
		}, true
	case corev1.PodFailed:
		return func() (*run.Result, error) {
			runErr := e.failure(ctx, req, current)
			addInterrupted(ctx, report.Annotations{Client: e.Client, ID: req.ID}, runErr)
			if err := e.cleanup(ctx, req.ID, current); err != nil {
				return nil, errors.Join(runErr, err)
			}
			return nil, runErr
		}, true
	case corev1.PodPending, "":
		if message, ok := unschedulable(current); ok {
			return func() (*run.Result, error) {
				if err := e.withdraw(ctx, req.ID, current); err != nil {
					return nil, err
				}
				return nil, &notStartedError{Reason: "the run pod is unschedulable: " + message}
			}, true
		}
		if e.CreationTimeout > 0 && time.Since(pendingSince(current)) > e.CreationTimeout {
			return func() (*run.Result, error) {
				if err := e.cleanup(ctx, req.ID, current); err != nil {
					return nil, err
				}
				return nil, &run.Error{Command: string(req.Command), Message: fmt.Sprintf("%s: pending for more than %s", errCreationDeadline, e.CreationTimeout), Err: errCreationDeadline}
			}, true
		}
	}
	return nil, false
}

// errEarlierRunInterrupted fails a run that found the run pod of an earlier run failed
// with creates under way: the next run starts once they are kept.
var errEarlierRunInterrupted = errors.New("an earlier run ended with creates under way")

// errPodMoved says that a run pod the scheduler had found no node for changed before it
// could be withdrawn, most likely because it got a node: the run keeps its slot and
// follows it.
var errPodMoved = errors.New("the run pod changed while it was withdrawn")

// withdraw deletes a run pod the scheduler found no node for, with its credentials Secret,
// as its run gives its slot back: a pod may only be schedulable while its run holds a
// slot, else every waiting run's pod would start at once when capacity returns, past
// --max-runs, the account budgets, the throttle backoff and the drift share. The pod ran
// nothing, so its deletion is immediate. The deletion holds only while the pod is as the
// run saw it (its resourceVersion): one the scheduler bound meanwhile is not deleted, and
// errPodMoved says so.
func (e *PodExecutor) withdraw(ctx context.Context, id run.ID, pod *corev1.Pod) error {
	err := e.Client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID, ResourceVersion: &pod.ResourceVersion})
	switch {
	case apierrors.IsConflict(err):
		return errPodMoved
	case err != nil && !apierrors.IsNotFound(err):
		return fmt.Errorf("deleting the unschedulable run pod: %w", err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: id.EnvSecretName()}}
	if err := e.Client.Delete(ctx, secret); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the credentials Secret: %w", err)
	}
	return nil
}

// pendingSince is when the pod got its node, or was created while it has none: the time
// it waited for a node is not its start's.
func pendingSince(pod *corev1.Pod) time.Time {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return pod.CreationTimestamp.Time
}

// failure reads why a pod failed: its termination message, else its log.
func (e *PodExecutor) failure(ctx context.Context, req run.Request, pod *corev1.Pod) error {
	if pod.Status.Reason == "DeadlineExceeded" {
		return &run.Error{Command: string(req.Command), Message: fmt.Sprintf("%s: running for more than %s", ErrRunDeadline, e.RunTimeout), Err: ErrRunDeadline}
	}
	message := terminationMessageOf(pod)
	if _, re, ok := termination.Parse(message); ok {
		return re
	}
	if message == "" && e.Clientset != nil {
		logs, err := e.Clientset.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{TailLines: ptr.To(int64(200))}).DoRaw(ctx)
		if err == nil {
			message = string(logs)
		}
	}
	runErr := run.NewError(string(req.Command), message, fmt.Errorf("pod %s failed", pod.Name))
	// Killed before it could write its message, the run left only the end of its log,
	// which tells what it was doing, not why it ended.
	if killed := killedBy(pod); killed != "" {
		runErr.Message = killed + "; its log ends: " + runErr.Message
	}
	return runErr
}

// killedBy says how a run pod's container was killed, or "" when it exited by itself.
func killedBy(pod *corev1.Pod) string {
	for _, status := range pod.Status.ContainerStatuses {
		switch t := status.State.Terminated; {
		case t == nil:
		case t.Reason == "OOMKilled":
			return "the run pod's container ran out of memory (OOMKilled)"
		case t.ExitCode > 128:
			return fmt.Sprintf("the run pod's container was killed by signal %d", t.ExitCode-128)
		}
	}
	return ""
}

func terminationMessageOf(pod *corev1.Pod) string {
	var message string
	for _, status := range pod.Status.ContainerStatuses {
		if status.State.Terminated != nil {
			message = status.State.Terminated.Message
		}
	}
	return message
}

// cleanup deletes a finished pod and its credentials.
func (e *PodExecutor) cleanup(ctx context.Context, id run.ID, pod *corev1.Pod) error {
	options := []client.DeleteOption{client.Preconditions{UID: &pod.UID}}
	if _, ok := exited(pod); ok {
		// Nothing of the run is left to stop: the pod goes at once, not once the kubelet
		// tore its sandbox down, so that the object's next run can create its pod.
		options = append(options, client.GracePeriodSeconds(0))
	}
	if err := e.Client.Delete(ctx, pod, options...); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting the run pod: %w", err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: id.EnvSecretName()}}
	if err := e.Client.Delete(ctx, secret); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the credentials Secret: %w", err)
	}
	return nil
}

func (e *PodExecutor) podLabels(runLabels map[string]string) map[string]string {
	labels := maps.Clone(e.PodLabels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, runLabels)
	return labels
}

// resultFromState reads a finished run's outputs from the stored state.
func resultFromState(ctx context.Context, store *state.Store, command run.Command) (*run.Result, error) {
	if command == run.Validate {
		return &run.Result{Outputs: map[string]any{}}, nil
	}
	data, err := store.Load(ctx)
	if err != nil {
		return nil, err
	}
	outputs, err := state.Outputs(data)
	if err != nil {
		return nil, err
	}
	return &run.Result{Outputs: outputs, State: data}, nil
}

// runArgs are the terraformer's flags a run pod gets from a request.
func runArgs(req run.Request) []string {
	var args []string
	if len(req.ProtectedTypes) > 0 {
		args = append(args, "--protected-resource-types", strings.Join(req.ProtectedTypes, ","))
	}
	if req.AllowDestroy {
		args = append(args, "--allow-destroy")
	}
	if req.AllowDestroyPlan != "" {
		args = append(args, "--allow-destroy-plan", req.AllowDestroyPlan)
	}
	return args
}
