package run

import (
	"context"
	"fmt"
	"regexp"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/terraseed/terraseed/terraform/run/plan"
)

// Request is one terraform
type Request struct {
	ID ID
	// Owner becomes the owner of a run pod and its credentials Secret, so that deleting
	// the owner, e.g. the Infrastructure, collects them.
	Owner   *metav1.OwnerReference
	Command Command
	// Env holds credentials, e.g. TF_VAR_kubeconfig or AWS_ACCESS_KEY_ID. It reaches
	// terraform's environment and nothing else.
	Env map[string]string
	// LoadEnv, when set, reads Env again as the run starts. The Scheduler drops Env when
	// it queues the run (after its caller took the budget key from it) and calls LoadEnv
	// when the run gets its slot: a seed's backlog of waiting runs holds no credentials,
	// which take kilobytes per run (a kubeconfig, a service account's key). Its error
	// fails the run.
	LoadEnv func(context.Context) (map[string]string, error)
	// Files are credentials a run reads from files, such as a workload identity's token,
	// which gardenlet renews in its Secret at about half its lifetime while a run may
	// outlive it: by the environment variable that gets the file's path, the key of a
	// Secret in the run's namespace (a run pod mounts Secrets of its own namespace only).
	// The executor keeps each file as fresh as its Secret, and gives terraform its path,
	// never its content.
	Files map[string]corev1.SecretKeySelector
	// ProtectedTypes are resource types an apply must not destroy or replace, unless
	// AllowDestroy is set (see ErrDestroyProtected).
	ProtectedTypes []string
	AllowDestroy   bool
	// AllowDestroyPlan, when set, is the digest of the one plan (plan.Summary.Digest)
	// that may destroy or replace protected resources: any other such plan is refused.
	AllowDestroyPlan string
	// Parallelism, when set, is terraform's -parallelism for this run, over the executor's.
	Parallelism int
	// Progress, when set, is called from another goroutine with each new progress of
	// the run, at most every few seconds; never after Run returned.
	Progress func(Progress)
	// Digest identifies the configuration the run works on (files, variables, guard):
	// a run under way of another digest is never taken for this one.
	Digest string
	// Background marks a run nobody waits for, such as a drift plan: the local executor
	// runs it at a lower CPU priority, so that the runs others wait for, which share the
	// machine with it, are not slowed down by it.
	Background bool
	// Budget is the key of the runs that share a cloud account's API rate, a keyed digest
	// of the provider and the whole credentials (templates.Provider.AccountKey), never a
	// value of them: the scheduler holds at most RunsPerAccount runs of one key under way,
	// and backs the key off when its runs are throttled. Empty: no budget.
	Budget string
	// Project is the shoot project the run belongs to: within a priority, the runs of
	// different projects take turns for the run slots.
	Project string
	// Urgent marks a run whose caller waits for it on a short deadline, such as a
	// DNSRecord's, which gardenlet waits for at most two minutes: of each priority but
	// drift, it starts before every run that is not urgent.
	Urgent bool
	// Throttled, when set, says whether the run's error says the cloud throttled its calls.
	Throttled func(error) bool
}

var (
	// secretKey is a key of a Secret's data.
	secretKey = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)
	envName   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// A digest becomes a label value.
	digestValue = regexp.MustCompile(`^[0-9a-f]{1,63}$`)
)

// Validate names the field of a request that can never
func (r Request) Validate() error {
	if err := r.ID.Validate(); err != nil {
		return err
	}
	if _, err := ParseCommand(string(r.Command)); err != nil {
		return err
	}
	for i, t := range r.ProtectedTypes {
		if !envName.MatchString(t) {
			return InvalidInput(fmt.Sprintf("protectedTypes[%d]", i), fmt.Sprintf("%q is not a resource type", t))
		}
	}
	if r.Budget != "" && !digestValue.MatchString(r.Budget) {
		return InvalidInput("budget", fmt.Sprintf("%q is not a hex key of at most 63 characters", r.Budget))
	}
	if r.AllowDestroyPlan != "" && !plan.DigestValue.MatchString(r.AllowDestroyPlan) {
		return InvalidInput("allowDestroyPlan", fmt.Sprintf("%q is not a plan digest", r.AllowDestroyPlan))
	}
	if r.Parallelism < 0 {
		return InvalidInput("parallelism", fmt.Sprintf("%d is negative", r.Parallelism))
	}
	if r.Digest != "" && !digestValue.MatchString(r.Digest) {
		return InvalidInput("digest", fmt.Sprintf("%q is not a hex digest of at most 63 characters", r.Digest))
	}
	for k := range r.Env {
		if !envName.MatchString(k) {
			return InvalidInput(fmt.Sprintf("env[%q]", k), "is not an environment variable name")
		}
	}
	for name, f := range r.Files {
		switch _, inEnv := r.Env[name]; {
		case !envName.MatchString(name):
			return InvalidInput(fmt.Sprintf("files[%q]", name), "is not an environment variable name")
		case inEnv:
			return InvalidInput(fmt.Sprintf("files[%q]", name), "is set in env too")
		case f.Name == "":
			return InvalidInput(fmt.Sprintf("files[%q].name", name), "must name a Secret")
		case !secretKey.MatchString(f.Key):
			return InvalidInput(fmt.Sprintf("files[%q].key", name), fmt.Sprintf("%q is not a key of a Secret", f.Key))
		}
	}
	return nil
}
