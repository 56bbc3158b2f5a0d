package kinds_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/controller/extension"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/state"
)

// zonalShoot is a shoot of the test provider "zonal", with its credentials; its
// Infrastructure is not created yet.
func zonalShoot(t *testing.T, zones int, quotaExceeded bool) *shoot {
	t.Helper()
	s := newShoot(t)
	s.infra.Spec.Type = "zonal"
	s.infra.Spec.ProviderConfig = zonalConfig(zones, quotaExceeded)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: "cloudprovider"}, Data: map[string][]byte{"token": []byte("secret-token")}}
	NewWithT(t).Expect(env.Client.Create(context.Background(), secret)).To(Succeed())
	return s
}

// createdZonalShoot is a one-zone shoot whose Infrastructure a running controller created.
func createdZonalShoot(t *testing.T) *shoot {
	t.Helper()
	s := zonalShoot(t, 1, false)
	startController(t, s.namespace, workDir(t))
	NewWithT(t).Expect(env.Client.Create(context.Background(), s.infra)).To(Succeed())
	s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	return s
}

func zonalConfig(zones int, quotaExceeded bool) *runtime.RawExtension {
	return &runtime.RawExtension{Raw: fmt.Appendf(nil, `{"zones":%d,"quotaExceeded":%t}`, zones, quotaExceeded)}
}

// storedState is the serial, lineage and the ids of the zone resources of the state in the
// state ConfigMap.
type storedState struct {
	Serial    int64
	Lineage   string
	Resources []struct {
		Type      string
		Name      string
		Instances []struct {
			IndexKey   any `json:"index_key"`
			Attributes struct {
				ID string
			}
		}
	}
}

func (s *shoot) storedState(g Gomega) (raw []byte, parsed storedState) {
	raw, err := state.RunObjects{ID: run.ID{Namespace: s.namespace, Name: s.infra.Name, Purpose: run.PurposeInfra}}.ReadState(context.Background(), env.Client)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(raw).NotTo(BeEmpty())
	g.Expect(json.Unmarshal(raw, &parsed)).To(Succeed())
	return raw, parsed
}

// zoneIDs are the ids of the zone resources, by index.
func (st storedState) zoneIDs() map[string]string {
	ids := map[string]string{}
	for _, r := range st.Resources {
		if r.Type != "terraform_data" || r.Name != "zone" {
			continue
		}
		for _, i := range r.Instances {
			ids[fmt.Sprint(i.IndexKey)] = i.Attributes.ID
		}
	}
	return ids
}

// encodedState is .status.state holding the gzipped bytes given.
func encodedState(g Gomega, gzipped []byte) *runtime.RawExtension {
	raw, err := json.Marshal(map[string]any{
		"apiVersion": "terraseed.gardener.cloud/v1alpha1", "kind": "InfrastructureState", "terraformState": gzipped,
	})
	g.Expect(err).NotTo(HaveOccurred())
	return &runtime.RawExtension{Raw: raw}
}

func gzipped(g Gomega, data []byte) []byte {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = zw.Write(data)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(zw.Close()).To(Succeed())
	return buf.Bytes()
}

// migrateAndRecreate migrates the shoot's Infrastructure, deletes it and creates it again
// as Gardener does on the seed it moves to: waiting for the state, then the state in the
// status, with spec as given. It returns the state the migrate kept.
func (s *shoot) migrateAndRecreate(t *testing.T, spec extensionsv1alpha1.InfrastructureSpec) *runtime.RawExtension {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	annotate(g, s, extension.OperationMigrate)
	migrated := s.waitHandled(t, extensionsv1alpha1.LastOperationTypeMigrate)
	g.Expect(migrated.Status.State).NotTo(BeNil())
	g.Expect(env.Client.Delete(ctx, migrated)).To(Succeed())
	s.waitGone(t)
	restored := &extensionsv1alpha1.Infrastructure{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: s.namespace, Name: s.infra.Name,
			Annotations: map[string]string{extension.AnnotationOperation: extension.OperationWaitForState},
		},
		Spec: spec,
	}
	g.Expect(env.Client.Create(ctx, restored)).To(Succeed())
	restored.Status.State = migrated.Status.State
	g.Expect(env.Client.Status().Update(ctx, restored)).To(Succeed())
	return migrated.Status.State
}

