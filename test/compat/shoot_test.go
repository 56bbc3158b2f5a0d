package compat_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
	gardenextensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"github.com/gardener/gardener/pkg/component/extensions/infrastructure"
	"github.com/gardener/gardener/pkg/extensions"
	"github.com/gardener/gardener/pkg/utils/kubernetes/health"
	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// Gardener polls every 10 s and treats an error the extension reports as severe after
	// 3 minutes, that is after 18 polls. The tests poll every 2 s and keep the 18 polls.
	waitInterval        = 2 * time.Second
	waitSevereThreshold = 18 * waitInterval
	// waitTimeout is Gardener's own: infrastructure.DefaultTimeout.
	waitTimeout = infrastructure.DefaultTimeout

	sshPublicKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHRlc3Q gardenlet@compat"
	// runFinalizer is on the run objects while a terraform run owns them.
	runFinalizer = "terraseed.gardener.cloud/terraformer"
	// tfstateKey is the key of the state in the state ConfigMap, as Gardener's terraformer has it.
	tfstateKey = "terraform.tfstate"
)

// shootInSeed is one shoot as gardenlet sees it in the seed: its control plane namespace
// with the cloudprovider secret and the Cluster, and the Shoot itself for the garden side.
type shootInSeed struct {
	t         *testing.T
	seed      *seedCluster
	ctx       context.Context
	namespace string
	shoot     *gardencorev1beta1.Shoot
	// waitTimeout is the timeout of Gardener's Wait functions for this shoot.
	waitTimeout time.Duration
}

// newShootInSeed prepares the control plane namespace of a shoot of the given provider
// type as gardenlet does before it deploys the Infrastructure.
func newShootInSeed(t *testing.T, name, providerType string, credentials map[string][]byte) *shootInSeed {
	t.Helper()
	s := seedFor(t)
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(s.alive, 30*time.Minute)
	t.Cleanup(cancel)

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "shoot--compat--" + name + "-"}}
	g.Expect(s.client.Create(ctx, ns)).To(Succeed())
	sh := &shootInSeed{t: t, seed: s, ctx: ctx, namespace: ns.Name, waitTimeout: waitTimeout}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the controller's log about %s:\n%s", ns.Name, strings.Join(s.logLines(ns.Name), "\n"))
			if err := s.controllerGone(); err != nil {
				t.Log(err)
			}
		}
	})
	// envtest runs no namespace controller: the namespace stays terminating, and its
	// unique name keeps it out of every other test's way.
	t.Cleanup(func() { _ = s.client.Delete(context.Background(), ns) })

	g.Expect(s.client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "cloudprovider"},
		Data:       credentials,
	})).To(Succeed())

	sh.shoot = &gardencorev1beta1.Shoot{
		ObjectMeta: metav1.ObjectMeta{Namespace: "garden-compat", Name: name},
		Spec: gardencorev1beta1.ShootSpec{
			Provider: gardencorev1beta1.Provider{Type: providerType},
			Region:   "local-1",
			Networking: &gardencorev1beta1.Networking{
				Pods: ptr("100.96.0.0/11"), Services: ptr("100.64.0.0/13"), Nodes: ptr("10.250.0.0/16"),
			},
		},
		Status: gardencorev1beta1.ShootStatus{TechnicalID: ns.Name},
	}
	cloudProfile := &gardencorev1beta1.CloudProfile{ObjectMeta: metav1.ObjectMeta{Name: "local"}}
	seedObject := &gardencorev1beta1.Seed{ObjectMeta: metav1.ObjectMeta{Name: "compat"}}
	g.Expect(extensions.SyncClusterResourceToSeed(ctx, s.client, ns.Name, sh.shoot, cloudProfile, seedObject)).To(Succeed())
	t.Cleanup(func() {
		_ = s.client.Delete(context.Background(), &gardenextensionsv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: ns.Name}})
	})
	return sh
}

// component is Gardener's Infrastructure component for this shoot, configured as
// gardenlet's botanist configures it for one reconciliation of the shoot.
func (sh *shootInSeed) component(providerConfig string, annotateOperation bool) infrastructure.Interface {
	return infrastructure.New(testr.New(sh.t), sh.seed.client, &infrastructure.Values{
		Namespace:         sh.namespace,
		Name:              sh.shoot.Name,
		Type:              sh.shoot.Spec.Provider.Type,
		ProviderConfig:    &runtime.RawExtension{Raw: []byte(providerConfig)},
		Region:            sh.shoot.Spec.Region,
		SSHPublicKey:      []byte(sshPublicKey),
		AnnotateOperation: annotateOperation,
	}, waitInterval, waitSevereThreshold, sh.waitTimeout)
}

