// Package realnode brings up a one-node Kubernetes cluster on this machine for end-to-end
// tests, as envtest brings up a control plane: etcd and kube-apiserver, kube-scheduler and
// kube-controller-manager, containerd with runc and the CNI bridge plugin, and a kubelet,
// each a child process with its log in a directory of its own. Pods run for real:
// images are packed here (no registry is reached) and imported into containerd.
//
// The node needs root, a Linux kernel with overlayfs, bridge and netfilter, Debian's
// containerd, runc, containernetworking-plugins and iptables packages (installed by
// .ci/run), and the kubelet, scheduler and controller manager `make tools` builds. Its
// addresses, bridge and ports are fixed, so one node runs on a machine at a time: Start
// waits for a machine-wide lock, and it first cleans up what a node whose test process
// died left behind. Nothing is routed off the machine: the pods reach the host's bridge
// address and each other, and the service network is a blackhole except for the API
// server's service address, translated to the API server.
package realnode
