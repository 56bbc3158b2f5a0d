package realnode

import (
	"context"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gofrs/flock"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/terraseed/terraseed/test/image"
)

// The node's fixed names and addresses.
const (
	// NodeName is the Node's name.
	NodeName = "terraseed-node"
	// HostIP is the bridge's address on the host: the node's InternalIP and the address
	// the API server and the kubelet listen on. Pods reach the host here.
	HostIP = "10.89.0.1"
	// PodCIDR is where pods get their addresses.
	PodCIDR = "10.89.0.0/16"
	// ServiceCIDR is the service network; only ServiceIP leads anywhere.
	ServiceCIDR = "10.97.0.0/16"
	// ServiceIP is the `kubernetes` service's ClusterIP: in-cluster clients reach the API
	// server through it.
	ServiceIP = "10.97.0.1"
	// PauseImage is the pod sandbox image, built and imported by Start.
	PauseImage = "localhost/terraseed/pause:1"

	bridge = "terraseed0"
	// bridgeMAC is set on the bridge, which otherwise takes the lowest MAC of its ports
	// and changes it as pods come and go: a pod that had just resolved the host's address
	// to the old one sent into the void until its neighbour entry expired (up to 45 s).
	bridgeMAC = "02:89:00:00:00:01"
	apiPort   = 6443
	etcdPort  = 23790
	// Chains of this node in the nat and filter tables.
	natChain     = "TERRASEED-NODE-SVC"
	forwardChain = "TERRASEED-NODE-FWD"
)

// ErrUnavailable is returned by Start when this machine cannot run the node: a test
// suite may skip then, unless it is told to require the node.
var ErrUnavailable = errors.New("no node can run on this machine")

// Options configure Start.
type Options struct {
	// ControlPlane holds kube-apiserver and etcd; $KUBEBUILDER_ASSETS when empty.
	ControlPlane string
	// Binaries holds kubelet, kube-scheduler and kube-controller-manager;
	// $TERRASEED_NODE_BINARIES when empty.
	Binaries string
	// StateDir holds everything of the running node, and is removed by Stop; a fixed
	// directory under os.TempDir() when empty, so that the next Start finds what a node
	// of a killed test process left behind.
	StateDir string
	// Log receives progress lines; none when nil.
	Log io.Writer
}

// Node is a running node and its control plane.
type Node struct {
	// Config is a cluster-admin's configuration of the API server.
	Config *rest.Config
	// Kubeconfig is the path of a cluster-admin's kubeconfig.
	Kubeconfig string
	// Clientset is a cluster-admin's clientset.
	Clientset kubernetes.Interface

	// KeepLogs keeps the components' logs when the node stops, for a failed test.
	KeepLogs bool

	dir, logDir string
	log         io.Writer
	lock        *flock.Flock
	procs       []*process
	spawn       chan spawnRequest
	started     time.Time
}

type process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

func (o *Options) defaults() {
	if o.ControlPlane == "" {
		o.ControlPlane = os.Getenv("KUBEBUILDER_ASSETS")
	}
	if o.Binaries == "" {
		o.Binaries = os.Getenv("TERRASEED_NODE_BINARIES")
	}
	if o.StateDir == "" {
		o.StateDir = filepath.Join(os.TempDir(), "terraseed-node")
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
}

// Available reports why this machine cannot run the node, or nil.
func Available(o Options) error {
	o.defaults()
	if runtime.GOOS != "linux" {
		return fmt.Errorf("%w: it needs Linux", ErrUnavailable)
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: it needs root", ErrUnavailable)
	}
	var missing []string
	for _, c := range []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "iptables", "ip"} {
		if _, err := exec.LookPath(c); err != nil {
			missing = append(missing, c)
		}
	}
	for _, p := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(cniBinDir, p)); err != nil {
			missing = append(missing, filepath.Join(cniBinDir, p))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: missing %s (Debian: apt-get install containerd containernetworking-plugins iptables iproute2)", ErrUnavailable, strings.Join(missing, ", "))
	}
	if o.ControlPlane == "" || o.Binaries == "" {
		return fmt.Errorf("%w: KUBEBUILDER_ASSETS and TERRASEED_NODE_BINARIES must be set: run `make test`, or `make tools` and `eval \"$(make -s env)\"`", ErrUnavailable)
	}
	for _, b := range []string{filepath.Join(o.ControlPlane, "kube-apiserver"), filepath.Join(o.ControlPlane, "etcd"),
		filepath.Join(o.Binaries, "kubelet"), filepath.Join(o.Binaries, "kube-scheduler"), filepath.Join(o.Binaries, "kube-controller-manager")} {
		if _, err := os.Stat(b); err != nil {
			return fmt.Errorf("%w: %v (run `make tools`)", ErrUnavailable, err)
		}
	}
	return nil
}

