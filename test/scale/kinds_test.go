package scale_test

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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/terraseed/terraseed/api/v1alpha1"
	"github.com/terraseed/terraseed/test/testenv"
)

// dnsChangeSevere is the wait for a DNSRecord that gardenlet calls severe; it gives up
// after dnsChangeTimeout.
const (
	dnsChangeSevere  = 15 * time.Second
	dnsChangeTimeout = 2 * time.Minute
)

// BenchmarkScaleKinds runs one controller process, with the local executor and the local
// provider, against envtest with a seed of every kind: TERRASEED_KINDS_N shoots (1,000 by
// default), each with an Infrastructure, two DNSRecords (internal and external) and a
// BackupEntry, and the seed's one BackupBucket. It measures how long they take to
// settle, the runs an hour, what the controller costs (RSS, CPU, API requests per
// object), and how long a change of one DNSRecord's values takes to be applied: the
// first record's, while the other records' creates still wait for their slots, then
// one after the other while the other kinds' runs do. gardenlet waits for a DNSRecord
// at most two minutes, and calls 15 seconds severe. Each figure is also written to
// stderr as soon as it is measured: the whole benchmark takes long.
func BenchmarkScaleKinds(b *testing.B) {
	n := envInt(b, "TERRASEED_KINDS_N", 1000)
	for b.Loop() {
		s := newSeed(b, n)
		s.infraType = "local"
		k := s.kindsSeed(n)
		c := s.start(time.Hour)

		// gardenlet creates a seed's bucket before the entries of its shoots, which write
		// into it.
		bucket := time.Now()
		k.createBucket()
		report(b, time.Since(bucket).Seconds(), "bucket-s")

		started := time.Now()
		requests := c.metric("rest_client_requests_total", nil)
		applies := c.metric("terraseed_terraform_runs_total", map[string]string{"command": "apply"})
		for i := range n {
			k.createShoot(i)
		}
		report(b, time.Since(started).Seconds(), "create-s")

		burst := k.changeRecords(c, 1, true)
		if len(burst.latencies) > 0 {
			report(b, burst.latencies[0].Seconds(), "dns-change-among-dns-creates-s")
			report(b, burst.waiting[0], "dns-change-among-dns-creates-runs-waiting")
		}
		// What the controller holds while every kind is busy, beside what it keeps settled.
		c.saveHeapProfile(fmt.Sprintf("kinds-busy-%d", n))
		k.waitSettledKind("DNSRecord", 3*time.Hour)
		report(b, time.Since(started).Seconds(), "dns-settle-s")
		reportChanges(b, k.changeRecords(c, latencySamples, true))

		k.waitSettled(3 * time.Hour)
		settle := time.Since(started)
		report(b, settle.Seconds(), "settle-s")
		report(b, (c.metric("terraseed_terraform_runs_total", map[string]string{"command": "apply"})-applies)/settle.Hours(), "runs/h")
		report(b, (c.metric("rest_client_requests_total", nil)-requests)/float64(4*n), "api-requests/object")
		report(b, c.cpuSeconds(), "settle-cpu-s")
		report(b, float64(c.status().VmHWM)/(1<<20), "peak-rss-MiB")

		time.Sleep(10 * time.Second)
		report(b, c.rssMiB(), "settled-rss-MiB")
		report(b, c.anonMiB(), "settled-anon-MiB")
		c.saveHeapProfile(fmt.Sprintf("kinds-settled-%d", n))
		before, cpu := c.metric("rest_client_requests_total", nil), c.cpuSeconds()
		time.Sleep(30 * time.Second)
		report(b, (c.metric("rest_client_requests_total", nil)-before)/30, "settled-api-requests/s")
		report(b, (c.cpuSeconds()-cpu)/30, "settled-cpu-s/s")

		idle := k.changeRecords(c, latencySamples, false)
		report(b, median(idle.latencies).Seconds(), "idle-dns-change-s")
		c.stop()
	}
}

// report reports a figure of the benchmark, and writes it to stderr at once.
func report(b *testing.B, v float64, unit string) {
	fmt.Fprintf(os.Stderr, "%s: %.4g %s\n", b.Name(), v, unit)
	b.ReportMetric(v, unit)
}

