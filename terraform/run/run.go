package run

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"

	"k8s.io/apimachinery/pkg/types"

	"github.com/terraseed/terraseed/terraform/run/label"
)

// Purpose tells the runs of one owner apart, as Gardener's terraformer does: an
// Infrastructure and its control plane each keep their own state.
type Purpose string

// PurposeInfra is the purpose of an Infrastructure's run.
const PurposeInfra Purpose = "infra"

// Kind is the kind of the object whose runs are of this purpose, lower case, as metrics
// label them: infrastructure, or the kind a provider serves from templates (dnsrecord, ...),
// whose name is its purpose.
func (p Purpose) Kind() string {
	if p == PurposeInfra {
		return "infrastructure"
	}
	return string(p)
}

const (
	// Domain is terraseed's, the one every label, annotation and finalizer it writes is
	// named in.
	Domain = "terraseed.gardener.cloud"
	// LabelPrefix starts the labels and annotations terraseed puts on run objects.
	LabelPrefix = Domain + "/"
	// LabelInfrastructure names the Infrastructure a run object or pod belongs to.
	LabelInfrastructure = LabelPrefix + "infrastructure"
	// LabelPurpose says what a run object or pod is for.
	LabelPurpose = LabelPrefix + "purpose"
)

// ID is one run of terraform: what it is for, and whose. Every name of the run derives
// from it in the form Gardener's terraformer uses, <name>.<purpose>.<suffix>, so that the
// objects it left are adopted as they are.
type ID struct {
	Namespace string
	// Name is the owner's, e.g. the Infrastructure's.
	Name    string
	Purpose Purpose
	// UID is the owner's: a run of one owner is never taken for a run of another owner of
	// the same name created later. Names do not derive from it, so that the objects of
	// Gardener's terraformer are adopted as they are.
	UID types.UID
}

func (id ID) name(suffix string) string { return id.Name + "." + string(id.Purpose) + "." + suffix }

// ConfigName is the ConfigMap holding the terraform files.
func (id ID) ConfigName() string { return id.name("tf-config") }

// VarsName is the Secret holding the variables.
func (id ID) VarsName() string { return id.name("tf-vars") }

// StateName is the ConfigMap holding the state.
func (id ID) StateName() string { return id.name("tf-state") }

// PodName is the run pod: one name, so that the API server itself refuses a second pod
// for the same run.
func (id ID) PodName() string { return id.name("tf-run") }

// EnvSecretName is the Secret holding the credentials of a run pod.
func (id ID) EnvSecretName() string { return id.name("tf-env") }

// CredentialsName is the Secret keeping the credentials of the last run, so that a
// destroy can run after the secret they came from is gone.
func (id ID) CredentialsName() string { return id.name("credentials") }

// OutputsName names the Secret holding the sensitive outputs of the runs.
func (id ID) OutputsName() string { return id.name("outputs") }

// Dir is the run's directory below a local executor's base directory: it outlives the
// run, so that the next run finds a state the last one could not save, and belongs to
// one owner (UID), so that an owner of the same name created later starts afresh.
func (id ID) Dir() string {
	if id.UID == "" {
		return id.OwnersDir()
	}
	return filepath.Join(id.OwnersDir(), string(id.UID))
}

// OwnersDir holds the run directories of every owner of the ID's name.
func (id ID) OwnersDir() string { return filepath.Join(id.Namespace, id.Name+"."+string(id.Purpose)) }

// uidValue keeps a UID one plain path element.
var uidValue = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,63}$`)

// Labels identify the objects and pods of the run.
func (id ID) Labels() map[string]string {
	return map[string]string{LabelInfrastructure: label.Value(id.Name), LabelPurpose: string(id.Purpose)}
}

// Validate names the missing field, so that a bad request fails before anything is created.
func (id ID) Validate() error {
	switch {
	case id.Namespace == "":
		return InvalidInput("namespace", "must not be empty")
	case id.Name == "":
		return InvalidInput("name", "must not be empty")
	case id.Purpose == "":
		return InvalidInput("purpose", "must not be empty")
	case id.UID != "" && !uidValue.MatchString(string(id.UID)):
		return InvalidInput("uid", fmt.Sprintf("%q is not an object UID", id.UID))
	}
	return nil
}

// ErrInvalidInput is the cause of every error of a request that can never succeed as it
// is: retrying it cannot help.
var ErrInvalidInput = errors.New("invalid input")

// InputError is invalid input, naming the field.
type InputError struct {
	Field, Problem string
}

// InvalidInput reports a field of a request that can never run.
func InvalidInput(field, problem string) error { return &InputError{Field: field, Problem: problem} }

func (e *InputError) Error() string { return fmt.Sprintf("%s: %s", e.Field, e.Problem) }

func (e *InputError) Unwrap() error { return ErrInvalidInput }
