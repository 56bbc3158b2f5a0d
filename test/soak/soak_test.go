package soak_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/extension"
	"github.com/terraseed/terraseed/controller/kinds"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/state"
	"github.com/terraseed/terraseed/test/testenv"
	"github.com/terraseed/terraseed/test/testenv/operator"
)

var env *testenv.Environment

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env)) }

// TestSoakRandomKillsLoseNothingAndLeaveNothingBehind runs one controller process with the
// local executor against envtest and, while Infrastructures of the "soak" provider are
// created, have their zones changed and are deleted (and created again under the same
// name), SIGKILLs at random either a terraform process of a run or the controller itself
// (started again at once), or deletes the state object of a live Infrastructure with its
// parts and its history, for good (finalizers removed), and asks for a reconcile as
// gardenlet does, or deletes the state object alone as kubectl does (its finalizer left in
// place), which nobody asks the controller about. Then it lets everything settle and
// checks every object: a live Infrastructure succeeded with its last spec and has exactly
// one ConfigMap per zone, each listed in its stored state, which no deletion keeps
// terminating; a deleted one left no ConfigMap, no run object and no run directory; and no
// process of terraform's (terraform, a provider plugin, a provisioner) is left working in
// the controller's run directories.
func TestSoakRandomKillsLoseNothingAndLeaveNothingBehind(t *testing.T) {
	g := NewWithT(t)
	n, duration, wantKills := testenv.SoakSettings(t)
	s := newSoak(t, n)
	s.start()
	for i := range n {
		s.create(i)
	}

	chaosEnds := time.Now().Add(duration)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { s.actions(stop) })
	for time.Now().Before(chaosEnds) || s.killCount() < wantKills {
		time.Sleep(time.Duration(1500+s.rng.IntN(2500)) * time.Millisecond)
		switch r := s.rng.IntN(10); {
		case r < 2:
			s.killController()
		case r < 4:
			s.deleteState()
		case r < 6:
			s.deleteStateObject()
		default:
			s.killTerraform()
		}
	}
	close(stop)
	wg.Wait()
	s.ensureRunning()
	t.Logf("soak: %d Infrastructures created (%d names), %d changes, %d deletions; %d kills: %d of terraform, %d of the controller; %d states deleted with their history, %d state objects deleted alone as kubectl does",
		s.created, n, s.changes, s.deletions, s.killCount(), s.terraformKills, s.controllerKills, s.stateDeletions, s.stateObjectDeletions)

	started := time.Now()
	g.Eventually(func(g Gomega) {
		for i := range n {
			s.confirmLost(g, i)
		}
		for i := range n {
			s.expectSettled(g, i)
		}
	}).WithTimeout(15 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
	t.Logf("soak: settled %s after the last kill; %d recoveries stopped at zones that only a lost index knew, removed by hand and confirmed", time.Since(started).Round(time.Second), s.confirmed)
	for i := range n {
		s.expectExact(g, i)
	}
	namespaces := make([]string, n)
	for i := range n {
		namespaces[i] = s.namespace(i)
	}
	recovered, err := testenv.Recoveries(context.Background(), env.Client, namespaces)
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("soak: recovered: %s", recovered)
	// Settled, nothing runs: whatever of terraform's still works in a run directory was
	// left by a run that was killed.
	g.Eventually(func() map[int]string { return s.processesLeft() }).WithTimeout(time.Minute).Should(BeEmpty(),
		"processes of killed runs are left working in the run directories")
	t.Logf("soak: no process left in the run directories")
}

type soak struct {
	t          *testing.T
	binary     string
	kubeconfig string
	admin      []byte
	workDir    string
	providers  string
	prefix     string
	log        *os.File
	rng        *rand.Rand

	mu         sync.Mutex
	controller *exec.Cmd
	// desired is the providerConfig zones of each live object; nil for a deleted one.
	desired [][]string
	// targets are the namespaces each object's runs create, one per incarnation of the
	// object: envtest runs no namespace controller, so a deleted one stays terminating.
	targets                         []string
	created, changes, deletions     int
	terraformKills, controllerKills int
	stateDeletions                  int
	// stateObjectDeletions counts the state objects deleted alone, as kubectl does;
	// writtenAnew says, for each incarnation of an object, that its state object was.
	stateObjectDeletions int
	writtenAnew          []bool
	// lost is when the state of each object was deleted, until the object succeeded after: a
	// deletion then would find only the index, and stop rather than leave resources
	// behind (docs/operating.md, "A lost state"), which is no loss of the controller's.
	lost []time.Time
	// faults keeps a state deletion and an Infrastructure's deletion apart.
	faults sync.Mutex
	// stateLosses counts the state deletions of each object, which a failure names.
	stateLosses []int
	// confirmed counts the recoveries that stopped at resources only a lost index knew,
	// removed by hand and confirmed.
	confirmed        int
	controllerExited chan struct{}
}