// reportChanges reports the median latency of the DNSRecord changes made while the
// other kinds were busy, and how many there were; fewer than asked for when they settled
// before.
func reportChanges(b *testing.B, changes dnsChanges) {
	report(b, float64(len(changes.latencies)), "busy-dns-changes")
	if len(changes.latencies) == 0 {
		b.Errorf("no DNSRecord change was made while the other kinds were busy")
		return
	}
	m := median(changes.latencies)
	report(b, m.Seconds(), "busy-dns-change-s")
	report(b, slices.Max(changes.latencies).Seconds(), "busy-dns-change-max-s")
	fmt.Fprintf(os.Stderr, "%s: DNSRecord changes while the other kinds were busy: %v, runs waiting at each change %v\n", b.Name(), changes.latencies, changes.waiting)
	if m > dnsChangeSevere {
		b.Errorf("a DNSRecord change took %s at the median while the other kinds were busy, over the %s gardenlet calls severe", m, dnsChangeSevere)
	}
}

func envInt(b *testing.B, name string, fallback int) int {
	v := os.Getenv(name)
	if v == "" {
		return fallback
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		b.Fatalf("%s: %v", name, err)
	}
	return n
}

// kindsSeed is a seed of every kind: its shoots, their records, and the bucket.
type kindsSeed struct {
	*seed
	n          int
	kubeconfig []byte
	bucket     string
	// changed counts the records changed so far, each one's values once.
	changed int
}

// kindsSeed serves the local provider's Infrastructures, DNSRecords, BackupBuckets and
// BackupEntries, the cluster-scoped kinds' runs in a namespace of their own.
func (s *seed) kindsSeed(n int) *kindsSeed {
	ctx := context.Background()
	kubeconfig, err := os.ReadFile(s.kubeconfig)
	if err != nil {
		s.b.Fatal(err)
	}
	runs := s.prefix + "runs"
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: runs}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "garden"}},
	} {
		if err := env.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			s.b.Fatal(err)
		}
	}
	s.extraArgs = append(s.extraArgs, "--provider-types=local", "--kinds=dnsrecord,backupbucket,backupentry", "--runs-namespace="+runs)
	return &kindsSeed{seed: s, n: n, kubeconfig: kubeconfig, bucket: s.prefix + "bucket"}
}

// createBucket creates the seed's BackupBucket and its credentials in garden, and waits
// until it was created.
func (k *kindsSeed) createBucket() {
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "garden", Name: k.bucket}, Data: map[string][]byte{"kubeconfig": k.kubeconfig}}
	bucket := &extensionsv1alpha1.BackupBucket{
		ObjectMeta: metav1.ObjectMeta{Name: k.bucket},
		Spec: extensionsv1alpha1.BackupBucketSpec{DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "local"}, Region: "local-1",
			SecretRef: corev1.SecretReference{Namespace: "garden", Name: k.bucket}},
	}
	for _, obj := range []client.Object{secret, bucket} {
		if err := env.Client.Create(ctx, obj); err != nil {
			k.b.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Minute)
	for !succeeded(bucket) {
		if time.Now().After(deadline) {
			k.b.Fatalf("the BackupBucket was not created in 5 minutes: %+v", bucket.Status)
		}
		time.Sleep(200 * time.Millisecond)
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(bucket), bucket); err != nil {
			k.b.Fatal(err)
		}
	}
}

