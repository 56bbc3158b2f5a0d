package chart

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/terraseed/terraseed/terraform/executor"
	"github.com/terraseed/terraseed/terraform/run"
	"github.com/terraseed/terraseed/terraform/state"
)

// use is why a ServiceAccount holds a verb: the code that uses it (a file of this
// repository, or a library it calls) and what for.
type use struct{ code, what string }

// controllerVerbs is every verb the controller's ServiceAccount holds with the chart's
// defaults (the pod executor, the webhook, secure metrics), one entry per resource, verb
// and resourceNames (in parentheses). What holds it further: <release>-controller-writes.
var controllerVerbs = map[string]use{
	"get,list,watch,patch,update extensions.gardener.cloud/infrastructures":               {"controller/extension/reconciler.go", "the Infrastructure controller's cache and watch (controller/kinds/inputs.go lists local Infrastructures); the finalizer and the operation annotation"},
	"patch,update extensions.gardener.cloud/infrastructures/status":                       {"controller/extension/reconciler.go", "lastOperation, lastError, providerStatus, state"},
	"get,list,watch,patch,update extensions.gardener.cloud/controlplanes":                 {"controller/controlplane/setup.go", "the ControlPlane controller's cache and watch; the finalizer and the operation annotation (controller/extension/reconciler.go)"},
	"patch,update extensions.gardener.cloud/controlplanes/status":                         {"controller/extension/reconciler.go", "lastOperation, lastError, the inventory in state"},
	"get,list,watch,patch,update extensions.gardener.cloud/backupbuckets":                 {"controller/kinds/setup.go", "the BackupBucket controller's cache and watch; the finalizer and the operation annotation (controller/extension/reconciler.go)"},
	"patch,update extensions.gardener.cloud/backupbuckets/status":                         {"controller/extension/reconciler.go", "the BackupBucket's lastOperation, lastError, state and status fields"},
	"get,list,watch,patch,update extensions.gardener.cloud/backupentries":                 {"controller/kinds/setup.go", "the BackupEntry controller's cache and watch; the finalizer and the operation annotation (controller/extension/reconciler.go)"},
	"patch,update extensions.gardener.cloud/backupentries/status":                         {"controller/extension/reconciler.go", "the BackupEntry's lastOperation, lastError, state and status fields"},
	"get,list,watch,patch,update extensions.gardener.cloud/dnsrecords":                    {"controller/kinds/setup.go", "the DNSRecord controller's cache and watch; the finalizer and the operation annotation (controller/extension/reconciler.go)"},
	"patch,update extensions.gardener.cloud/dnsrecords/status":                            {"controller/extension/reconciler.go", "the DNSRecord's lastOperation, lastError, state and status fields"},
	"get,list,watch,patch,update extensions.gardener.cloud/bastions":                      {"controller/kinds/setup.go", "the Bastion controller's cache and watch; the finalizer and the operation annotation (controller/extension/reconciler.go)"},
	"patch,update extensions.gardener.cloud/bastions/status":                              {"controller/extension/reconciler.go", "the Bastion's lastOperation, lastError, state and status fields"},
	"get,list,watch,patch,update extensions.gardener.cloud/selfhostedshootexposures":      {"controller/kinds/setup.go", "the SelfHostedShootExposure controller's cache and watch; the finalizer and the operation annotation (controller/extension/reconciler.go)"},
	"patch,update extensions.gardener.cloud/selfhostedshootexposures/status":              {"controller/extension/reconciler.go", "the SelfHostedShootExposure's lastOperation, lastError, state and status.ingress"},
	"get,list,watch extensions.gardener.cloud/clusters":                                   {"controller/extension/cluster.go", "the Cluster of a shoot namespace (the shoot's state, its Kubernetes version for the webhook)"},
	"get,list,watch,create,update,patch,delete /secrets":                                  {"terraform/state/objects.go", "tf-vars, the credentials copy, the sensitive outputs; the run's env Secret (terraform/executor/pod.go); the webhook's certificate (cert-controller, controller/webhook/webhook.go); control planes' Secrets"},
	"get,list,watch,create,update,patch,delete /configmaps":                               {"terraform/state/state.go", "tf-config, tf-state and its parts (listed by label to delete them); control planes' ConfigMaps"},
	"get,list,watch,create,update,patch,delete /services":                                 {"controller/controlplane/actuator.go", "control planes (controlPlane.resources), applied server-side, pruned, watched for health"},
	"get,list,watch,create,update,patch,delete /serviceaccounts":                          {"controller/controlplane/actuator.go", "control planes' ServiceAccounts (controlPlane.serviceAccounts)"},
	"get,list,watch,create,update,patch,delete rbac.authorization.k8s.io/roles":           {"controller/controlplane/actuator.go", "control planes' Roles"},
	"get,list,watch,create,update,patch,delete rbac.authorization.k8s.io/rolebindings":    {"controller/controlplane/actuator.go", "control planes' RoleBindings"},
	"get,list,watch,create,update,patch,delete apps/deployments":                          {"controller/controlplane/health.go", "control planes' workloads, applied and watched for ControlPlaneHealthy"},
	"get,list,watch,create,update,patch,delete apps/statefulsets":                         {"controller/controlplane/health.go", "control planes' workloads"},
	"get,list,watch,create,update,patch,delete apps/daemonsets":                           {"controller/controlplane/health.go", "control planes' workloads"},
	"get,list,watch,create,update,patch,delete policy/poddisruptionbudgets":               {"controller/controlplane/actuator.go", "control planes' disruption budgets"},
	"get,list,watch,create,update,patch,delete autoscaling.k8s.io/verticalpodautoscalers": {"controller/controlplane/actuator.go", "control planes' VPAs"},
	"bind rbac.authorization.k8s.io/roles (aws-custom-route-controller)":                  {"controller/controlplane/actuator.go", "a RoleBinding applied with its Role (controlPlane.boundRoles)"},
	"create,patch /events":                                                                             {"cmd/terraseed/manager.go", "events of Infrastructures and ControlPlanes, leader election's"},
	"create,patch events.k8s.io/events":                                                                {"cmd/terraseed/manager.go", "events through events/v1 (mgr.GetEventRecorder)"},
	"create authentication.k8s.io/tokenreviews":                                                        {"controller/serving/serving.go", "who scrapes /metrics"},
	"create authorization.k8s.io/subjectaccessreviews":                                                 {"controller/serving/serving.go", "whether they may GET /metrics"},
	"get,list,watch admissionregistration.k8s.io/mutatingwebhookconfigurations":                        {"controller/webhook/webhook.go", "cert-controller's watch of the configuration's caBundle"},
	"update,patch admissionregistration.k8s.io/mutatingwebhookconfigurations (terraseed-controlplane)": {"controller/webhook/webhook.go", "the webhooks and caBundle of its own configuration (what <release>-controller-webhook admits)"},
	"get,list,watch,create,delete /pods":                                                               {"terraform/executor/podwatch.go", "run pods: created, watched, deleted (terraform/executor/pod.go)"},
	"get /pods/log":                                                                                    {"terraform/executor/pod.go", "the log of a run pod that left no termination message"},
	"get,create /serviceaccounts":                                                                      {"terraform/executor/serviceaccount.go", "the run pods' ServiceAccount per shoot namespace"},
	"update /serviceaccounts (terraseed-terraformer)":                                                  {"terraform/executor/serviceaccount.go", "its labels corrected"},
	"create /serviceaccounts/token (terraseed-terraformer)":                                            {"terraform/executor/podtoken.go", "a run pod's token, bound to the pod (what <release>-controller-writes admits)"},
	"get,create rbac.authorization.k8s.io/roles":                                                       {"terraform/executor/serviceaccount.go", "the run pods' Role per shoot namespace"},
	"get,create rbac.authorization.k8s.io/rolebindings":                                                {"terraform/executor/serviceaccount.go", "the run pods' RoleBinding per shoot namespace"},
	"update rbac.authorization.k8s.io/roles (terraseed-terraformer)":                                   {"terraform/executor/serviceaccount.go", "the run objects of a new run added to the Role"},
	"update,delete rbac.authorization.k8s.io/rolebindings (terraseed-terraformer)":                     {"terraform/executor/serviceaccount.go", "a binding to another role replaced"},
	// Read, uncached, before a BackupEntry writes etcd-backup into its shoot's namespace.
	"get /namespaces": {"controller/kinds/backupentry.go", "whether a BackupEntry's shoot namespace is gone or being deleted, where it writes no etcd-backup (kinds: backupentry)"},
	// The Role <release>-leases, in the release's namespace.
	"get,create,update coordination.k8s.io/leases": {"controller/extension/heartbeat.go", "the heartbeat Lease, and leader election's (controller-runtime)"},
}

