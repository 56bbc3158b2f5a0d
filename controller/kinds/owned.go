package kinds

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/terraseed/terraseed/controller/extension"
	"github.com/terraseed/terraseed/templates"
)

// checkOwnedNamespace refuses an object whose configuration creates a namespace that
// another object owns, of whatever kind and age: terraform would take it over, change
// it, and on the object's deletion destroy it with what it holds (a shoot's etcd backups).
// A namespace belongs to the object whose UID its label names; the object of the same
// kind and key its annotation names is the same one restored in another seed. A namespace
// that names no owner is no object's yet.
func (op *operation) checkOwnedNamespace(ctx context.Context, s *applyScope) error {
	owned := s.provider.OwnedNamespaces()
	if owned == nil {
		return nil
	}
	var vars map[string]any
	if err := json.Unmarshal(s.rendered.TFVarsJSON, &vars); err != nil {
		return fmt.Errorf("reading the variables of the configuration: %w", err)
	}
	name, _ := vars[owned.Variable].(string)
	if name == "" {
		return nil
	}
	namespace, err := targetNamespace(ctx, s.secret, name)
	if err != nil || namespace == nil {
		return err
	}
	uid, by := namespace.Labels[owned.Label], namespace.Annotations[owned.Annotation]
	if uid == "" || uid == string(op.obj.GetUID()) || by == op.ownerName() {
		return nil
	}
	field := ""
	if op.kind == infrastructureKind {
		field = "providerConfig.namespace: "
	}
	return extension.InvalidInput(ReasonInvalidConfiguration, "%sthe namespace %q that the %s creates is %s's (UID %s): an object never takes another's namespace",
		field, name, op.kind.name, by, uid)
}

// ownerName is the object as a namespace's owner annotation names it: its kind and key.
func (op *operation) ownerName() string {
	return op.kind.name + " " + strings.TrimPrefix(client.ObjectKeyFromObject(op.obj).String(), "/")
}

// targetNamespace reads the namespace of the cluster the credentials reach; nil when
// there is none.
func targetNamespace(ctx context.Context, secret *corev1.Secret, name string) (*corev1.Namespace, error) {
	config, err := targetConfig(secret)
	if err != nil {
		return nil, extension.InvalidInput(ReasonInvalidConfiguration, "%w", err)
	}
	config.Timeout = 30 * time.Second
	// The core group's client alone: a clientset of every group costs thousands of
	// allocations per apply.
	core, err := corev1client.NewForConfig(config)
	if err != nil {
		return nil, extension.InvalidInput(ReasonInvalidConfiguration, "credentials secret %s/%s: %w", secret.Namespace, secret.Name, err)
	}
	namespace, err := core.Namespaces().Get(ctx, name, metav1.GetOptions{})
	// Credentials that may not read the namespace may not apply it either: terraform's
	// apply fails on them, and reports them as Gardener's error codes say.
	if apierrors.IsNotFound(err) || apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the namespace %q to tell its owner: %w", name, err)
	}
	return namespace, nil
}

// targetConfig reaches the cluster of the credentials with what the templates use of
// them (server, CA, client certificate, token) and nothing else: a kubeconfig's exec
// plugins and files are never run or read on the controller's machine.
func targetConfig(secret *corev1.Secret) (*rest.Config, error) {
	if templates.IsWorkloadIdentity(secret) {
		var identity struct {
			Server                   string `json:"server"`
			CertificateAuthorityData []byte `json:"certificateAuthorityData"`
		}
		if err := json.Unmarshal(secret.Data["config"], &identity); err != nil {
			return nil, fmt.Errorf("data.config of secret %s/%s: %w", secret.Namespace, secret.Name, err)
		}
		return &rest.Config{Host: identity.Server, BearerToken: string(secret.Data["token"]),
			TLSClientConfig: rest.TLSClientConfig{CAData: identity.CertificateAuthorityData}}, nil
	}
	kubeconfig, err := clientcmd.Load(secret.Data["kubeconfig"])
	if err != nil {
		return nil, fmt.Errorf("data.kubeconfig of secret %s/%s: %w", secret.Namespace, secret.Name, err)
	}
	current := kubeconfig.Contexts[kubeconfig.CurrentContext]
	if current == nil || kubeconfig.Clusters[current.Cluster] == nil {
		return nil, fmt.Errorf("data.kubeconfig of secret %s/%s: its current-context names no context of a cluster", secret.Namespace, secret.Name)
	}
	cluster, config := kubeconfig.Clusters[current.Cluster], &rest.Config{}
	config.Host, config.CAData = cluster.Server, cluster.CertificateAuthorityData
	if user := kubeconfig.AuthInfos[current.AuthInfo]; user != nil {
		config.BearerToken, config.CertData, config.KeyData = user.Token, user.ClientCertificateData, user.ClientKeyData
	}
	return config, nil
}