// A restore whose apply creates resources and then fails is retried: the retry must not
// write the migrated state over the newer one that apply left, or it forgets what the
// apply created and creates it a second time.
func TestRestoreRetriedAfterAFailedApplyKeepsWhatThatApplyCreated(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := zonalShoot(t, 1, false)
	first := startController(t, s.namespace, workDir(t))
	g.Expect(env.Client.Create(ctx, s.infra)).To(Succeed())
	created := s.waitFor(t, extensionsv1alpha1.LastOperationTypeCreate, extensionsv1alpha1.LastOperationStateSucceeded)
	_, before := s.storedState(g)
	g.Expect(before.zoneIDs()).To(HaveLen(1))

	// On the new seed the shoot gets a second zone, and the apply fails after creating it.
	spec := *created.Spec.DeepCopy()
	spec.ProviderConfig = zonalConfig(2, true)
	s.migrateAndRecreate(t, spec)
	annotate(g, s, extension.OperationRestore)
	var failed storedState
	g.Eventually(func(g Gomega) {
		infra := s.get(g)
		g.Expect(infra.Status.LastOperation).NotTo(BeNil())
		g.Expect(infra.Status.LastOperation.Type).To(Equal(extensionsv1alpha1.LastOperationTypeRestore))
		g.Expect(infra.Status.LastError).NotTo(BeNil())
		g.Expect(infra.Status.LastError.Description).To(ContainSubstring("QuotaExceeded"))
		_, failed = s.storedState(g)
	}).WithTimeout(3 * time.Minute).WithPolling(250 * time.Millisecond).Should(Succeed())
	g.Expect(failed.Lineage).To(Equal(before.Lineage))
	g.Expect(failed.Serial).To(BeNumerically(">", before.Serial))
	g.Expect(failed.zoneIDs()).To(HaveLen(2), "the failed apply created the second zone and saved it")
	g.Expect(failed.zoneIDs()["0"]).To(Equal(before.zoneIDs()["0"]))
	g.Expect(s.get(g).Annotations).To(HaveKeyWithValue(extension.AnnotationOperation, extension.OperationRestore), "the restore stays asked for")

	// The retry starts from an empty working directory, as every run pod does (and a
	// local run on another replica): the stored state is all it has.
	first.stop()
	startController(t, s.namespace, workDir(t))
	// The quota is raised; the restore is tried again and succeeds with the zones it has.
	s.update(t, func(i *extensionsv1alpha1.Infrastructure) { i.Spec.ProviderConfig = zonalConfig(2, false) })
	s.waitHandled(t, extensionsv1alpha1.LastOperationTypeRestore)
	_, after := s.storedState(g)
	g.Expect(after.zoneIDs()).To(Equal(failed.zoneIDs()), "no zone is created a second time")
	g.Expect(after.Serial).To(BeNumerically(">", failed.Serial))
}

// The state object of an Infrastructure holds another state than the one to restore: the
// restore is refused, naming both, and the stored state stays.
func TestRestoreRefusesAStateOfAnotherLineage(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := createdZonalShoot(t)
	raw, stored := s.storedState(g)

	var other map[string]any
	g.Expect(json.Unmarshal(raw, &other)).To(Succeed())
	other["lineage"] = "another-infrastructures-lineage"
	other["serial"] = stored.Serial + 10
	otherRaw, err := json.Marshal(other)
	g.Expect(err).NotTo(HaveOccurred())
	infra := s.get(g)
	infra.Status.State = encodedState(g, gzipped(g, otherRaw))
	g.Expect(env.Client.Status().Update(ctx, infra)).To(Succeed())
	annotate(g, s, extension.OperationRestore)

	infra = s.waitFor(t, extensionsv1alpha1.LastOperationTypeRestore, extensionsv1alpha1.LastOperationStateFailed)
	g.Expect(infra.Status.LastError.Description).To(And(
		ContainSubstring("status.state"), ContainSubstring(stored.Lineage), ContainSubstring("another-infrastructures-lineage")))
	g.Expect(infra.Status.LastError.Codes).To(ConsistOf(extensionsv1alpha1.ErrorConfigurationProblem))
	after, _ := s.storedState(g)
	g.Expect(after).To(Equal(raw), "the stored state stays as it was")
}

// A .status.state that expands to more than a state may take is refused before it is
// expanded whole.
func TestRestoreRefusesAStatusStateThatExpandsBeyondTheLimit(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := createdZonalShoot(t)
	raw, _ := s.storedState(g)

	// A few hundred KiB that expand to more than the limit.
	bomb := gzipped(g, make([]byte, state.MaxSize+1<<20))
	g.Expect(len(bomb)).To(BeNumerically("<", 512<<10))
	infra := s.get(g)
	infra.Status.State = encodedState(g, bomb)
	g.Expect(env.Client.Status().Update(ctx, infra)).To(Succeed())
	annotate(g, s, extension.OperationRestore)

	infra = s.waitFor(t, extensionsv1alpha1.LastOperationTypeRestore, extensionsv1alpha1.LastOperationStateFailed)
	g.Expect(infra.Status.LastError.Description).To(And(
		ContainSubstring("status.state"), ContainSubstring(fmt.Sprintf("exceeds %d bytes", state.MaxSize))))
	after, _ := s.storedState(g)
	g.Expect(after).To(Equal(raw))
}
