package scheme

import (
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
)

// New returns a scheme with the built-in types and terraseed's API.
func New() *k8sruntime.Scheme {
	scheme := k8sruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := extensionsv1alpha1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	return scheme
}
