package scale_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
)

// fleetRunsPerAccount is the budget of each account in BenchmarkScaleFleet.
const fleetRunsPerAccount = 2

// BenchmarkScaleFleet runs one controller, with the local executor and --runs-per-account 2,
// against two cloud accounts of TERRASEED_FLEET_N Infrastructures each (100 by default)
// of the fleet provider, each account's shoots in a project of their own with the
// account's token, which keys its budget: the runs under way per account,
// sampled from the metrics every 100 ms, never exceed the budget, and both accounts
// settle. Then one account's runs are throttled (the provider fails them with the
// cloud's message): the other account's creates keep their idle latency within 1.5x.
func BenchmarkScaleFleet(b *testing.B) {
	n := 100
	if v := os.Getenv("TERRASEED_FLEET_N"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatalf("TERRASEED_FLEET_N: %v", err)
		}
	}
	for b.Loop() {
		s := newSeed(b, 2*n)
		// The budget is the credentials' (the token's); each account's shoots are one
		// project's too, shoot--<project>--<name> (fleetNamespace), as a tenant's are.
		s.prefix = "shoot--" + s.prefix
		c := s.startFleet()

		sampling := c.sampleBudgets(100 * time.Millisecond)
		started := time.Now()
		for i := range n {
			s.createFleet(fmt.Sprintf("a-%04d", i), "account-a", "")
			s.createFleet(fmt.Sprintf("b-%04d", i), "account-b", "")
		}
		s.waitSettled(2*n, time.Hour)
		settle := time.Since(started)
		highest, samples := sampling()
		b.ReportMetric(settle.Seconds(), "settle-s")
		b.ReportMetric(float64(2*n)/settle.Hours(), "runs/h")
		b.ReportMetric(float64(samples), "budget-samples")
		most := 0
		for budget, h := range highest {
			b.Logf("budget %s: at most %d runs under way", budget, h)
			most = max(most, h)
		}
		b.ReportMetric(float64(most), "max-runs-per-account")
		if len(highest) != 2 {
			b.Errorf("%d budgets seen in the metrics, want the 2 accounts: %v", len(highest), highest)
		}
		if most > fleetRunsPerAccount {
			b.Errorf("an account had %d runs under way at once, over its budget of %d: %v", most, fleetRunsPerAccount, highest)
		}

		idle := s.fleetCreateMedian("idle", "account-b", "")
		b.ReportMetric(idle.Seconds(), "idle-create-s")

		// Account a is throttled: its runs fail, retried, and its budget backs off.
		for i := range 2 * fleetRunsPerAccount * 5 {
			s.createFleet(fmt.Sprintf("throttled-%04d", i), "account-a", "creating EC2 VPC: api error Throttling: Rate exceeded")
		}
		deadline := time.Now().Add(5 * time.Minute)
		for c.metric("terraseed_terraform_throttled_runs_total", nil) < 1 {
			if time.Now().After(deadline) {
				infra := &extensionsv1alpha1.Infrastructure{}
				_ = env.Client.Get(context.Background(), client.ObjectKey{Namespace: s.fleetNamespace("throttled-0000", "account-a"), Name: "infrastructure"}, infra)
				b.Fatalf("no run was throttled; the first throttled Infrastructure's status: %+v %+v", infra.Status.LastOperation, infra.Status.LastError)
			}
			time.Sleep(100 * time.Millisecond)
		}
		throttled := s.fleetCreateMedian("throttled", "account-b", "")
		slots := c.budgetSlots()
		b.Logf("slots per budget while account a is throttled: %v", slots)
		least := fleetRunsPerAccount
		for _, n := range slots {
			least = min(least, n)
		}
		b.ReportMetric(float64(least), "throttled-account-slots")
		if least >= fleetRunsPerAccount {
			b.Errorf("no account backed off: %v", slots)
		}
		b.ReportMetric(throttled.Seconds(), "throttled-neighbour-create-s")
		b.ReportMetric(throttled.Seconds()/idle.Seconds(), "create-throttled/idle")
		b.ReportMetric(c.metric("terraseed_terraform_throttled_runs_total", nil), "throttled-runs")
		if ratio := throttled.Seconds() / idle.Seconds(); ratio > 1.5 {
			b.Errorf("while account a is throttled, account b's creates take %s, %.2fx their idle %s", throttled, ratio, idle)
		}
		c.stop()
	}
}