func newSoak(t *testing.T, n int) *soak {
	t.Helper()
	g := NewWithT(t)
	dir := t.TempDir()
	s := &soak{t: t, binary: testenv.ControllerBinary(t), kubeconfig: filepath.Join(dir, "kubeconfig"),
		workDir: filepath.Join(dir, "work"), prefix: fmt.Sprintf("soak-%d-", time.Now().Unix()%100000),
		rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 26)), desired: make([][]string, n), targets: make([]string, n), lost: make([]time.Time, n), stateLosses: make([]int, n), writtenAnew: make([]bool, n)}
	var err error
	s.admin, err = env.AdminKubeconfig()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(s.kubeconfig, s.admin, 0o600)).To(Succeed())
	s.providers, err = filepath.Abs("testdata/providers")
	g.Expect(err).NotTo(HaveOccurred())
	// Outside the test's temporary directory: a failed soak's log outlives the test.
	s.log, err = os.CreateTemp("", "terraseed-soak-*.log")
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.controller != nil {
			_ = s.controller.Process.Signal(syscall.SIGTERM)
			<-s.controllerExited
		}
		if t.Failed() {
			t.Logf("the controller's log: %s", s.log.Name())
		} else {
			_ = os.Remove(s.log.Name())
		}
	})
	for i := range n {
		ns := s.namespace(i)
		g.Expect(env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		g.Expect(env.Client.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cloudprovider"},
			Data: map[string][]byte{"kubeconfig": s.admin}})).To(Succeed())
	}
	return s
}

func (s *soak) namespace(i int) string { return fmt.Sprintf("%s%02d", s.prefix, i) }
func (s *soak) key(i int) client.ObjectKey {
	return client.ObjectKey{Namespace: s.namespace(i), Name: "infrastructure"}
}

// start starts the controller process; s.mu is not held.
func (s *soak) start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.startLocked()
}

func (s *soak) startLocked() {
	cmd := exec.Command(s.binary, "run", "--kubeconfig", s.kubeconfig,
		"--executor=local", "--terraform", testenv.Terraform(s.t), "--plugin-mirror", testenv.ProviderMirror(s.t),
		"--work-dir", s.workDir, "--providers-dir", s.providers, "--provider-types=soak",
		"--metrics-bind-address=0", "--health-probe-bind-address=0", "--heartbeat-namespace=", "--drift-interval=0",
		"--max-runs=4")
	cmd.Stdout, cmd.Stderr = s.log, s.log
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.controller, s.controllerExited = cmd, exited
}

// ensureRunning starts the controller again should it have exited by itself.
func (s *soak) ensureRunning() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.controllerExited:
		s.t.Log("soak: the controller had exited; starting it again")
		s.startLocked()
	default:
	}
}

func (s *soak) killCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.terraformKills + s.controllerKills
}

// killController SIGKILLs the controller (its terraform processes die with it) and starts
// it again.
func (s *soak) killController() {
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = s.controller.Process.Signal(syscall.SIGKILL)
	<-s.controllerExited
	s.controllerKills++
	s.startLocked()
}

// killTerraform SIGKILLs one terraform process working in the controller's run
// directories, if one is.
func (s *soak) killTerraform() {
	terraformPath, err := filepath.EvalSymlinks(testenv.Terraform(s.t))
	if err != nil {
		s.t.Fatal(err)
	}
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, entry := range entries {
		pid, err := strconv.Atoi(entry.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", entry.Name(), "exe"))
		if err != nil || exe != terraformPath {
			continue
		}
		if cwd, err := os.Readlink(filepath.Join("/proc", entry.Name(), "cwd")); err == nil && strings.HasPrefix(cwd, s.workDir) {
			pids = append(pids, pid)
		}
	}
	if len(pids) == 0 {
		return
	}
	if syscall.Kill(pids[s.rng.IntN(len(pids))], syscall.SIGKILL) == nil {
		s.mu.Lock()
		s.terraformKills++
		s.mu.Unlock()
	}
}

// actions creates, changes and deletes Infrastructures at random until stop is closed.
func (s *soak) actions(stop chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-time.After(time.Duration(500+s.rng.IntN(1500)) * time.Millisecond):
		}
		i := s.rng.IntN(len(s.desired))
		infra := &extensionsv1alpha1.Infrastructure{}
		err := env.Client.Get(context.Background(), s.key(i), infra)
		switch {
		case apierrors.IsNotFound(err):
			s.create(i)
		case err != nil:
			s.t.Error(err)
			return
		case infra.DeletionTimestamp != nil:
		case s.rng.IntN(10) < 7:
			s.change(i, infra)
		default:
			s.deleteUnlessStateLost(i, infra)
		}
	}
}