const cniBinDir = "/usr/lib/cni"

// Start brings the node up and returns when it is Ready and schedulable. It waits for
// any other node of this machine to stop first, up to ctx's deadline.
func Start(ctx context.Context, o Options) (*Node, error) {
	o.defaults()
	if err := Available(o); err != nil {
		return nil, err
	}
	lock := flock.New(filepath.Join(os.TempDir(), "terraseed-node.lock"))
	locked, err := lock.TryLockContext(ctx, 500*time.Millisecond)
	if err != nil || !locked {
		return nil, fmt.Errorf("waiting for the node lock %s: %w", lock.Path(), errors.Join(err, ctx.Err()))
	}
	n := &Node{dir: o.StateDir, log: o.Log, lock: lock, started: time.Now(), spawn: make(chan spawnRequest)}
	go spawner(n.spawn)
	if _, err := os.Stat(n.dir); err == nil {
		n.logf("cleaning up the node a previous test process left behind in %s", n.dir)
		teardown(n.dir, n.logf)
	}
	if n.logDir, err = os.MkdirTemp("", "terraseed-node-logs-"); err != nil {
		_ = lock.Unlock()
		return nil, err
	}
	if err := n.start(ctx, o); err != nil {
		n.logf("start failed: %v", err)
		n.KeepLogs = true
		tails := n.LogTails(4 << 10)
		_ = n.Stop()
		return nil, fmt.Errorf("%w (the logs are kept in %s)\n%s", err, n.logDir, tails)
	}
	n.logf("node %s ready", NodeName)
	return n, nil
}

func (n *Node) logf(format string, args ...any) {
	fmt.Fprintf(n.log, "[node %6.1fs] %s\n", time.Since(n.started).Seconds(), fmt.Sprintf(format, args...))
}

func (n *Node) path(elem ...string) string { return filepath.Join(append([]string{n.dir}, elem...)...) }