// runPodVerbs is every verb the run pods' ServiceAccount holds in its namespace, granted
// by the Role the pod executor writes; names are those of the run objects of the namespace's
// runs. What holds it further: <release>-terraformer-run-objects.
var runPodVerbs = map[string]use{
	"create /configmaps": {"terraform/state/state.go", "the state and its parts, first written by the run (admitted only under the names below)"},
	"get,update,patch /configmaps (infra.infra.tf-config,infra.infra.tf-state,infra.infra.tf-state.a-1,infra.infra.tf-state.a-10,…)": {"terraform/terraformer/state.go", "the configuration read, the state and its parts written as terraform writes them"},
	"delete /configmaps (infra.infra.tf-state.a-1,infra.infra.tf-state.a-10,infra.infra.tf-state.a-11,infra.infra.tf-state.a-12,…)":  {"terraform/state/state.go", "parts of a state that shrank"},
	"get /secrets (infra.infra.tf-vars)": {"terraform/terraformer", "the run's variables"},
}

// runPodVerbsInSecrets is runPodVerbs with stateStorage secret: the state and its parts
// are Secrets, and the only ConfigMap is the configuration.
var runPodVerbsInSecrets = map[string]use{
	"get,update,patch /configmaps (infra.infra.tf-config)": {"terraform/run/report.go", "the configuration read, the progress and plan written to its annotations"},
	"create /secrets": {"terraform/state/state.go", "the state and its parts, first written by the run (admitted only under the names below)"},
	"get,update,patch /secrets (infra.infra.tf-state,infra.infra.tf-state.a-1,infra.infra.tf-state.a-10,infra.infra.tf-state.a-11,…)": {"terraform/state/storage.go", "the state and its parts written as terraform writes them"},
	"delete /secrets (infra.infra.tf-state.a-1,infra.infra.tf-state.a-10,infra.infra.tf-state.a-11,infra.infra.tf-state.a-12,…)":      {"terraform/state/state.go", "parts of a state that shrank"},
	"get /secrets (infra.infra.tf-vars)": {"terraform/terraformer", "the run's variables"},
}