func (sh *shootInSeed) key() client.ObjectKey {
	return client.ObjectKey{Namespace: sh.namespace, Name: sh.shoot.Name}
}

func (sh *shootInSeed) get(g Gomega) *gardenextensionsv1alpha1.Infrastructure {
	return getExtension(g, sh, &gardenextensionsv1alpha1.Infrastructure{})
}

// expectHealthy reads the Infrastructure and checks it with Gardener's own health check.
func (sh *shootInSeed) expectHealthy(g Gomega) *gardenextensionsv1alpha1.Infrastructure {
	return expectExtensionHealthy(g, sh, &gardenextensionsv1alpha1.Infrastructure{})
}

// getExtension reads the shoot's extension object of obj's kind into obj.
func getExtension[T gardenextensionsv1alpha1.Object](g Gomega, sh *shootInSeed, obj T) T {
	g.Expect(sh.seed.client.Get(sh.ctx, sh.key(), obj)).To(Succeed())
	return obj
}

// expectExtensionHealthy reads the shoot's extension object of obj's kind and checks it
// with Gardener's own health check.
func expectExtensionHealthy[T gardenextensionsv1alpha1.Object](g Gomega, sh *shootInSeed, obj T) T {
	getExtension(g, sh, obj)
	g.Expect(health.CheckExtensionObject(obj)).To(Succeed(), "Gardener's health check of %s", describe(obj))
	return obj
}

// describeNow returns, for a failure message, what Gardener looks at in the shoot's
// extension object of obj's kind now.
func describeNow(sh *shootInSeed, kind string, obj gardenextensionsv1alpha1.Object) string {
	if err := sh.seed.client.Get(context.Background(), sh.key(), obj); err != nil {
		return fmt.Sprintf("the %s now: %v", kind, err)
	}
	return fmt.Sprintf("the %s now: %s", kind, describe(obj))
}

// describe returns, for a failure message, what Gardener looks at in the Infrastructure now.
func (sh *shootInSeed) describe() string {
	return describeNow(sh, "Infrastructure", &gardenextensionsv1alpha1.Infrastructure{})
}

func describe(obj gardenextensionsv1alpha1.Object) string {
	status := obj.GetExtensionStatus()
	state := "none"
	if raw := status.GetState(); raw != nil {
		state = fmt.Sprintf("%d bytes", len(raw.Raw))
	}
	return fmt.Sprintf("generation %d, observedGeneration %d, annotations %v, finalizers %v, lastOperation %s, lastError %s, status.state %s",
		obj.GetGeneration(), status.GetObservedGeneration(), obj.GetAnnotations(), obj.GetFinalizers(), toJSON(status.GetLastOperation()), toJSON(status.GetLastError()), state)
}

func toJSON(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(data)
}

// targetNamespace is where the local provider creates the shoot's objects.
func (sh *shootInSeed) targetNamespace() string { return sh.namespace + "--" + sh.shoot.Name }

// realObjects returns the UIDs of what the local provider created, by kind and name.
func (sh *shootInSeed) realObjects(g Gomega) map[string]types.UID {
	uids := map[string]types.UID{}
	namespace := &corev1.Namespace{}
	g.Expect(sh.seed.client.Get(sh.ctx, client.ObjectKey{Name: sh.targetNamespace()}, namespace)).To(Succeed())
	uids["namespace"] = namespace.UID
	policies := &networkingv1.NetworkPolicyList{}
	g.Expect(sh.seed.client.List(sh.ctx, policies, client.InNamespace(sh.targetNamespace()))).To(Succeed())
	for _, p := range policies.Items {
		uids["networkpolicy/"+p.Name] = p.UID
	}
	secrets := &corev1.SecretList{}
	g.Expect(sh.seed.client.List(sh.ctx, secrets, client.InNamespace(sh.targetNamespace()))).To(Succeed())
	for _, secret := range secrets.Items {
		uids["secret/"+secret.Name] = secret.UID
	}
	return uids
}

// networkPolicy returns the NetworkPolicy of that name in the target namespace, nil when there is none.
func (sh *shootInSeed) networkPolicy(g Gomega, name string) *networkingv1.NetworkPolicy {
	policy := &networkingv1.NetworkPolicy{}
	err := sh.seed.client.Get(sh.ctx, client.ObjectKey{Namespace: sh.targetNamespace(), Name: name}, policy)
	if apierrors.IsNotFound(err) {
		return nil
	}
	g.Expect(err).NotTo(HaveOccurred())
	return policy
}

