package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
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
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	tfrun "github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/state"
	"github.com/terraseed/terraseed/test/testenv"
	"github.com/terraseed/terraseed/test/testenv/operator"
)

// TestSoakRunPodsKilledAtRandom is test/soak's soak with the pod executor, on the node:
// while Infrastructures of the local provider are created, have their zones changed and
// are deleted (and created again under the same name), it SIGKILLs at random terraform in
// a run pod, a run pod's terraformer (its container dies, and its working directory with
// it), or the leading controller pod. Then it lets everything settle and checks every
// object: a live one succeeded with its last spec, has exactly its NetworkPolicies, each
// listed in its stored state; a deleted one left no policy, no run object and no run pod.
// `make soak` runs it; `make test` leaves it out.
func TestSoakRunPodsKilledAtRandom(t *testing.T) {
	requireNode(t)
	g := NewWithT(t)
	n, duration, wantKills := testenv.SoakSettings(t)
	waitControllerAvailable(t)
	s := &podSoak{t: t, rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 26)), kubeconfig: adminKubeconfig(t)}
	for range n {
		s.shoots = append(s.shoots, newShoot(t, s.kubeconfig))
		s.zones = append(s.zones, nil)
	}
	for i := range n {
		s.create(i)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { s.actions(stop) })
	ends := time.Now().Add(duration)
	for time.Now().Before(ends) || s.killCount() < wantKills {
		time.Sleep(time.Duration(1000+s.rng.IntN(2000)) * time.Millisecond)
		switch r := s.rng.IntN(12); {
		case r < 5:
			s.kill("terraform", "/usr/local/bin/terraform")
		case r < 8:
			s.kill("terraformer", "/terraformer")
		case r < 10:
			s.deleteState()
		default:
			s.killController()
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("soak (run pods): %d Infrastructures created (%d names), %d changes, %d deletions; %d kills: %v; %d states deleted with their history",
		s.created, n, s.changes, s.deletions, s.killCount(), s.kills, s.stateDeletions)

	started := time.Now()
	g.Eventually(func(g Gomega) {
		for i := range n {
			s.confirmLost(g, i)
		}
		for i := range n {
			s.expectSettled(g, i)
		}
	}).WithTimeout(20 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
	t.Logf("soak (run pods): settled %s after the last kill; %d recoveries stopped at zones that only a lost index knew, removed by hand and confirmed", time.Since(started).Round(time.Second), s.confirmed)
	for i := range n {
		s.expectExact(g, i)
	}
	var namespaces []string
	for _, sh := range s.shoots {
		namespaces = append(namespaces, sh.namespace)
	}
	recovered, err := testenv.Recoveries(context.Background(), kube, namespaces)
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("soak (run pods): recovered: %s", recovered)
}

var soakCIDRs = []string{"10.250.0.0/19", "10.250.32.0/19", "10.250.64.0/19"}

type podSoak struct {
	t          *testing.T
	rng        *rand.Rand
	kubeconfig []byte
	shoots     []*shoot

	mu sync.Mutex
	// zones are the zones' worker CIDRs of each live object; nil for a deleted one.
	zones                       [][]string
	created, changes, deletions int
	kills                       map[string]int
	stateDeletions              int
	// lost is when each object's state was deleted, until the object succeeded after: a deletion
	// then stops rather than leave what only the index knows (docs/operating.md, "A lost
	// state"), which is no loss of the controller's.
	lost map[int]time.Time
	// faults keeps a state deletion and an Infrastructure's deletion apart.
	faults sync.Mutex
	// stateLosses counts the state deletions of each object, which a failure names.
	stateLosses map[int]int
	// confirmed counts the recoveries that stopped at resources only a lost index knew,
	// removed by hand and confirmed.
	confirmed int
}

func (s *podSoak) killCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	total := 0
	for _, n := range s.kills {
		total += n
	}
	return total
}

func (s *podSoak) killed(what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kills == nil {
		s.kills = map[string]int{}
	}
	s.kills[what]++
}

// kill SIGKILLs one process of a run pod whose command starts with path: the run pods'
// processes are this machine's, of the run pods' user.
func (s *podSoak) kill(what, path string) {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, entry := range entries {
		pid, err := strconv.Atoi(entry.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", entry.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if args[0] != path {
			continue
		}
		var stat syscall.Stat_t
		if syscall.Stat(filepath.Join("/proc", entry.Name()), &stat) != nil || stat.Uid != 65532 {
			continue
		}
		pids = append(pids, pid)
	}
	if len(pids) > 0 && syscall.Kill(pids[s.rng.IntN(len(pids))], syscall.SIGKILL) == nil {
		s.killed(what)
	}
}

// killController deletes the leading controller pod at once: its container is SIGKILLed.
func (s *podSoak) killController() {
	// No leader for a moment (the Lease released by the pod killed last) is no failure of
	// the soak's: this Gomega's failure only skips the kill.
	var name string
	noLeader := false
	lookup := NewGomega(func(string, ...int) {
		noLeader = true
		panic("no leader")
	})
	func() {
		defer func() {
			if r := recover(); r != nil && !noLeader {
				panic(r)
			}
		}()
		name = leader(lookup)
	}()
	if noLeader {
		return
	}
	pod := &corev1.Pod{}
	pod.Namespace, pod.Name = releaseNamespace, name
	if kube.Delete(context.Background(), pod, client.GracePeriodSeconds(0)) == nil {
		s.killed("controller")
	}
}

func (s *podSoak) actions(stop chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-time.After(time.Duration(500+s.rng.IntN(1500)) * time.Millisecond):
		}
		i := s.rng.IntN(len(s.shoots))
		infra := &extensionsv1alpha1.Infrastructure{}
		err := kube.Get(context.Background(), client.ObjectKeyFromObject(s.shoots[i].infra), infra)
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

// deleteState deletes for good the stored state of a live Infrastructure, its parts and
// its history, and asks for a reconcile.
func (s *podSoak) deleteState() {
	ctx := context.Background()
	i := s.rng.IntN(len(s.shoots))
	sh := s.shoots[i]
	infra := &extensionsv1alpha1.Infrastructure{}
	s.faults.Lock()
	if err := kube.Get(ctx, client.ObjectKeyFromObject(sh.infra), infra); err != nil || infra.DeletionTimestamp != nil {
		s.faults.Unlock()
		return
	}
	objects := state.RunObjects{ID: tfrun.ID{Namespace: sh.namespace, Name: infraName, Purpose: tfrun.PurposeInfra}}
	s.mu.Lock()
	if s.lost == nil {
		s.lost = map[int]time.Time{}
	}
	// Marked before the deletion: the actions delete no Infrastructure whose state is lost.
	s.lost[i] = time.Now()
	s.mu.Unlock()
	s.faults.Unlock()
	deleted, err := testenv.LoseState(ctx, kube, sh.namespace, []string{objects.StateName(), objects.HistoryName()}, map[string]string{state.LabelPartOf: objects.StateName()})
	if err != nil || !deleted {
		return
	}
	patch := client.MergeFrom(infra.DeepCopy())
	metav1.SetMetaDataAnnotation(&infra.ObjectMeta, "gardener.cloud/operation", "reconcile")
	if err := kube.Patch(ctx, infra, patch); err != nil && !apierrors.IsNotFound(err) {
		s.t.Error(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lost[i] = time.Now()
	s.stateDeletions++
	if s.stateLosses == nil {
		s.stateLosses = map[int]int{}
	}
	s.stateLosses[i]++
}

// stateLost is whether object i's state was deleted and is not back: an operation
// succeeded after the deletion, and a state is stored again. A success alone is not enough:
// an apply whose run saved its state before the deletion succeeds after it.
func (s *podSoak) stateLost(i int, infra *extensionsv1alpha1.Infrastructure) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if lost, ok := s.lost[i]; ok && testenv.SucceededSince(infra, lost) {
		objects := state.RunObjects{ID: tfrun.ID{Namespace: s.shoots[i].namespace, Name: infraName, Purpose: tfrun.PurposeInfra}}
		if stored, err := objects.ReadState(context.Background(), kube); err == nil && stored != nil {
			delete(s.lost, i)
		}
	}
	_, lost := s.lost[i]
	return lost
}

// deleteUnlessStateLost deletes object i, or changes it while its state is lost.
func (s *podSoak) deleteUnlessStateLost(i int, infra *extensionsv1alpha1.Infrastructure) {
	s.faults.Lock()
	defer s.faults.Unlock()
	if s.stateLost(i, infra) {
		s.change(i, infra)
		return
	}
	s.delete(i, infra)
}

func (s *podSoak) pickZones() []string {
	zones := slices.Clone(soakCIDRs)
	s.rng.Shuffle(len(zones), func(a, b int) { zones[a], zones[b] = zones[b], zones[a] })
	return zones[:1+s.rng.IntN(len(zones))]
}

func (s *podSoak) create(i int) {
	zones := s.pickZones()
	infra := s.shoots[i].infra.DeepCopy()
	infra.ResourceVersion, infra.UID = "", ""
	infra.Spec.ProviderConfig = testenv.LocalProviderConfig(zones...)
	if err := kube.Create(context.Background(), infra); err != nil {
		s.t.Error(err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.zones[i] = zones
	s.created++
}

func (s *podSoak) change(i int, infra *extensionsv1alpha1.Infrastructure) {
	zones := s.pickZones()
	infra.Spec.ProviderConfig = testenv.LocalProviderConfig(zones...)
	if err := kube.Update(context.Background(), infra); err != nil {
		if !apierrors.IsConflict(err) {
			s.t.Error(err)
		}
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.zones[i] = zones
	s.changes++
}

func (s *podSoak) delete(i int, infra *extensionsv1alpha1.Infrastructure) {
	if err := kube.Delete(context.Background(), infra, client.Preconditions{UID: &infra.UID}); err != nil {
		s.t.Error(err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.zones[i] = nil
	s.deletions++
}

// confirmLost does what an operator does where an apply's recovery stopped at resources
// that only a lost state's index knows and the spec no longer declares (a zone removed
// while the state was lost): it removes them by hand, each a zone the spec no longer has,
// and confirms.
func (s *podSoak) confirmLost(g Gomega, i int) {
	ctx := context.Background()
	sh := s.shoots[i]
	infra := &extensionsv1alpha1.Infrastructure{}
	if err := kube.Get(ctx, client.ObjectKeyFromObject(sh.infra), infra); err != nil {
		return
	}
	addresses := operator.LostResources(infra)
	if len(addresses) == 0 {
		return
	}
	for _, address := range addresses {
		var obj client.Object
		var zone int
		switch address {
		case "kubectl_manifest.namespace":
			obj = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sh.target()}}
		case "kubectl_manifest.deny_all":
			obj = &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: sh.target(), Name: "deny-all"}}
		case "kubectl_manifest.ssh_public_key":
			obj = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: sh.target(), Name: "ssh-publickey"}}
		default:
			_, err := fmt.Sscanf(address, "kubectl_manifest.zone_%d", &zone)
			g.Expect(err).NotTo(HaveOccurred(), "%s: an object of the local provider, not %s", sh.namespace, address)
			obj = &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: sh.target(), Name: fmt.Sprintf("zone-%d", zone)}}
		}
		// A live object's spec declares all of them but the zones it dropped.
		if s.zones[i] != nil {
			g.Expect(address).To(HavePrefix("kubectl_manifest.zone_"), "%s: %s is in the spec", sh.namespace, address)
			g.Expect(zone).To(BeNumerically(">=", len(s.zones[i])), "%s: zone %d is in the spec", sh.namespace, zone)
		}
		g.Expect(client.IgnoreNotFound(kube.Delete(ctx, obj))).To(Succeed())
	}
	g.Expect(operator.ConfirmLostRemoved(ctx, kube, infra, addresses)).To(Succeed())
	s.confirmed++
}