// zones is a random list of one to three zone names, new names among them at times.
func (s *soak) zones() []string {
	zones := make([]string, 1+s.rng.IntN(3))
	for i := range zones {
		zones[i] = fmt.Sprintf("z%d-%d", i, s.rng.IntN(3))
	}
	return zones
}

func (s *soak) providerConfig(i int, zones []string) *k8sruntime.RawExtension {
	quoted := make([]string, len(zones))
	for j, z := range zones {
		quoted[j] = strconv.Quote(z)
	}
	return &k8sruntime.RawExtension{Raw: fmt.Appendf(nil, `{"namespace":%q,"zones":[%s]}`, s.targets[i], strings.Join(quoted, ","))}
}

func (s *soak) create(i int) {
	zones := s.zones()
	s.mu.Lock()
	s.targets[i] = fmt.Sprintf("%s-%d", s.namespace(i), s.created)
	s.mu.Unlock()
	infra := &extensionsv1alpha1.Infrastructure{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace(i), Name: "infrastructure"},
		Spec: extensionsv1alpha1.InfrastructureSpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "soak", ProviderConfig: s.providerConfig(i, zones)},
			Region:      "local-1",
			SecretRef:   corev1.SecretReference{Name: "cloudprovider"},
		},
	}
	if err := env.Client.Create(context.Background(), infra); err != nil {
		s.t.Error(err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.desired[i] = zones
	s.writtenAnew[i] = false
	s.created++
}

func (s *soak) change(i int, infra *extensionsv1alpha1.Infrastructure) {
	zones := s.zones()
	infra.Spec.ProviderConfig = s.providerConfig(i, zones)
	if err := env.Client.Update(context.Background(), infra); err != nil {
		if !apierrors.IsConflict(err) {
			s.t.Error(err)
		}
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.desired[i] = zones
	s.changes++
}

func (s *soak) delete(i int, infra *extensionsv1alpha1.Infrastructure) {
	if err := env.Client.Delete(context.Background(), infra, client.Preconditions{UID: &infra.UID}); err != nil {
		s.t.Error(err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.desired[i] = nil
	s.deletions++
}

// deleteState deletes for good the stored state of a live Infrastructure, its parts and
// its history, as a lost state is lost, and asks for a reconcile, as gardenlet does.
func (s *soak) deleteState() {
	ctx := context.Background()
	i := s.rng.IntN(len(s.desired))
	infra := &extensionsv1alpha1.Infrastructure{}
	s.faults.Lock()
	if err := env.Client.Get(ctx, s.key(i), infra); err != nil || infra.DeletionTimestamp != nil {
		s.faults.Unlock()
		return
	}
	objects := state.RunObjects{ID: run.ID{Namespace: s.namespace(i), Name: "infrastructure", Purpose: run.PurposeInfra}}
	s.mu.Lock()
	// Marked before the deletion: the actions delete no Infrastructure whose state is lost.
	s.lost[i] = time.Now()
	s.mu.Unlock()
	s.faults.Unlock()
	deleted, err := testenv.LoseState(ctx, env.Client, s.namespace(i), []string{objects.StateName(), objects.HistoryName()}, map[string]string{state.LabelPartOf: objects.StateName()})
	if err != nil {
		s.t.Error(err)
		return
	}
	if !deleted {
		return
	}
	patch := client.MergeFrom(infra.DeepCopy())
	metav1.SetMetaDataAnnotation(&infra.ObjectMeta, "gardener.cloud/operation", "reconcile")
	if err := env.Client.Patch(ctx, infra, patch); err != nil && !apierrors.IsNotFound(err) {
		s.t.Error(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lost[i] = time.Now()
	s.stateDeletions++
	s.stateLosses[i]++
}

// deleteStateObject deletes the state object of a live Infrastructure as `kubectl delete`
// does: its finalizer stays, its parts and its history stay, and nobody asks for a
// reconcile. The controller must neither keep it terminating nor lose its state.
func (s *soak) deleteStateObject() {
	ctx := context.Background()
	i := s.rng.IntN(len(s.desired))
	infra := &extensionsv1alpha1.Infrastructure{}
	s.faults.Lock()
	defer s.faults.Unlock()
	if err := env.Client.Get(ctx, s.key(i), infra); err != nil || infra.DeletionTimestamp != nil {
		return
	}
	objects := state.RunObjects{ID: run.ID{Namespace: s.namespace(i), Name: "infrastructure", Purpose: run.PurposeInfra}}
	cm := &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: s.namespace(i), Name: objects.StateName()}, cm); err != nil || cm.DeletionTimestamp != nil {
		return
	}
	if err := env.Client.Delete(ctx, cm, client.Preconditions{UID: &cm.UID}); err != nil {
		if !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			s.t.Error(err)
		}
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stateObjectDeletions++
	s.writtenAnew[i] = true
}

// processesLeft are the processes working in the controller's run directories, by pid,
// with their command: terraform, its provider plugins and provisioners take the run's
// working directory. Ended ones that nobody reaped are not working.
func (s *soak) processesLeft() map[int]string {
	dir, err := filepath.EvalSymlinks(s.workDir)
	if err != nil {
		s.t.Fatal(err)
	}
	left := map[int]string{}
	entries, _ := os.ReadDir("/proc")
	for _, entry := range entries {
		pid, err := strconv.Atoi(entry.Name())
		if err != nil {
			continue
		}
		cwd, err := os.Readlink(filepath.Join("/proc", entry.Name(), "cwd"))
		if err != nil || !strings.HasPrefix(cwd, dir+"/") {
			continue
		}
		comm, _ := os.ReadFile(filepath.Join("/proc", entry.Name(), "comm"))
		left[pid] = strings.TrimSpace(string(comm))
	}
	return left
}

// stateLost is whether object i's state was deleted and is not back: an operation
// succeeded after the deletion, and a state is stored again. A success alone is not enough:
// an apply whose run saved its state before the deletion succeeds after it.
func (s *soak) stateLost(i int, infra *extensionsv1alpha1.Infrastructure) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.lost[i].IsZero() && testenv.SucceededSince(infra, s.lost[i]) {
		objects := state.RunObjects{ID: run.ID{Namespace: s.namespace(i), Name: "infrastructure", Purpose: run.PurposeInfra}}
		if stored, err := objects.ReadState(context.Background(), env.Client); err == nil && stored != nil {
			s.lost[i] = time.Time{}
		}
	}
	return !s.lost[i].IsZero()
}

// deleteUnlessStateLost deletes object i, or changes it while its state is lost.
func (s *soak) deleteUnlessStateLost(i int, infra *extensionsv1alpha1.Infrastructure) {
	s.faults.Lock()
	defer s.faults.Unlock()
	if s.stateLost(i, infra) {
		s.change(i, infra)
		return
	}
	s.delete(i, infra)
}

// confirmLost does what an operator does where an apply's recovery stopped at resources
// that only a lost state's index knows and the spec no longer declares (a zone removed
// while the state was lost): it removes them by hand, each of a zone the spec no longer
// has, and confirms.
func (s *soak) confirmLost(g Gomega, i int) {
	ctx := context.Background()
	infra := &extensionsv1alpha1.Infrastructure{}
	if err := env.Client.Get(ctx, s.key(i), infra); err != nil {
		return
	}
	addresses := operator.LostResources(infra)
	if len(addresses) == 0 {
		return
	}
	for _, address := range addresses {
		if address == "kubectl_manifest.namespace" {
			g.Expect(s.desired[i]).To(BeNil(), "%s: the namespace is in the spec", s.key(i))
			g.Expect(client.IgnoreNotFound(env.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.targets[i]}}))).To(Succeed())
			continue
		}
		var kind string
		var zone int
		_, err := fmt.Sscanf(strings.Replace(address, ".zone_", " ", 1), "%s %d", &kind, &zone)
		g.Expect(err).NotTo(HaveOccurred(), "%s: an object of the soak provider, not %s", s.key(i), address)
		g.Expect(zone).To(BeNumerically(">=", len(s.desired[i])), "%s: zone %d is in the spec", s.key(i), zone)
		if kind != "kubectl_manifest" {
			continue // an id, nothing outside the state
		}
		list := &corev1.ConfigMapList{}
		g.Expect(env.Client.List(ctx, list, client.InNamespace(s.targets[i]), client.MatchingLabels{"soak": "zone"})).To(Succeed())
		for _, cm := range list.Items {
			if strings.HasPrefix(cm.Name, fmt.Sprintf("zone-%d-", zone)) {
				g.Expect(client.IgnoreNotFound(env.Client.Delete(ctx, &cm))).To(Succeed())
			}
		}
	}
	g.Expect(operator.ConfirmLostRemoved(ctx, env.Client, infra, addresses)).To(Succeed())
	s.confirmed++
}

