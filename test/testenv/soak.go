package testenv

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
)

// SoakSettings are the settings of a soak, from the environment: TERRASEED_SOAK_OBJECTS
// Infrastructures (40), for at least TERRASEED_SOAK_DURATION (4m) and TERRASEED_SOAK_KILLS
// kills (50).
func SoakSettings(t testing.TB) (objects int, duration time.Duration, kills int) {
	t.Helper()
	objects, duration, kills = 40, 4*time.Minute, 50
	var err error
	if v := os.Getenv("TERRASEED_SOAK_OBJECTS"); v != "" {
		objects, err = strconv.Atoi(v)
	}
	if v := os.Getenv("TERRASEED_SOAK_DURATION"); v != "" && err == nil {
		duration, err = time.ParseDuration(v)
	}
	if v := os.Getenv("TERRASEED_SOAK_KILLS"); v != "" && err == nil {
		kills, err = strconv.Atoi(v)
	}
	if err != nil {
		t.Fatalf("soak settings: %v", err)
	}
	return objects, duration, kills
}

// LoseState deletes for good, as a lost state is lost, the ConfigMaps of namespace named
// names and those labelled parts (a split state's parts): their finalizers are removed
// first. It says whether it deleted any.
func LoseState(ctx context.Context, c client.Client, namespace string, names []string, parts map[string]string) (bool, error) {
	list := &corev1.ConfigMapList{}
	if err := c.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels(parts)); err != nil {
		return false, err
	}
	for _, part := range list.Items {
		names = append(names, part.Name)
	}
	deleted := false
	for _, name := range names {
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cm); err != nil {
			continue
		}
		if len(cm.Finalizers) > 0 {
			patch := client.MergeFrom(cm.DeepCopy())
			cm.Finalizers = nil
			if err := c.Patch(ctx, cm, patch); err != nil {
				continue
			}
		}
		if err := c.Delete(ctx, cm); err == nil {
			deleted = true
		}
	}
	return deleted, nil
}

// Recoveries says how lost states were found again in namespaces: the messages of the
// Recovered events, their figures left out, counted.
func Recoveries(ctx context.Context, c client.Client, namespaces []string) (string, error) {
	counts := map[string]int{}
	for _, ns := range namespaces {
		events := &corev1.EventList{}
		if err := c.List(ctx, events, client.InNamespace(ns)); err != nil {
			return "", err
		}
		for _, e := range events.Items {
			if e.Reason == "Recovered" {
				counts[withoutFigures(e.Message)] += int(max(e.Count, 1))
			}
		}
	}
	if len(counts) == 0 {
		return "nothing", nil
	}
	var kinds []string
	for kind, n := range counts {
		kinds = append(kinds, fmt.Sprintf("%d× %q", n, kind))
	}
	slices.Sort(kinds)
	return strings.Join(kinds, ", "), nil
}

// withoutFigures is message with its object names and each run of digits left out.
func withoutFigures(message string) string {
	if _, what, found := strings.Cut(message, " was "); found {
		message = "was " + what
	}
	var b strings.Builder
	for _, r := range message {
		switch {
		case r < '0' || r > '9':
			b.WriteRune(r)
		case !strings.HasSuffix(b.String(), "N"):
			b.WriteRune('N')
		}
	}
	return b.String()
}

// SucceededSince is whether infra's last operation succeeded after since, a second's
// rounding of the API's times aside: a state deleted at since is recovered then, and a
// deletion of infra finds what to destroy.
func SucceededSince(infra *extensionsv1alpha1.Infrastructure, since time.Time) bool {
	op := infra.Status.LastOperation
	return op != nil && op.State == extensionsv1alpha1.LastOperationStateSucceeded && op.LastUpdateTime.After(since.Add(time.Second))
}