func (s *podSoak) expectSettled(g Gomega, i int) {
	sh := s.shoots[i]
	infra := &extensionsv1alpha1.Infrastructure{}
	err := kube.Get(context.Background(), client.ObjectKeyFromObject(sh.infra), infra)
	if s.zones[i] == nil {
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s is deleted; last operation %+v, last error %+v, annotations %v",
			sh.namespace, infra.Status.LastOperation, infra.Status.LastError, infra.Annotations)
		return
	}
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(infra.Status.ObservedGeneration).To(Equal(infra.Generation), "%s applied its last spec; last operation %+v, last error %+v, annotations %v",
		sh.namespace, infra.Status.LastOperation, infra.Status.LastError, infra.Annotations)
	g.Expect(infra.Status.LastOperation).NotTo(BeNil())
	g.Expect(infra.Status.LastOperation.State).To(Equal(extensionsv1alpha1.LastOperationStateSucceeded), "%s: %+v", sh.namespace, infra.Status.LastError)
}

func (s *podSoak) expectExact(g Gomega, i int) {
	ctx := context.Background()
	sh := s.shoots[i]
	objects := state.RunObjects{ID: tfrun.ID{Namespace: sh.namespace, Name: infraName, Purpose: tfrun.PurposeInfra}}
	policies := sh.networkPolicies(g)
	if s.zones[i] == nil {
		g.Expect(policies).To(BeEmpty(), "%s is deleted: its policies are destroyed", sh.namespace)
		for _, name := range []string{objects.ConfigName(), objects.StateName(), objects.HistoryName()} {
			g.Expect(apierrors.IsNotFound(kube.Get(ctx, client.ObjectKey{Namespace: sh.namespace, Name: name}, &corev1.ConfigMap{}))).To(BeTrue(), "%s/%s is deleted", sh.namespace, name)
		}
		g.Expect(apierrors.IsNotFound(kube.Get(ctx, client.ObjectKey{Namespace: sh.namespace, Name: runPod}, &corev1.Pod{}))).To(BeTrue(), "%s: no run pod", sh.namespace)
		return
	}
	want := []string{"deny-all"}
	for z := range s.zones[i] {
		want = append(want, fmt.Sprintf("zone-%d", z))
	}
	g.Expect(policies).To(ConsistOf(want), func() string {
		return fmt.Sprintf("%s: exactly its policies (its state deleted %d times)\n%s", sh.namespace, s.stateLosses[i], s.history(sh))
	})
	stored, err := objects.ReadState(ctx, kube)
	g.Expect(err).NotTo(HaveOccurred())
	for z := range s.zones[i] {
		g.Expect(string(stored)).To(ContainSubstring(fmt.Sprintf(`"name": "zone_%d"`, z)), "%s: the stored state lists zone %d", sh.namespace, z)
	}
}

