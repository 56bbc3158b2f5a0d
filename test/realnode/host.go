package realnode

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const terminate = syscall.SIGTERM

// Paths the kubelet and containerd use whatever they are told; teardown removes those
// that did not exist when the node started.
var hostDirs = []string{"/var/lib/kubelet", "/var/log/containers", "/var/log/pods", "/run/containerd", "/opt/containerd", "/usr/libexec/kubernetes", "/run/netns"}

func containerdSocket(dir string) string { return filepath.Join(dir, "containerd", "containerd.sock") }

// recordHostState notes the network namespaces and the host paths that exist before
// the node starts, so that teardown removes only what the node added.
func recordHostState(dir string) error {
	netns, _ := os.ReadDir("/run/netns")
	var names []string
	for _, e := range netns {
		names = append(names, e.Name())
	}
	if err := os.WriteFile(filepath.Join(dir, "netns.before"), []byte(strings.Join(names, "\n")), 0o600); err != nil {
		return err
	}
	var created []string
	for _, d := range hostDirs {
		if _, err := os.Lstat(d); errors.Is(err, os.ErrNotExist) {
			created = append(created, d)
		}
	}
	return os.WriteFile(filepath.Join(dir, "hostdirs.created"), []byte(strings.Join(created, "\n")), 0o600)
}