// start sets the node up in the order each step needs the one before: certificates, the
// bridge and its rules, etcd and kube-apiserver, the controller manager and scheduler,
// containerd, the kubelet. It is long because it is that one sequence, each step a few
// lines waiting for the last.
func (n *Node) start(ctx context.Context, o Options) error {
	for _, d := range []string{"pki", "pids", "etcd", "containerd", "cni/net.d", "cni/ipam", "kubelet/root", "images"} {
		if err := os.MkdirAll(n.path(d), 0o700); err != nil {
			return err
		}
	}
	if err := recordHostState(n.dir); err != nil {
		return err
	}

	// The sandbox image builds while the certificates are made.
	pauseArchive := n.path("images", "pause.tar")
	pauseDone := make(chan error, 1)
	go func() { pauseDone <- buildPause(n.path("images"), pauseArchive) }()

	p, err := newPKI(n.path("pki"))
	if err != nil {
		return err
	}
	host := net.ParseIP(HostIP)
	for _, c := range []struct {
		name, cn string
		org      []string
		ips      []net.IP
		dns      []string
	}{
		{"apiserver", "kube-apiserver", nil, []net.IP{host, net.ParseIP(ServiceIP), net.ParseIP("127.0.0.1")},
			[]string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost"}},
		{"admin", "terraseed-node-admin", []string{"system:masters"}, nil, nil},
		{"apiserver-kubelet-client", "kube-apiserver-kubelet-client", []string{"system:masters"}, nil, nil},
		{"kubelet-client", "system:node:" + NodeName, []string{"system:nodes"}, nil, nil},
		{"kubelet-serving", "system:node:" + NodeName, []string{"system:nodes"}, []net.IP{host}, []string{NodeName}},
		{"controller-manager", "system:kube-controller-manager", nil, nil, nil},
		{"scheduler", "system:kube-scheduler", nil, nil, nil},
	} {
		if err := p.issue(c.name, pkix.Name{CommonName: c.cn, Organization: c.org}, c.ips, c.dns); err != nil {
			return err
		}
	}
	if err := p.serviceAccountKey(); err != nil {
		return err
	}
	server := fmt.Sprintf("https://%s:%d", HostIP, apiPort)
	for _, user := range []string{"admin", "kubelet-client", "controller-manager", "scheduler"} {
		if err := p.kubeconfig(n.path(user+".kubeconfig"), server, user); err != nil {
			return err
		}
	}
	n.Kubeconfig = n.path("admin.kubeconfig")
	if n.Config, err = clientcmd.BuildConfigFromFlags("", n.Kubeconfig); err != nil {
		return err
	}
	n.Config.QPS, n.Config.Burst = 50, 100
	if n.Clientset, err = kubernetes.NewForConfig(n.Config); err != nil {
		return err
	}
	n.logf("certificates written")

	if err := setUpNetwork(n.path("cni")); err != nil {
		return err
	}
	n.logf("bridge %s %s, nat and filter rules", bridge, HostIP)

	pki := n.path("pki")
	if err := n.run("etcd", filepath.Join(o.ControlPlane, "etcd"), "--name", "node", "--data-dir", n.path("etcd"),
		"--listen-client-urls", fmt.Sprintf("http://127.0.0.1:%d", etcdPort),
		"--advertise-client-urls", fmt.Sprintf("http://127.0.0.1:%d", etcdPort),
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", etcdPort+10),
		"--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", etcdPort+10),
		"--initial-cluster", fmt.Sprintf("node=http://127.0.0.1:%d", etcdPort+10),
		"--unsafe-no-fsync", "--quota-backend-bytes", "1073741824", "--log-level", "warn"); err != nil {
		return err
	}
	if err := n.run("kube-apiserver", filepath.Join(o.ControlPlane, "kube-apiserver"),
		"--etcd-servers", fmt.Sprintf("http://127.0.0.1:%d", etcdPort),
		"--bind-address", HostIP, "--advertise-address", HostIP, "--secure-port", strconv.Itoa(apiPort),
		"--cert-dir", pki, "--tls-cert-file", filepath.Join(pki, "apiserver.crt"), "--tls-private-key-file", filepath.Join(pki, "apiserver.key"),
		"--client-ca-file", filepath.Join(pki, "ca.crt"),
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", filepath.Join(pki, "sa.pub"), "--service-account-signing-key-file", filepath.Join(pki, "sa.key"),
		"--service-cluster-ip-range", ServiceCIDR,
		"--authorization-mode", "Node,RBAC",
		"--enable-admission-plugins", "NodeRestriction",
		"--kubelet-client-certificate", filepath.Join(pki, "apiserver-kubelet-client.crt"),
		"--kubelet-client-key", filepath.Join(pki, "apiserver-kubelet-client.key"),
		"--kubelet-certificate-authority", filepath.Join(pki, "ca.crt"),
		"--kubelet-preferred-address-types", "InternalIP",
		"--allow-privileged=true", "--v=1"); err != nil {
		return err
	}
	if err := n.waitFor(ctx, "kube-apiserver /readyz", 2*time.Minute, func(ctx context.Context) (bool, error) {
		_, err := n.Clientset.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil, nil
	}); err != nil {
		return err
	}
	n.logf("etcd and kube-apiserver ready")

	if err := n.run("kube-controller-manager", filepath.Join(o.Binaries, "kube-controller-manager"),
		"--kubeconfig", n.path("controller-manager.kubeconfig"),
		"--authentication-kubeconfig", n.path("controller-manager.kubeconfig"),
		"--authorization-kubeconfig", n.path("controller-manager.kubeconfig"),
		"--bind-address", "127.0.0.1", "--secure-port", "10257",
		"--use-service-account-credentials=true", "--service-account-private-key-file", filepath.Join(pki, "sa.key"),
		"--root-ca-file", filepath.Join(pki, "ca.crt"),
		"--leader-elect=false", "--v=1"); err != nil {
		return err
	}
	if err := n.run("kube-scheduler", filepath.Join(o.Binaries, "kube-scheduler"),
		"--kubeconfig", n.path("scheduler.kubeconfig"),
		"--authentication-kubeconfig", n.path("scheduler.kubeconfig"),
		"--authorization-kubeconfig", n.path("scheduler.kubeconfig"),
		"--bind-address", "127.0.0.1", "--secure-port", "10259", "--leader-elect=false", "--v=1"); err != nil {
		return err
	}

	if err := os.WriteFile(n.path("containerd", "config.toml"), []byte(containerdConfig(n.dir)), 0o600); err != nil {
		return err
	}
	if err := n.run("containerd", "containerd", "--config", n.path("containerd", "config.toml"), "--log-level", "info"); err != nil {
		return err
	}
	if err := n.waitFor(ctx, "containerd", time.Minute, func(ctx context.Context) (bool, error) {
		return n.ctr(ctx, "version") == nil, nil
	}); err != nil {
		return err
	}
	n.logf("containerd ready")
	if err := <-pauseDone; err != nil {
		return fmt.Errorf("building the pause image: %w", err)
	}
	if err := n.ImportImage(ctx, pauseArchive); err != nil {
		return err
	}

	if err := os.WriteFile(n.path("kubelet", "config.yaml"), []byte(kubeletConfig(n.dir)), 0o600); err != nil {
		return err
	}
	if err := n.run("kubelet", filepath.Join(o.Binaries, "kubelet"), "--config", n.path("kubelet", "config.yaml"),
		"--kubeconfig", n.path("kubelet-client.kubeconfig"), "--hostname-override", NodeName, "--node-ip", HostIP,
		"--root-dir", n.path("kubelet", "root"), "--cert-dir", n.path("kubelet", "pki"),
		"--volume-plugin-dir", n.path("kubelet", "volume-plugins"), "--v=2"); err != nil {
		return err
	}
	// Ready, and schedulable: the node lifecycle controller lifts the not-ready taint the
	// kubelet registers with.
	if err := n.waitFor(ctx, "node "+NodeName+" Ready and untainted", 3*time.Minute, func(ctx context.Context) (bool, error) {
		node, err := n.Clientset.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, t := range node.Spec.Taints {
			if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
				return false, nil
			}
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	}); err != nil {
		return err
	}
	return nil
}

