package state

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/terraseed/terraseed/terraform/run"
)

type countingTransport struct {
	next     http.RoundTripper
	requests atomic.Int64
}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.requests.Add(1)
	return t.next.RoundTrip(req)
}

func TestCreateFirstWritesANewObjectInOneRequestAndStillUpdatesAnExistingOne(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	objects := RunObjects{ID: run.ID{Namespace: env.Namespace(t), Name: "infra", Purpose: run.PurposeInfra}}
	counter := &countingTransport{}
	config := rest.CopyConfig(env.Config)
	config.Wrap(func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter })
	c, err := client.New(config, client.Options{Scheme: env.Scheme, Mapper: env.Client.RESTMapper()})
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(objects.WriteConfig(ctx, c, map[string]string{"main.tf": "# first"}, CreateFirst(true))).To(Succeed())
	g.Expect(counter.requests.Load()).To(BeEquivalentTo(1))

	// Somebody else's annotation on the object survives the next write.
	cm := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: objects.ID.Namespace, Name: objects.ConfigName()}, cm)).To(Succeed())
	cm.Annotations = map[string]string{"example.com/note": "kept"}
	g.Expect(env.Client.Update(ctx, cm)).To(Succeed())

	// Wrongly assumed new: the create fails, the object is read and updated.
	counter.requests.Store(0)
	g.Expect(objects.WriteConfig(ctx, c, map[string]string{"main.tf": "# second"}, CreateFirst(true))).To(Succeed())
	g.Expect(counter.requests.Load()).To(BeEquivalentTo(3))
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
	g.Expect(cm.Data).To(Equal(map[string]string{"main.tf": "# second"}))
	g.Expect(cm.Annotations).To(HaveKeyWithValue("example.com/note", "kept"))
	g.Expect(cm.Finalizers).To(ConsistOf(Finalizer))
	g.Expect(cm.Labels).To(HaveKeyWithValue(run.LabelInfrastructure, "infra"))

	// Known to exist: read, then updated only when it changes.
	counter.requests.Store(0)
	g.Expect(objects.WriteConfig(ctx, c, map[string]string{"main.tf": "# second"})).To(Succeed())
	g.Expect(counter.requests.Load()).To(BeEquivalentTo(1))
}

// An owner's name may be 253 characters long and a label value 63: the run objects of an
// owner with a long name are created, labelled with a value that still tells it from
// another owner whose name starts alike.
func TestTheRunObjectsOfAnOwnerWithALongNameAreCreated(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	namespace := env.Namespace(t)
	long := strings.Repeat("a", 60) + "--0d6c5f2e-0b5f-4b7c-9c1e-4a3f1d2c3b4a"
	labels := map[string]string{}
	for _, name := range []string{long, strings.Replace(long, "4a3f", "5a3f", 1)} {
		objects := RunObjects{ID: run.ID{Namespace: namespace, Name: name, Purpose: run.PurposeInfra}}
		g.Expect(objects.WriteConfig(ctx, env.Client, map[string]string{"main.tf": ""})).To(Succeed())
		g.Expect(objects.WriteVars(ctx, env.Client, []byte("{}"))).To(Succeed())
		cm := &corev1.ConfigMap{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: objects.ID.ConfigName()}, cm)).To(Succeed())
		value := cm.Labels[run.LabelInfrastructure]
		g.Expect(len(value)).To(Equal(63))
		g.Expect(value).To(HavePrefix(name[:52]))
		labels[name] = value
	}
	g.Expect(labels[long]).NotTo(Equal(labels[strings.Replace(long, "4a3f", "5a3f", 1)]))
}

// The state of an owner with a long name is kept in parts and with its history, which
// carry its name in a label as long as a label value may be; deleting the run objects
// finds and removes every one of them.
func TestTheStatePartsOfAnOwnerWithALongNameAreKeptAndDeleted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	namespace := env.Namespace(t)
	long := "shoot--compat--a-project--0d6c5f2e-0b5f-4b7c-9c1e-4a3f1d2c3b4a"
	objects := RunObjects{ID: run.ID{Namespace: namespace, Name: long, Purpose: "backupentry"}}
	g.Expect(len(objects.StateName())).To(BeNumerically(">", 63))
	store := objects.Store(env.Client)
	store.Limit = 4 << 10
	var saved []byte
	for serial := range int64(2) {
		saved = stateOf(t, "lineage-long", serial+1, 32<<10)
		_, err := store.Save(ctx, saved)
		g.Expect(err).NotTo(HaveOccurred())
	}
	kept := func() int {
		list := &corev1.ConfigMapList{}
		g.Expect(env.Client.List(ctx, list, client.InNamespace(namespace))).To(Succeed())
		return len(list.Items)
	}
	g.Expect(kept()).To(BeNumerically(">", 2), "the state and its parts")
	state, err := objects.ReadState(ctx, env.Client)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(state).To(Equal(saved))

	g.Expect(objects.Delete(ctx, env.Client)).To(Succeed())
	g.Expect(kept()).To(BeZero(), "every part deleted with the state")
}

// A run's objects but its state say which they are (LabelObject), also those written
// before they were labelled, once written again: the controller caches the metadata of
// the state objects alone, which carry neither LabelObject nor LabelPartOf.
func TestARunsObjectsButItsStateSayWhichTheyAre(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	objects := RunObjects{ID: run.ID{Namespace: env.Namespace(t), Name: "infra", Purpose: run.PurposeInfra}}
	g.Expect(objects.WriteConfig(ctx, env.Client, map[string]string{"main.tf": "# first"})).To(Succeed())
	g.Expect(objects.WriteVars(ctx, env.Client, []byte("{}"))).To(Succeed())
	_, err := objects.Store(env.Client).Claim(ctx)
	g.Expect(err).NotTo(HaveOccurred())

	cm := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, objects.key(objects.ConfigName()), cm)).To(Succeed())
	g.Expect(cm.Labels).To(HaveKeyWithValue(LabelObject, "config"))
	vars := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, objects.key(objects.VarsName()), vars)).To(Succeed())
	g.Expect(vars.Labels).To(HaveKeyWithValue(LabelObject, "vars"))
	stateObject := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, objects.key(objects.StateName()), stateObject)).To(Succeed())
	g.Expect(stateObject.Labels).NotTo(HaveKey(LabelObject))
	g.Expect(stateObject.Labels).NotTo(HaveKey(LabelPartOf))
	g.Expect(stateObject.Labels).To(HaveKeyWithValue(run.LabelPurpose, string(run.PurposeInfra)))

	// As an earlier release wrote it.
	delete(cm.Labels, LabelObject)
	g.Expect(env.Client.Update(ctx, cm)).To(Succeed())
	g.Expect(objects.WriteConfig(ctx, env.Client, map[string]string{"main.tf": "# second"})).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(cm), cm)).To(Succeed())
	g.Expect(cm.Labels).To(HaveKeyWithValue(LabelObject, "config"))
	g.Expect(cm.Labels).To(HaveKeyWithValue(run.LabelInfrastructure, "infra"))
}