// history says what a failure needs to tell how an object came to differ: the addresses
// of its stored state and its events, oldest first.
func (s *podSoak) history(sh *shoot) string {
	ctx := context.Background()
	var b strings.Builder
	objects := state.RunObjects{ID: tfrun.ID{Namespace: sh.namespace, Name: infraName, Purpose: tfrun.PurposeInfra}}
	if raw, err := objects.ReadState(ctx, kube); err == nil {
		var doc struct {
			Serial    int64
			Resources []struct{ Type, Name string }
		}
		_ = json.Unmarshal(raw, &doc)
		fmt.Fprintf(&b, "stored state serial %d:", doc.Serial)
		for _, r := range doc.Resources {
			fmt.Fprintf(&b, " %s.%s", r.Type, r.Name)
		}
		b.WriteString("\n")
	}
	events := &corev1.EventList{}
	if err := kube.List(ctx, events, client.InNamespace(sh.namespace)); err == nil {
		slices.SortFunc(events.Items, func(a, b corev1.Event) int { return a.LastTimestamp.Compare(b.LastTimestamp.Time) })
		for _, e := range events.Items {
			fmt.Fprintf(&b, "%s %s/%s %s ×%d: %s\n", e.LastTimestamp.Format(time.TimeOnly), e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Count, e.Message)
		}
	}
	return b.String()
}