// run starts a component, its output going to its log file.
func (n *Node) run(name, binary string, args ...string) error {
	logFile, err := os.Create(filepath.Join(n.logDir, name+".log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// The components find no terraform configuration, proxy or kubeconfig of the machine's.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + n.dir}
	// They die with the test process, should it die without stopping them.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	started := make(chan error)
	n.spawn <- spawnRequest{cmd, started}
	if err := <-started; err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	n.procs = append(n.procs, p)
	if err := recordProcess(n.dir, name, cmd.Process.Pid); err != nil {
		return err
	}
	return nil
}

type spawnRequest struct {
	cmd     *exec.Cmd
	started chan<- error
}

// spawner starts the components from one OS thread that lives as long as the node:
// the kernel sends a child its parent-death signal when the thread that started it
// ends, and Go ends other threads at will.
func spawner(requests <-chan spawnRequest) {
	runtime.LockOSThread()
	for r := range requests {
		r.started <- r.cmd.Start()
	}
	// Returning locked ends the thread: every component is stopped by now.
}

// waitFor polls condition until it holds, failing early when a component exited.
func (n *Node) waitFor(ctx context.Context, what string, timeout time.Duration, condition wait.ConditionWithContextFunc) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for _, p := range n.procs {
			select {
			case <-p.done:
				return false, fmt.Errorf("%s exited: %s", p.name, p.cmd.ProcessState)
			default:
			}
		}
		return condition(ctx)
	})
	if err != nil {
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}

// ctr runs containerd's client against this node's containerd, in the namespace of
// the kubelet's containers.
func (n *Node) ctr(ctx context.Context, args ...string) error {
	_, err := n.ctrOutput(ctx, args...)
	return err
}