// expectSettled checks that object i is what was last asked for: succeeded with its last
// spec, or gone.
func (s *soak) expectSettled(g Gomega, i int) {
	infra := &extensionsv1alpha1.Infrastructure{}
	err := env.Client.Get(context.Background(), s.key(i), infra)
	if s.desired[i] == nil {
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s is deleted; last operation %+v, last error %+v, annotations %v",
			s.key(i), infra.Status.LastOperation, infra.Status.LastError, infra.Annotations)
		return
	}
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(infra.Status.ObservedGeneration).To(Equal(infra.Generation), "%s applied its last spec; last operation %+v, last error %+v, annotations %v",
		s.key(i), infra.Status.LastOperation, infra.Status.LastError, infra.Annotations)
	g.Expect(infra.Status.LastOperation).NotTo(BeNil())
	g.Expect(infra.Status.LastOperation.State).To(Equal(extensionsv1alpha1.LastOperationStateSucceeded), "%s: %+v", s.key(i), infra.Status.LastError)
	objects := state.RunObjects{ID: run.ID{Namespace: s.namespace(i), Name: "infrastructure", Purpose: run.PurposeInfra}}
	cm := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: s.namespace(i), Name: objects.StateName()}, cm)).To(Succeed())
	g.Expect(cm.DeletionTimestamp).To(BeNil(), "%s: no deletion keeps the state object terminating", s.key(i))
	if s.writtenAnew[i] {
		deleted := extension.FindCondition(&infra.Status.DefaultStatus, kinds.ConditionStateObjectDeleted)
		g.Expect(deleted).NotTo(BeNil(), "%s: the deletion of its state object is reported", s.key(i))
		g.Expect(deleted.Reason).To(Equal("StateObjectWrittenAnew"), "%s: %s", s.key(i), deleted.Message)
	}
}

