package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/terraseed/terraseed/controller/webhook"
)

// runMutate prints a control-plane Deployment as the control-plane webhook would store it
// in a shoot namespace of the given provider type.
func runMutate(args []string, stdout, stderr io.Writer) error {
	flags := flag.NewFlagSet("mutate", flag.ContinueOnError)
	deploymentFile := flags.String("f", "", "the Deployment to mutate (YAML or JSON)")
	providerType := flags.String("type", "", "the provider type of the shoot namespace (its shoot.gardener.cloud/provider label)")
	clusterFile := flags.String("cluster", "", "the Cluster of the shoot namespace (optional)")
	var providerDirs stringList
	flags.Var(&providerDirs, "providers", "a directory of providers that adds to or overrides the embedded ones (repeatable)")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if *deploymentFile == "" || *providerType == "" {
		return errors.New("-f and --type are required: the Deployment, and the provider type of its namespace")
	}
	deployment := &appsv1.Deployment{}
	if err := readObject(*deploymentFile, deployment); err != nil {
		return err
	}
	cluster, registry, err := readClusterAndProviders(*clusterFile, providerDirs)
	if err != nil {
		return err
	}
	provider, err := registry.Provider(*providerType)
	if err != nil {
		return err
	}
	if provider.Mutations() == nil {
		return fmt.Errorf("provider %q has no %s: it mutates nothing", *providerType, "mutations.yaml")
	}
	namespace := deployment.Namespace
	if namespace == "" && cluster != nil {
		namespace = cluster.Name
	}
	changed, err := webhook.MutateDeployment(provider, deployment, namespace, cluster)
	if err != nil {
		return err
	}
	if !changed {
		fmt.Fprintf(stderr, "unchanged: provider %q mutates %v, each with Gardener's labels app=kubernetes and role\n", *providerType, provider.Mutations().DeploymentNames())
	}
	out, err := yaml.Marshal(deployment)
	if err != nil {
		return err
	}
	_, err = stdout.Write(out)
	return err
}
