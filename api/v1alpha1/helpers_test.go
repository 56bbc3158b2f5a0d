package v1alpha1_test

import corev1 "k8s.io/api/core/v1"

func ptr[T any](v T) *T { return &v }

func corev1SecretRef(name, namespace string) corev1.SecretReference {
	return corev1.SecretReference{Name: name, Namespace: namespace}
}