// createShoot creates the namespace of shoot i, its credentials, its Infrastructure, its
// internal and external DNSRecords, and its BackupEntry in the seed's bucket.
func (k *kindsSeed) createShoot(i int) {
	ctx := context.Background()
	name := fmt.Sprintf("shoot-%04d", i)
	ns := k.prefix + name
	objects := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cloudprovider"}, Data: map[string][]byte{"kubeconfig": k.kubeconfig}},
		&extensionsv1alpha1.Infrastructure{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "infrastructure"},
			Spec: extensionsv1alpha1.InfrastructureSpec{
				DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "local", ProviderConfig: testenv.LocalProviderConfig("10.250.0.0/19")},
				Region:      "local-1",
				SecretRef:   corev1.SecretReference{Name: "cloudprovider", Namespace: ns},
			},
		},
	}
	for _, purpose := range []string{"internal", "external"} {
		objects = append(objects, &extensionsv1alpha1.DNSRecord{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-" + purpose},
			Spec: extensionsv1alpha1.DNSRecordSpec{
				DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "local", ProviderConfig: &k8sruntime.RawExtension{Raw: []byte(`{"namespace":"` + ns + `"}`)}},
				SecretRef:   corev1.SecretReference{Name: "cloudprovider"},
				Name:        fmt.Sprintf("api.%s.%s.example.com", name, purpose),
				RecordType:  extensionsv1alpha1.DNSRecordTypeA,
				Values:      []string{"192.0.2.1"},
			},
		})
	}
	objects = append(objects, &extensionsv1alpha1.BackupEntry{
		// Gardener names an entry by the shoot's namespace and its UID.
		ObjectMeta: metav1.ObjectMeta{Name: ns + "--" + fmt.Sprintf("%08x", i)},
		Spec: extensionsv1alpha1.BackupEntrySpec{
			DefaultSpec: extensionsv1alpha1.DefaultSpec{Type: "local"}, Region: "local-1", BucketName: k.bucket,
			SecretRef: corev1.SecretReference{Namespace: "garden", Name: k.bucket},
		},
	})
	for _, obj := range objects {
		if err := env.Client.Create(ctx, obj); err != nil {
			k.b.Fatal(err)
		}
	}
}

// kindsObject is an object of a kind served from templates, or an Infrastructure.
type kindsObject interface {
	client.Object
	GetExtensionStatus() *extensionsv1alpha1.DefaultStatus
}

// settledCounts counts this seed's objects of each kind whose last operation succeeded
// for their current generation.
func (k *kindsSeed) settledCounts() map[string]int {
	ctx := context.Background()
	counts := map[string]int{}
	lists := map[string]client.ObjectList{
		"Infrastructure": &extensionsv1alpha1.InfrastructureList{}, "DNSRecord": &extensionsv1alpha1.DNSRecordList{},
		"BackupEntry": &extensionsv1alpha1.BackupEntryList{}, "BackupBucket": &extensionsv1alpha1.BackupBucketList{},
	}
	for kind, list := range lists {
		if err := env.Client.List(ctx, list); err != nil {
			k.b.Fatal(err)
		}
		var items []kindsObject
		switch l := list.(type) {
		case *extensionsv1alpha1.InfrastructureList:
			for i := range l.Items {
				items = append(items, &l.Items[i])
			}
		case *extensionsv1alpha1.DNSRecordList:
			for i := range l.Items {
				items = append(items, &l.Items[i])
			}
		case *extensionsv1alpha1.BackupEntryList:
			for i := range l.Items {
				items = append(items, &l.Items[i])
			}
		case *extensionsv1alpha1.BackupBucketList:
			for i := range l.Items {
				items = append(items, &l.Items[i])
			}
		}
		for _, obj := range items {
			if strings.HasPrefix(obj.GetNamespace()+obj.GetName(), k.prefix) && succeeded(obj) {
				counts[kind]++
			}
		}
	}
	return counts
}

// succeeded says whether the last operation of obj succeeded for its current generation.
func succeeded(obj kindsObject) bool {
	status := obj.GetExtensionStatus()
	last := status.LastOperation
	return last != nil && last.State == extensionsv1alpha1.LastOperationStateSucceeded && status.ObservedGeneration == obj.GetGeneration()
}

// want is how many objects of each kind the seed has.
func (k *kindsSeed) want() map[string]int {
	return map[string]int{"Infrastructure": k.n, "DNSRecord": 2 * k.n, "BackupEntry": k.n, "BackupBucket": 1}
}

// busy says whether objects of the kinds besides DNSRecords have yet to settle.
func (k *kindsSeed) busy() bool {
	counts, want := k.settledCounts(), k.want()
	return counts["Infrastructure"] < want["Infrastructure"] || counts["BackupEntry"] < want["BackupEntry"]
}

// waitSettled waits until every object of the seed settled.
func (k *kindsSeed) waitSettled(timeout time.Duration) { k.waitSettledKind("", timeout) }