// recordProcess notes a component's PID and binary, for the teardown of a node whose
// test process died.
func recordProcess(dir, name string, pid int) error {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		exe = ""
	}
	return os.WriteFile(filepath.Join(dir, "pids", name), []byte(fmt.Sprintf("%d %s", pid, exe)), 0o600)
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// setUpNetwork creates the bridge with the host's address on it (the CNI bridge plugin
// adopts it), the blackhole route of the service network, the one translation that
// stands in for kube-proxy, forwarding rules that keep pod traffic on the bridge, and
// the CNI configuration.
func setUpNetwork(cniDir string) error {
	steps := [][]string{
		{"ip", "link", "add", bridge, "address", bridgeMAC, "type", "bridge"},
		{"ip", "addr", "add", HostIP + "/16", "dev", bridge},
		{"ip", "link", "set", bridge, "up"},
		{"ip", "route", "add", "blackhole", ServiceCIDR},
		{"iptables", "-w", "-t", "nat", "-N", natChain},
		{"iptables", "-w", "-t", "nat", "-A", natChain, "-d", ServiceIP + "/32", "-p", "tcp", "--dport", "443", "-j", "DNAT", "--to-destination", fmt.Sprintf("%s:%d", HostIP, apiPort)},
		{"iptables", "-w", "-t", "nat", "-I", "PREROUTING", "-j", natChain},
		{"iptables", "-w", "-t", "nat", "-I", "OUTPUT", "-j", natChain},
		{"iptables", "-w", "-N", forwardChain},
		{"iptables", "-w", "-A", forwardChain, "-i", bridge, "-o", bridge, "-j", "ACCEPT"},
		{"iptables", "-w", "-A", forwardChain, "-i", bridge, "-j", "DROP"},
		{"iptables", "-w", "-A", forwardChain, "-o", bridge, "-j", "DROP"},
		{"iptables", "-w", "-I", "FORWARD", "-j", forwardChain},
	}
	for _, s := range steps {
		if err := run(s[0], s[1:]...); err != nil {
			return err
		}
	}
	conf := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "terraseed-node",
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": %q,
        "ranges": [[{"subnet": %q, "gateway": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    }
  ]
}
`, bridge, filepath.Join(cniDir, "ipam"), PodCIDR, HostIP)
	return os.WriteFile(filepath.Join(cniDir, "net.d", "10-terraseed-node.conflist"), []byte(conf), 0o600)
}

// teardown undoes everything a node in dir did to the host, whether its processes were
// stopped or its test process died, and removes dir. Each step is best effort.
// It is long because it is one list of independent best-effort steps, in the reverse
// order of the set-up.
func teardown(dir string, logf func(string, ...any)) {
	// Components still running: a node whose test process died.
	pids, _ := filepath.Glob(filepath.Join(dir, "pids", "*"))
	for _, f := range pids {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pidText, exe, _ := strings.Cut(string(data), " ")
		pid, err := strconv.Atoi(pidText)
		if err != nil || exe == "" {
			continue
		}
		if current, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && strings.TrimSuffix(current, " (deleted)") == exe {
			logf("killing %s (%d), left running", filepath.Base(f), pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	// Containers, and the shims that outlived containerd.
	killCgroupProcesses()
	socket := containerdSocket(dir)
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(string(data), "\x00")
		if len(args) > 0 && strings.HasSuffix(args[0], "containerd-shim-runc-v2") && slices.Contains(args, socket) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	// Mounts under dir (root file systems, shm, volumes), deepest first.
	for range 3 {
		mounts := mountsUnder(dir)
		if len(mounts) == 0 {
			break
		}
		for _, m := range mounts {
			if err := syscall.Unmount(m, 0); err != nil {
				_ = syscall.Unmount(m, syscall.MNT_DETACH)
			}
		}
	}
	// Network namespaces the CRI plugin created.
	if before, err := os.ReadFile(filepath.Join(dir, "netns.before")); err == nil {
		existing := strings.Split(string(before), "\n")
		entries, _ := os.ReadDir("/run/netns")
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "cni-") && !slices.Contains(existing, e.Name()) {
				p := filepath.Join("/run/netns", e.Name())
				_ = syscall.Unmount(p, syscall.MNT_DETACH)
				_ = os.Remove(p)
			}
		}
	}
	removeCgroups()
	for _, rule := range [][]string{
		{"-t", "nat", "-D", "PREROUTING", "-j", natChain},
		{"-t", "nat", "-D", "OUTPUT", "-j", natChain},
		{"-t", "nat", "-F", natChain},
		{"-t", "nat", "-X", natChain},
		{"-D", "FORWARD", "-j", forwardChain},
		{"-F", forwardChain},
		{"-X", forwardChain},
	} {
		_ = run("iptables", append([]string{"-w"}, rule...)...)
	}
	_ = run("ip", "route", "del", "blackhole", ServiceCIDR)
	_ = run("ip", "link", "del", bridge)
	if created, err := os.ReadFile(filepath.Join(dir, "hostdirs.created")); err == nil {
		for _, d := range strings.Split(string(created), "\n") {
			switch d {
			case "":
			case "/run/netns":
				_ = os.Remove(d) // only when empty: other namespaces live there too
			default:
				_ = os.RemoveAll(d)
			}
		}
	}
	links, _ := filepath.Glob("/var/log/containers/*.log")
	for _, l := range links {
		if target, err := os.Readlink(l); err == nil && strings.HasPrefix(target, dir+"/") {
			_ = os.Remove(l)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		logf("removing %s: %v", dir, err)
	}
}

// mountsUnder lists the mount points under dir, deepest first.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		return nil
	}
	defer f.Close()
	var mounts []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) > 1 {
			// /proc/self/mounts escapes spaces and the like as octal.
			point, err := strconv.Unquote(`"` + strings.ReplaceAll(fields[1], `"`, `\"`) + `"`)
			if err != nil {
				point = fields[1]
			}
			if strings.HasPrefix(point, dir+"/") {
				mounts = append(mounts, point)
			}
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(mounts)))
	return mounts
}

// kubepodsCgroups are the kubelet's cgroup trees (cgroupfs driver), v1 and v2.
func kubepodsCgroups() []string {
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods")
	if _, err := os.Stat("/sys/fs/cgroup/kubepods"); err == nil {
		dirs = append(dirs, "/sys/fs/cgroup/kubepods")
	}
	return dirs
}

// killCgroupProcesses kills every process of the kubelet's cgroups: the containers of a
// node whose runtime died.
func killCgroupProcesses() {
	for _, root := range kubepodsCgroups() {
		_ = filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
			if err != nil || e.IsDir() || e.Name() != "cgroup.procs" {
				return nil
			}
			data, _ := os.ReadFile(p)
			for _, field := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(field); err == nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			return nil
		})
	}
}

// removeCgroups removes the kubelet's cgroup trees, deepest first, once their processes
// are gone.
func removeCgroups() {
	for _, root := range kubepodsCgroups() {
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
		for _, d := range dirs {
			for i := 0; i < 50; i++ {
				if err := syscall.Rmdir(d); err == nil || errors.Is(err, syscall.ENOENT) {
					break
				}
				time.Sleep(100 * time.Millisecond) // exiting processes leave their cgroup in a moment
			}
		}
	}
}

func containerdConfig(dir string) string {
	cd := filepath.Join(dir, "containerd")
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
[ttrpc]
  address = "%[3]s.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = %[4]q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[5]q
  enable_selinux = false
  disable_apparmor = true
  # Some machines (Firecracker VMs among them) withhold CAP_SYS_RESOURCE even from root,
  # so lowering oom_score_adj fails and runc dies in nsexec ("can't get final child's PID
  # from pipe: EOF") for the pause container, which the kubelet asks for -998. This
  # clamps every container's oom_score_adj to containerd's own.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %[6]q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[7]q
    conf_dir = %[8]q
    max_conf_num = 1
`, filepath.Join(cd, "root"), filepath.Join(cd, "state"), containerdSocket(dir), filepath.Join(cd, "opt"),
		PauseImage, filepath.Join(cd, "runc"), cniBinDir, filepath.Join(dir, "cni", "net.d"))
}

func kubeletConfig(dir string) string {
	pki := filepath.Join(dir, "pki")
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://%[1]s
imageServiceEndpoint: unix://%[1]s
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
address: %[2]s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: %[3]s/kubelet-serving.crt
tlsPrivateKeyFile: %[3]s/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[3]s/ca.crt}
authorization:
  mode: Webhook
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
evictionHard:
  memory.available: "100Mi"
  nodefs.available: "1%%"
  nodefs.inodesFree: "1%%"
  imagefs.available: "1%%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
syncFrequency: 10s
fileCheckFrequency: 5s
nodeStatusUpdateFrequency: 5s
staticPodPath: ""
podLogsDir: %[4]s
makeIPTablesUtilChains: false
`, containerdSocket(dir), HostIP, pki, filepath.Join(dir, "kubelet", "pod-logs"))
}