// fleetNamespace is the namespace of a shoot of the account: in the account's project.
func (s *seed) fleetNamespace(name, account string) string {
	return s.prefix + account + "--" + name
}

// createFleet creates the namespace, the credentials of the account and the
// Infrastructure of one shoot of the fleet provider; throttle, when set, is the message
// its runs fail with.
func (s *seed) createFleet(name, account, throttle string) {
	ctx := context.Background()
	ns := s.fleetNamespace(name, account)
	config := `{"items":3}`
	if throttle != "" {
		config = fmt.Sprintf(`{"items":3,"throttle":%q}`, throttle)
	}
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cloudprovider"}, Data: map[string][]byte{"token": []byte(account)}},
		&extensionsv1alpha1.Infrastructure{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "infrastructure"},
			Spec: extensionsv1alpha1.InfrastructureSpec{
				DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "fleet", ProviderConfig: &k8sruntime.RawExtension{Raw: []byte(config)}},
				Region:      "local-1",
				SecretRef:   corev1.SecretReference{Name: "cloudprovider", Namespace: ns},
			},
		},
	} {
		if err := env.Client.Create(ctx, obj); err != nil {
			s.b.Fatal(err)
		}
	}
}

// fleetCreateMedian creates latencySamples more shoots of the account, one after the
// other, and returns the median time a create took.
func (s *seed) fleetCreateMedian(name, account, throttle string) time.Duration {
	var creates []time.Duration
	for i := range latencySamples {
		short := fmt.Sprintf("%s-%d", name, i)
		started := time.Now()
		s.createFleet(short, account, throttle)
		key := client.ObjectKey{Namespace: s.fleetNamespace(short, account), Name: "infrastructure"}
		infra := &extensionsv1alpha1.Infrastructure{}
		for {
			if err := env.Client.Get(context.Background(), key, infra); err != nil {
				s.b.Fatal(err)
			}
			if last := infra.Status.LastOperation; last != nil && last.State == extensionsv1alpha1.LastOperationStateSucceeded {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		creates = append(creates, time.Since(started))
	}
	return median(creates)
}

// startFleet runs the controller with the local executor, the fleet provider and its
// accounts' budgets until stop: the flags after start's own take their place.
func (s *seed) startFleet() *controllerProcess {
	s.extraArgs = append(s.extraArgs, "--provider-types=fleet", "--runs-per-account", strconv.Itoa(fleetRunsPerAccount))
	return s.start(time.Hour)
}

// budgetSlots are the slots each budget key has now.
func (c *controllerProcess) budgetSlots() map[string]int {
	families, err := c.families()
	if err != nil {
		c.b.Fatal(err)
	}
	slots := map[string]int{}
	for _, m := range families["terraseed_terraform_budget_slots"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "budget" {
				slots[l.GetValue()] = int(m.GetGauge().GetValue())
			}
		}
	}
	return slots
}

// sampleBudgets reads the runs under way per budget key from the metrics every period
// until the returned function is called, which returns the most seen per key and how
// many samples were read.
func (c *controllerProcess) sampleBudgets(period time.Duration) func() (map[string]int, int) {
	var mu sync.Mutex
	highest := map[string]int{}
	samples := 0
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		ticker := time.NewTicker(period)
		defer ticker.Stop()
		for {
			select {
			case <-stop:
				return
			case <-ticker.C:
			}
			families, err := c.families()
			if err != nil {
				continue
			}
			mu.Lock()
			samples++
			for _, m := range families["terraseed_terraform_budget_runs"].GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["state"] == "running" {
					highest[labels["budget"]] = max(highest[labels["budget"]], int(m.GetGauge().GetValue()))
				}
			}
			mu.Unlock()
		}
	}()
	return func() (map[string]int, int) {
		close(stop)
		<-stopped
		mu.Lock()
		defer mu.Unlock()
		return highest, samples
	}
}
