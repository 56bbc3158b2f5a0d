package e2e

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Generous timeouts: the machine has two cores and other test packages run alongside.
const (
	runTimeout  = 5 * time.Minute
	pollEvery   = 250 * time.Millisecond
	quickAction = time.Minute
)

// namespace creates a namespace for one test and deletes it when the test ends; the
// node's controller manager removes what is in it.
func namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-"}}
	NewWithT(t).Expect(kube.Create(context.Background(), ns)).To(Succeed())
	t.Cleanup(func() { _ = kube.Delete(context.Background(), ns) })
	return ns.Name
}

// adminKubeconfig is a cluster-admin's kubeconfig of the node's API server, with the
// node's host address, which pods reach.
func adminKubeconfig(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(node.Kubeconfig)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	_, err = clientcmd.Load(data)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return data
}

// podLog records every pod of a namespace and the last status the API server showed for
// each, by UID: a finished run pod is deleted by its executor, its status is kept here.
type podLog struct {
	mu   sync.Mutex
	pods map[types.UID]*corev1.Pod
	// order is the UIDs in the order the pods appeared.
	order []types.UID
}

func watchPods(t *testing.T, namespace string) *podLog {
	t.Helper()
	l := &podLog{pods: map[types.UID]*corev1.Pod{}}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := clientset.CoreV1().Pods(namespace).Watch(ctx, metav1.ListOptions{})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for event := range w.ResultChan() {
			pod, ok := event.Object.(*corev1.Pod)
			if !ok || event.Type == watch.Error {
				continue
			}
			l.mu.Lock()
			if _, seen := l.pods[pod.UID]; !seen {
				l.order = append(l.order, pod.UID)
			}
			l.pods[pod.UID] = pod
			l.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		w.Stop()
		<-done
	})
	return l
}

// seen returns the last status of every pod, in the order they appeared.
func (l *podLog) seen() []*corev1.Pod {
	l.mu.Lock()
	defer l.mu.Unlock()
	var pods []*corev1.Pod
	for _, uid := range l.order {
		pods = append(pods, l.pods[uid].DeepCopy())
	}
	return pods
}

// running waits for the one running pod whose name has the prefix.
func (l *podLog) running(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	NewWithT(t).Eventually(func(g Gomega) {
		pod = nil
		for _, p := range l.seen() {
			if p.Name == name && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				pod = p
			}
		}
		g.Expect(pod).NotTo(BeNil(), "pod %s running", name)
		g.Expect(pod.Status.ContainerStatuses).NotTo(BeEmpty())
		g.Expect(pod.Status.ContainerStatuses[0].State.Running).NotTo(BeNil())
	}).WithTimeout(runTimeout).WithPolling(pollEvery).Should(Succeed())
	return pod
}

// processes returns the host PIDs of a container's processes: its first one and every
// process below it.
func processes(t *testing.T, containerID string) []int {
	t.Helper()
	pid, err := node.ContainerPID(context.Background(), containerID)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return descendants(pid)
}

func descendants(pid int) []int {
	all := []int{pid}
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, task := range tasks {
		data, _ := os.ReadFile(task)
		for _, field := range strings.Fields(string(data)) {
			if kid, err := strconv.Atoi(field); err == nil {
				all = append(all, descendants(kid)...)
			}
		}
	}
	return all
}

// processStatus reads fields of /proc/<pid>/status.
func processStatus(t *testing.T, pid int) map[string]string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	fields := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	return fields
}

// mounts returns the options of a process's root mount and the paths of its other mounts.
func mounts(t *testing.T, pid int) (rootOptions []string, others []string) {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		switch {
		case len(fields) <= 5:
		case fields[4] == "/":
			rootOptions = strings.Split(fields[5], ",")
		default:
			others = append(others, fields[4])
		}
	}
	if rootOptions == nil {
		t.Fatalf("process %d has no root mount", pid)
	}
	return rootOptions, others
}

// writableInTheImage lists what of a container's image, seen through one of its
// processes (others: the paths of its mounts but the root), the user 65532 may write: its owner's or group's and writable by them, or
// writable by anybody. The container's mounts (volumes, /proc, the files the kubelet
// mounts), /tmp and the user's home are not the image's to hold.
func writableInTheImage(t *testing.T, pid int, others []string) []string {
	t.Helper()
	// The root is a link to the process's root directory: walked from inside it.
	root := fmt.Sprintf("/proc/%d/root/", pid)
	skip := map[string]bool{"/tmp": true, "/home/nonroot": true}
	for _, m := range others {
		skip[m] = true
	}
	var writable []string
	walked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		walked++
		name := "/" + strings.TrimPrefix(path, root)
		if skip[name] {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil || info.Mode()&fs.ModeSymlink != 0 {
			return err
		}
		owner, perm := info.Sys().(*syscall.Stat_t), info.Mode().Perm()
		if (owner.Uid == 65532 && perm&0o200 != 0) || (owner.Gid == 65532 && perm&0o020 != 0) || perm&0o002 != 0 {
			writable = append(writable, name)
		}
		return nil
	})
	g := NewWithT(t)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(walked).To(BeNumerically(">", 10), "the image's files were walked")
	return writable
}

// expectHardened checks what the kernel says about a container's processes: they run
// as the unprivileged user 65532 with no capabilities and no way to gain privileges,
// and can write nothing of the image but /tmp and their home; readOnlyRoot: the root
// file system is mounted read-only too.
func expectHardened(t *testing.T, containerID string, readOnlyRoot bool) {
	t.Helper()
	g := NewWithT(t)
	pids := processes(t, containerID)
	g.Expect(pids).NotTo(BeEmpty())
	for _, pid := range pids {
		status := processStatus(t, pid)
		g.Expect(status["Uid"]).To(Equal("65532 65532 65532 65532"), "process %d (%s)", pid, status["Name"])
		g.Expect(status["Gid"]).To(Equal("65532 65532 65532 65532"), "process %d (%s)", pid, status["Name"])
		g.Expect(status["NoNewPrivs"]).To(Equal("1"), "process %d (%s)", pid, status["Name"])
		g.Expect(status["CapEff"]).To(Equal("0000000000000000"), "process %d (%s)", pid, status["Name"])
		rootOptions, others := mounts(t, pid)
		g.Expect(writableInTheImage(t, pid, others)).To(BeEmpty(), "process %d (%s): what of the image it may write", pid, status["Name"])
		if readOnlyRoot {
			g.Expect(rootOptions).To(ContainElement("ro"), "process %d (%s): the root file system", pid, status["Name"])
		}
	}
}

// items returns the names of the test configuration's ConfigMaps in namespace.
func items(g Gomega, namespace string) []string {
	list := &corev1.ConfigMapList{}
	g.Expect(kube.List(context.Background(), list, client.InNamespace(namespace), client.MatchingLabels{"terraseed-e2e": "item"})).To(Succeed())
	var names []string
	for _, cm := range list.Items {
		names = append(names, cm.Name)
	}
	sort.Strings(names)
	return names
}

// expectOneItemPerIndex checks that the ConfigMaps are items 0..n-1, each once: a state
// entry a run lost would show up as a second item of its index.
func expectOneItemPerIndex(g Gomega, names []string, n int) {
	perIndex := map[string]int{}
	for _, name := range names {
		parts := strings.SplitN(name, "-", 3)
		g.Expect(parts).To(HaveLen(3), name)
		perIndex[parts[1]]++
	}
	for i := range n {
		g.Expect(perIndex).To(HaveKeyWithValue(strconv.Itoa(i), 1), "item %d once: %v", i, names)
	}
	g.Expect(names).To(HaveLen(n))
}