// ruleKeys are the entries a Role's rules make, one per resource, as the tables above
// write them; a long list of names is cut after the first four.
func ruleKeys(rules []rbacv1.PolicyRule) []string {
	var keys []string
	for _, r := range rules {
		names := ""
		if n := r.ResourceNames; len(n) > 0 {
			if len(n) > 4 {
				n = append(slices.Clip(n[:4]), "…")
			}
			names = " (" + strings.Join(n, ",") + ")"
		}
		for _, group := range r.APIGroups {
			for _, resource := range r.Resources {
				keys = append(keys, strings.Join(r.Verbs, ",")+" "+group+"/"+resource+names)
			}
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// Every verb the controller and the run pods hold is listed above with the code that uses
// it, and nothing is listed that they do not hold.
func TestEveryVerbIsUsed(t *testing.T) {
	g := NewWithT(t)
	objects := render(t, "garden-terraseed")
	var held []string
	held = append(held, ruleKeys(convert[rbacv1.ClusterRole](t, find(objects, "ClusterRole", "terraseed")).Rules)...)
	held = append(held, ruleKeys(convert[rbacv1.Role](t, find(objects, "Role", "terraseed-leases")).Rules)...)
	g.Expect(held).To(ConsistOf(keysOf(controllerVerbs)), "the controller's verbs")

	// The run pods' Role, as the pod executor writes it for a run of the Infrastructure infra.
	ctx := context.Background()
	shoot := env.LabelledNamespace(t, shootLabels)
	e := &executor.PodExecutor{Client: env.Client, ServiceAccountName: "terraseed-terraformer"}
	g.Expect(e.EnsureServiceAccount(ctx, run.ID{Namespace: shoot, Name: "infra", Purpose: run.PurposeInfra})).To(Succeed())
	role := &rbacv1.Role{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: shoot, Name: "terraseed-terraformer"}, role)).To(Succeed())
	g.Expect(ruleKeys(role.Rules)).To(ConsistOf(keysOf(runPodVerbs)), "the run pods' verbs")
	inSecrets := env.LabelledNamespace(t, shootLabels)
	e.State.Storage = state.StorageSecret
	g.Expect(e.EnsureServiceAccount(ctx, run.ID{Namespace: inSecrets, Name: "infra", Purpose: run.PurposeInfra})).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: inSecrets, Name: "terraseed-terraformer"}, role)).To(Succeed())
	g.Expect(ruleKeys(role.Rules)).To(ConsistOf(keysOf(runPodVerbsInSecrets)), "the run pods' verbs with the state in Secrets")
	// A namespace whose runs kept their state in ConfigMaps names none of them once the
	// state is kept in Secrets.
	g.Expect(e.EnsureServiceAccount(ctx, run.ID{Namespace: shoot, Name: "infra", Purpose: run.PurposeInfra})).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: shoot, Name: "terraseed-terraformer"}, role)).To(Succeed())
	g.Expect(ruleKeys(role.Rules)).To(ConsistOf(keysOf(runPodVerbsInSecrets)), "the run pods' verbs once the state moved to Secrets")

	for table, uses := range map[string]map[string]use{"controller": controllerVerbs, "run pod": runPodVerbs, "run pod, state in Secrets": runPodVerbsInSecrets} {
		for key, u := range uses {
			_, err := os.Stat(filepath.Join(repoRoot, u.code))
			g.Expect(err).NotTo(HaveOccurred(), "%s %q: the code that uses it", table, key)
			g.Expect(u.what).NotTo(BeEmpty(), fmt.Sprintf("%s %q", table, key))
		}
	}
}

func keysOf(m map[string]use) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}