// stateConfigMap returns the state object of the Infrastructure's runs, nil when there is none.
func (sh *shootInSeed) stateConfigMap(g Gomega) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{}
	err := sh.seed.client.Get(sh.ctx, sh.stateKey(), cm)
	if apierrors.IsNotFound(err) {
		return nil
	}
	g.Expect(err).NotTo(HaveOccurred())
	return cm
}

// stateKey is the key of the state object of the Infrastructure's runs.
func (sh *shootInSeed) stateKey() client.ObjectKey {
	return client.ObjectKey{Namespace: sh.namespace, Name: sh.shoot.Name + ".infra.tf-state"}
}

// localConfig is an InfrastructureConfig of the local provider with one zone per workers CIDR.
func localConfig(workers ...string) string {
	var zones []map[string]string
	for i, cidr := range workers {
		zones = append(zones, map[string]string{"name": fmt.Sprintf("zone-%c", 'a'+i), "workers": cidr})
	}
	return toJSON(map[string]any{
		"apiVersion": "local.provider.terraseed.io/v1alpha1", "kind": "InfrastructureConfig",
		"networks": map[string]any{"cidr": "10.250.0.0/16", "zones": zones},
	})
}

func decodeProviderStatus(g Gomega, raw *runtime.RawExtension) map[string]any {
	g.Expect(raw).NotTo(BeNil(), "a providerStatus")
	status := map[string]any{}
	g.Expect(json.Unmarshal(raw.Raw, &status)).To(Succeed())
	return status
}

// terraformState is what the tests read of a terraform state file.
type terraformState struct {
	Version          int    `json:"version"`
	TerraformVersion string `json:"terraform_version"`
	Serial           int64  `json:"serial"`
	Lineage          string `json:"lineage"`
	Resources        []struct {
		Mode      string            `json:"mode"`
		Type      string            `json:"type"`
		Name      string            `json:"name"`
		Instances []json.RawMessage `json:"instances"`
	} `json:"resources"`
}

// addresses lists the managed resources of the state with one instance or more.
func (s terraformState) addresses() []string {
	var addresses []string
	for _, r := range s.Resources {
		if r.Mode == "managed" && len(r.Instances) > 0 {
			addresses = append(addresses, r.Type+"."+r.Name)
		}
	}
	return addresses
}

func parseTerraformState(g Gomega, data []byte) terraformState {
	state, err := readTerraformState(data)
	g.Expect(err).NotTo(HaveOccurred())
	return state
}

func readTerraformState(data []byte) (terraformState, error) {
	var state terraformState
	if err := json.Unmarshal(data, &state); err != nil {
		return state, fmt.Errorf("not a terraform state file: %w", err)
	}
	if state.Version != 4 || state.Lineage == "" {
		return state, fmt.Errorf("not a terraform state file of format 4 with a lineage: version %d, lineage %q", state.Version, state.Lineage)
	}
	return state, nil
}

// infrastructureState is the documented shape of terraseed's .status.state.
type infrastructureState struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// TerraformState is the gzipped state file, base64 in JSON.
	TerraformState []byte `json:"terraformState"`
}

// decodeInfrastructureState decodes a .status.state (or the state of a ShootState's entry)
// into the terraform state it carries.
func decodeInfrastructureState(g Gomega, raw *runtime.RawExtension) terraformState {
	g.Expect(raw).NotTo(BeNil(), "a state")
	var kept infrastructureState
	g.Expect(json.Unmarshal(raw.Raw, &kept)).To(Succeed(), "the state is JSON: %s", raw.Raw)
	g.Expect(kept.APIVersion).To(Equal("terraseed.gardener.cloud/v1alpha1"))
	g.Expect(kept.Kind).To(Equal("InfrastructureState"))
	reader, err := gzip.NewReader(bytes.NewReader(kept.TerraformState))
	g.Expect(err).NotTo(HaveOccurred(), "terraformState is gzipped")
	data, err := io.ReadAll(reader)
	g.Expect(err).NotTo(HaveOccurred())
	return parseTerraformState(g, data)
}

// infrastructureEntry returns the ShootState's entry for the Infrastructure of that name.
func infrastructureEntry(shootState *gardencorev1beta1.ShootState, name string) *gardencorev1beta1.ExtensionResourceState {
	for i, entry := range shootState.Spec.Extensions {
		if entry.Kind == gardenextensionsv1alpha1.InfrastructureResource && entry.Name != nil && *entry.Name == name {
			return &shootState.Spec.Extensions[i]
		}
	}
	return nil
}