// expectExact checks the objects of a settled object i: exactly one ConfigMap per zone of
// a live Infrastructure, each listed in its stored state, and nothing of a deleted one.
func (s *soak) expectExact(g Gomega, i int) {
	ctx := context.Background()
	list := &corev1.ConfigMapList{}
	g.Expect(env.Client.List(ctx, list, client.InNamespace(s.targets[i]), client.MatchingLabels{"soak": "zone"})).To(Succeed())
	var names []string
	zoneOf := map[string]string{}
	for _, cm := range list.Items {
		names = append(names, cm.Name)
		zoneOf[cm.Name] = cm.Data["zone"]
	}
	objects := state.RunObjects{ID: run.ID{Namespace: s.namespace(i), Name: "infrastructure", Purpose: run.PurposeInfra}}
	owners := filepath.Join(s.workDir, "runs", s.namespace(i), "infrastructure.infra")
	if s.desired[i] == nil {
		g.Expect(names).To(BeEmpty(), "%s is deleted: its ConfigMaps are destroyed", s.key(i))
		for _, name := range []string{objects.ConfigName(), objects.StateName(), objects.HistoryName()} {
			g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: s.namespace(i), Name: name}, &corev1.ConfigMap{}))).To(BeTrue(), "%s/%s is deleted", s.namespace(i), name)
		}
		g.Expect(owners).NotTo(BeADirectory(), "%s is deleted: its run directory is removed", s.key(i))
		return
	}
	g.Expect(names).To(HaveLen(len(s.desired[i])), "%s: one ConfigMap per zone, none twice (its state deleted %d times): %v", s.key(i), s.stateLosses[i], names)
	stored, err := objects.ReadState(ctx, env.Client)
	g.Expect(err).NotTo(HaveOccurred())
	for z, zone := range s.desired[i] {
		prefix := fmt.Sprintf("zone-%d-", z)
		index := slices.IndexFunc(names, func(name string) bool { return strings.HasPrefix(name, prefix) })
		g.Expect(index).NotTo(Equal(-1), "%s: zone %d has its ConfigMap", s.key(i), z)
		g.Expect(zoneOf[names[index]]).To(Equal(zone))
		g.Expect(string(stored)).To(ContainSubstring(strings.TrimPrefix(names[index], prefix)), "%s: the stored state holds the id of %s", s.key(i), names[index])
	}
	entries, err := os.ReadDir(owners)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(HaveLen(1), "%s: one run directory, its own", s.key(i))
}