// waitSettledKind waits until every object of the seed of kind settled, of every kind
// when kind is empty, and tells how many did on stderr each minute.
func (k *kindsSeed) waitSettledKind(kind string, timeout time.Duration) {
	started := time.Now()
	told := started
	for {
		counts, want := k.settledCounts(), k.want()
		done := true
		for name, n := range want {
			done = done && (kind != "" && name != kind || counts[name] >= n)
		}
		if done {
			return
		}
		if time.Since(started) > timeout {
			k.b.Fatalf("settled in %s: %v of %v", timeout, counts, want)
		}
		if time.Since(told) > time.Minute {
			fmt.Fprintf(os.Stderr, "%s: settled after %s: %v of %v\n", k.b.Name(), time.Since(started).Round(time.Second), counts, want)
			told = time.Now()
		}
		time.Sleep(2 * time.Second)
	}
}

// dnsChanges are the latencies of DNSRecord changes, and the runs waiting for a slot
// when each was made.
type dnsChanges struct {
	latencies []time.Duration
	waiting   []float64
}

// changeRecords changes the values of up to samples DNSRecords that were created, one
// after the other, each until the record says it applied the change and its ConfigMap
// holds the new value. whileBusy stops once the kinds besides DNSRecords have settled:
// the changes that count are the ones made while their runs still wait for slots.
func (k *kindsSeed) changeRecords(c *controllerProcess, samples int, whileBusy bool) dnsChanges {
	var changes dnsChanges
	for range samples {
		if k.changed >= k.n {
			break
		}
		record := k.createdRecord(k.changed, whileBusy)
		if record == nil || whileBusy && !k.busy() {
			break
		}
		k.changed++
		waiting := c.metric("terraseed_terraform_runs_waiting", nil)
		latency := k.changeRecord(record, fmt.Sprintf("192.0.2.%d", 1+k.changed%250))
		changes.latencies, changes.waiting = append(changes.latencies, latency), append(changes.waiting, waiting)
	}
	return changes
}

// createdRecord waits until the internal DNSRecord of shoot i was created; nil when
// whileBusy and the fleet settled first.
func (k *kindsSeed) createdRecord(i int, whileBusy bool) *extensionsv1alpha1.DNSRecord {
	name := fmt.Sprintf("shoot-%04d", i)
	key := client.ObjectKey{Namespace: k.prefix + name, Name: name + "-internal"}
	record := &extensionsv1alpha1.DNSRecord{}
	deadline := time.Now().Add(time.Hour)
	for checked := time.Now(); ; {
		if err := env.Client.Get(context.Background(), key, record); err != nil {
			k.b.Fatal(err)
		}
		if succeeded(record) {
			return record
		}
		if time.Now().After(deadline) {
			k.b.Fatalf("the DNSRecord %s was not created in an hour", key)
		}
		if whileBusy && time.Since(checked) > 10*time.Second {
			if !k.busy() {
				return nil
			}
			checked = time.Now()
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// changeRecord sets the record's value and returns how long it took until the record
// says it applied its new generation and its ConfigMap holds the value.
func (k *kindsSeed) changeRecord(record *extensionsv1alpha1.DNSRecord, value string) time.Duration {
	ctx := context.Background()
	base := record.DeepCopy()
	record.Spec.Values = []string{value}
	started := time.Now()
	if err := env.Client.Patch(ctx, record, client.MergeFrom(base)); err != nil {
		k.b.Fatal(err)
	}
	want := `["` + value + `"]`
	deadline := started.Add(time.Hour)
	for {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(record), record); err != nil {
			k.b.Fatal(err)
		}
		if succeeded(record) && k.recordValues(record) == want {
			return time.Since(started)
		}
		if time.Now().After(deadline) {
			k.b.Fatalf("the change of the DNSRecord %s was not applied in an hour", client.ObjectKeyFromObject(record))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// recordValues are the values the ConfigMap of the record holds, as the local provider
// writes them.
func (k *kindsSeed) recordValues(record *extensionsv1alpha1.DNSRecord) string {
	list := &corev1.ConfigMapList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(record.Namespace), client.HasLabels{"dns.terraseed.io/zone"}); err != nil {
		k.b.Fatal(err)
	}
	for _, cm := range list.Items {
		if cm.Data["name"] == record.Spec.Name {
			return cm.Data["values"]
		}
	}
	return ""
}