func (n *Node) ctrOutput(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "ctr", append([]string{"--address", containerdSocket(n.dir), "--namespace", "k8s.io"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// ImportImage imports an OCI image archive (see image.WriteArchive) into containerd, for
// pods to run with imagePullPolicy IfNotPresent or Never.
func (n *Node) ImportImage(ctx context.Context, archive string) error {
	started := time.Now()
	if err := n.ctr(ctx, "images", "import", archive); err != nil {
		return err
	}
	n.logf("imported %s in %s", filepath.Base(archive), time.Since(started).Round(time.Millisecond))
	return nil
}

// KillContainer kills every process of a container with SIGKILL, as the kernel's OOM
// killer or a crash would end it; id is the container's ID without the runtime prefix
// of a pod's containerStatuses[].containerID.
func (n *Node) KillContainer(ctx context.Context, id string) error {
	return n.ctr(ctx, "tasks", "kill", "--all", "--signal", "SIGKILL", strings.TrimPrefix(id, "containerd://"))
}

// ContainerPID returns the host PID of a running container's first process.
func (n *Node) ContainerPID(ctx context.Context, id string) (int, error) {
	out, err := n.ctrOutput(ctx, "tasks", "ls")
	if err != nil {
		return 0, err
	}
	id = strings.TrimPrefix(id, "containerd://")
	for _, line := range strings.Split(out, "\n") {
		fields := strings.Fields(line)
		if len(fields) >= 3 && fields[0] == id {
			return strconv.Atoi(fields[1])
		}
	}
	return 0, fmt.Errorf("container %s has no task", id)
}

// LogTails returns the end of each component's log, at most size bytes of each.
func (n *Node) LogTails(size int64) string {
	var b strings.Builder
	for _, p := range n.procs {
		fmt.Fprintf(&b, "---- the end of %s's log:\n%s\n", p.name, tail(filepath.Join(n.logDir, p.name+".log"), size))
	}
	return b.String()
}

// LogDir is where the components' logs are, until Stop.
func (n *Node) LogDir() string { return n.logDir }

func tail(path string, size int64) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if info, err := f.Stat(); err == nil && info.Size() > size {
		_, _ = f.Seek(-size, io.SeekEnd)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

// Stop deletes the pods, stops every component and undoes every change to the host:
// mounts, network namespaces, cgroups, iptables chains, the bridge and the route. It
// removes the state and log directories and releases the machine's node lock.
func (n *Node) Stop() error {
	n.stopKeepingLock()
	return n.lock.Unlock()
}

// stopKeepingLock stops the node but keeps the machine's node lock, so that another test
// package's node does not start before the caller looked at what is left.
func (n *Node) stopKeepingLock() {
	started := time.Now()
	stop := func(names ...string) {
		var wg sync.WaitGroup
		for _, p := range n.procs {
			for _, name := range names {
				if p.name == name {
					wg.Add(1)
					go func(p *process) {
						defer wg.Done()
						stopProcess(p, 10*time.Second)
					}(p)
				}
			}
		}
		wg.Wait()
	}
	// Nothing recreates or places the pods deleted next.
	stop("kube-controller-manager", "kube-scheduler")
	if n.Clientset != nil && n.alive("kube-apiserver") && n.alive("kubelet") {
		n.deletePods()
	}
	stop("kubelet")
	if n.alive("containerd") {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		n.killContainers(ctx)
		cancel()
	}
	stop("containerd")
	stop("kube-apiserver")
	stop("etcd")
	close(n.spawn)
	teardown(n.dir, n.logf)
	if n.KeepLogs {
		n.logf("the logs are kept in %s", n.logDir)
	} else {
		_ = os.RemoveAll(n.logDir)
	}
	n.logf("stopped in %s", time.Since(started).Round(time.Millisecond))
}

func (n *Node) alive(name string) bool {
	for _, p := range n.procs {
		if p.name == name {
			select {
			case <-p.done:
				return false
			default:
				return true
			}
		}
	}
	return false
}

// deletePods deletes every pod, so that the kubelet stops containers and tears down
// sandboxes and their network as it does in a cluster, and waits a while for it.
func (n *Node) deletePods() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	namespaces, err := n.Clientset.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, ns := range namespaces.Items {
		_ = n.Clientset.CoreV1().Pods(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptrTo(int64(1))}, metav1.ListOptions{})
	}
	_ = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pods, err := n.Clientset.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0, nil
	})
}

// killContainers kills what still runs in containerd, sandboxes included.
func (n *Node) killContainers(ctx context.Context) {
	out, err := n.ctrOutput(ctx, "tasks", "ls", "--quiet")
	if err != nil {
		return
	}
	ids := strings.Fields(out)
	for _, id := range ids {
		_ = n.ctr(ctx, "tasks", "kill", "--all", "--signal", "SIGKILL", id)
	}
	for _, id := range ids {
		_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 5*time.Second, true, func(ctx context.Context) (bool, error) {
			return n.ctr(ctx, "tasks", "delete", "--force", id) == nil, nil
		})
	}
}

func stopProcess(p *process, grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(terminate)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func ptrTo[T any](v T) *T { return &v }

// buildPause builds the sandbox program and packs it as PauseImage.
func buildPause(dir, archive string) error {
	binary := filepath.Join(dir, "pause")
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", binary, "./test/realnode/pause")
	build.Dir = moduleRoot()
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	_, err := image.WriteArchive(archive, PauseImage, image.Image{
		Config: image.Config{Entrypoint: []string{"/pause"}, User: "65535:65535"},
		Layers: []image.Layer{{{Path: "/pause", Mode: 0o755, Source: binary}}},
	})
	return err
}

func moduleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Required reports whether tests must fail rather than skip when the node is
// unavailable: TERRASEED_E2E=require, as CI sets it.
func Required() bool { return os.Getenv("TERRASEED_E2E") == "require" }

// Disabled reports whether the node's tests are turned off: TERRASEED_E2E=skip.
func Disabled() bool { return os.Getenv("TERRASEED_E2E") == "skip" }
