package main

// `up --real-nodes`: the node network, kube-proxy, CoreDNS and one `realnode` agent per node of
// the pools marked real; then the simulated GPUs of each real node (the GPU Operator's labels,
// the extended resources in its capacity), kept there while the cluster runs.

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// RealOptions are the flags of `up` for real nodes.
type RealOptions struct {
	Enabled    bool
	Images     string // image index JSON
	CoreDNS    string // CoreDNS binary ("" = no cluster DNS)
	Containerd string
}

// RealInfo is written into READY for the real nodes.
type RealInfo struct {
	Nodes    []RealNodeInfo `json:"nodes"`
	HostIP   string         `json:"host_ip"`
	DNS      string         `json:"dns"`
	PodCIDR  string         `json:"pod_cidr"`
	HostLink string         `json:"host_link"`
	NetnsPID int            `json:"netns_pid"`
	Slot     int            `json:"slot"`
}

// RealNodeInfo is one real node in READY.
type RealNodeInfo struct {
	Name       string `json:"name"`
	IP         string `json:"ip"`
	PodSubnet  string `json:"pod_subnet"`
	Dir        string `json:"dir"`
	KubeletPID string `json:"kubelet_pid_file"`
}

func (s *supervisor) spawnAttr(name, path string, attr *syscall.SysProcAttr, stopTimeout time.Duration,
	args ...string) (*child, error) {
	logPath := filepath.Join(s.logDir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(f, "=== %s %s %s\n", time.Now().Format(time.RFC3339), path, strings.Join(args, " "))
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Dir = s.dataDir
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, log: logPath, done: make(chan struct{}), stopTimeout: stopTimeout}
	go func() {
		c.err = cmd.Wait()
		f.Close()
		close(c.done)
	}()
	s.children = append(s.children, c)
	log.Printf("started %s (pid %d), log %s", name, cmd.Process.Pid, logPath)
	return c, nil
}

func (s *supervisor) startRealNodes(ctx context.Context, topo *Topology, pk pkiPaths, apiserverPort int,
	opts RealOptions) (*RealInfo, error) {
	nodes := topo.RealNodes()
	if len(nodes) == 0 {
		return nil, fmt.Errorf("--real-nodes: the topology has no pool marked real")
	}
	if opts.Images == "" {
		return nil, fmt.Errorf("--real-nodes needs --images (the index written by " +
			"`python -m deploy.devtools.images build`)")
	}
	if _, err := loadImageIndex(opts.Images); err != nil {
		return nil, err
	}
	for _, bin := range []string{"nsenter", "ip", "ctr", "iptables", opts.Containerd} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("--real-nodes needs %s (Debian packages containerd, runc, "+
				"containernetworking-plugins, iptables, iproute2, util-linux): %v", bin, err)
		}
	}
	if _, err := os.Stat("/usr/lib/cni/bridge"); err != nil {
		return nil, fmt.Errorf("--real-nodes needs the CNI plugins in /usr/lib/cni (Debian package " +
			"containernetworking-plugins)")
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	holder, err := s.spawnAttr("node-network", self, netnsAttr(), s.stopTimeout, "netns-holder")
	if err != nil {
		return nil, err
	}
	pid := holder.cmd.Process.Pid
	hostIf := hostVethName(s.dataDir)
	var rn realNet
	for attempt := 0; ; attempt++ {
		// Two clusters starting at once may pick the same slot; the second one's address
		// add fails and it tries the next free slot.
		if rn, err = freeRealSlot(); err != nil {
			return nil, err
		}
		err = setupRealNetwork(rn, pid, hostIf, len(nodes))
		if err == nil {
			break
		}
		_ = runCmd("ip", "link", "del", hostIf)
		if attempt >= 3 {
			return nil, fmt.Errorf("node network: %w", err)
		}
		time.Sleep(time.Duration(200*(attempt+1)) * time.Millisecond)
	}
	l, err := listenInNetns(pid, fmt.Sprintf("%s:%d", rn.NSIP(), realAPIPort))
	if err != nil {
		return nil, fmt.Errorf("node network: apiserver forwarder: %w", err)
	}
	go forwardTCP(ctx, l, fmt.Sprintf("127.0.0.1:%d", apiserverPort))
	log.Printf("node network ready in %.1fs: slot %d, host %s on %s, pods %s, apiserver for the nodes at %s:%d",
		time.Since(t0).Seconds(), rn.slot, rn.HostIP(), hostIf, rn.PodSupernet(), rn.NSIP(), realAPIPort)

	nodeServer := fmt.Sprintf("https://%s:%d", rn.NSIP(), realAPIPort)
	realDir := filepath.Join(s.dataDir, "realnodes")
	if err := os.MkdirAll(realDir, 0o755); err != nil {
		return nil, err
	}
	info := &RealInfo{HostIP: rn.HostIP(), PodCIDR: rn.PodSupernet(), HostLink: hostIf, NetnsPID: pid, Slot: rn.slot}
	netns := fmt.Sprintf("--net=/proc/%d/ns/net", pid)

	// kube-proxy: one for the shared namespace (every real node's pods and Services are there).
	crt, key, err := issueClientCert(pk, "system:kube-proxy", nil)
	if err != nil {
		return nil, err
	}
	proxyKC := filepath.Join(realDir, "kube-proxy.kubeconfig")
	if err := writeClientKubeconfig(proxyKC, pk, nodeServer, "localhost", "kube-proxy", crt, key); err != nil {
		return nil, err
	}
	proxyCfg := filepath.Join(realDir, "kube-proxy.yaml")
	if err := os.WriteFile(proxyCfg, []byte(kubeProxyConfig(rn, proxyKC, nodes[0].Name)), 0o644); err != nil {
		return nil, err
	}
	if opts.CoreDNS != "" {
		corefile := filepath.Join(realDir, "Corefile")
		if err := os.WriteFile(corefile, []byte(coreDNSConfig(rn, kubeconfigAdmin(pk, nodeServer,
			realDir))), 0o644); err != nil {
			return nil, err
		}
		if _, err := s.spawnAttr("coredns", "nsenter", plainAttr(), s.stopTimeout,
			netns, "--", opts.CoreDNS, "-conf", corefile); err != nil {
			return nil, err
		}
	}
	for i, n := range nodes {
		dir := filepath.Join(realDir, n.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		crt, key, err := issueClientCert(pk, "system:node:"+n.Name, []string{"system:nodes"})
		if err != nil {
			return nil, err
		}
		kc := filepath.Join(dir, "kubelet.kubeconfig")
		if err := writeClientKubeconfig(kc, pk, nodeServer, "localhost", "system:node:"+n.Name, crt, key); err != nil {
			return nil, err
		}
		attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Cloneflags: syscall.CLONE_NEWNS}
		if _, err := s.spawnAttr("realnode-"+n.Name, "nsenter", attr, 40*time.Second,
			netns, "--", self, "realnode", "--name="+n.Name, "--dir="+dir, "--index="+strconv.Itoa(i),
			"--slot="+strconv.Itoa(rn.slot),
			"--kubeconfig="+kc, "--client-ca="+pk.CACert, "--images="+opts.Images,
			"--containerd="+opts.Containerd, "--v="+strconv.Itoa(s.logLevel),
			"--memory-mib="+strconv.FormatInt(n.Capacity.Memory().Value()/(1<<20), 10)); err != nil {
			return nil, err
		}
		info.Nodes = append(info.Nodes, RealNodeInfo{Name: n.Name, IP: rn.NodeIP(i), PodSubnet: rn.PodSubnet(i),
			Dir: dir, KubeletPID: filepath.Join(dir, "kubelet.pid")})
	}
	if opts.CoreDNS != "" {
		info.DNS = rn.DNSIP()
	}
	if _, err := s.spawnAttr("kube-proxy", "nsenter", plainAttr(), s.stopTimeout,
		netns, "--", self, "kube-proxy", "--config="+proxyCfg, "--v="+strconv.Itoa(s.logLevel)); err != nil {
		return nil, err
	}
	return info, nil
}

func plainAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// kubeconfigAdmin writes the admin kubeconfig as seen from the node network (CoreDNS reads
// Services, EndpointSlices, Namespaces and Pods cluster-wide).
func kubeconfigAdmin(pk pkiPaths, server, dir string) string {
	path := filepath.Join(dir, "coredns.kubeconfig")
	crt, _ := os.ReadFile(pk.AdminCert)
	key, _ := os.ReadFile(pk.AdminKey)
	if err := writeClientKubeconfig(path, pk, server, "localhost", "coredns", crt, key); err != nil {
		log.Printf("coredns kubeconfig: %v", err)
	}
	return path
}

func coreDNSConfig(rn realNet, kubeconfig string) string {
	return fmt.Sprintf(`.:53 {
    bind %s
    errors
    health %s:8080
    ready %s:8181
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig %s kubesim
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }
    cache 5
}
`, rn.DNSIP(), rn.DNSIP(), rn.DNSIP(), kubeconfig)
}

func kubeProxyConfig(rn realNet, kubeconfig, node string) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %q
hostnameOverride: %s
bindAddress: %s
healthzBindAddress: %s:10256
metricsBindAddress: %s:10249
mode: iptables
clusterCIDR: %s
iptables:
  masqueradeAll: true
  syncPeriod: 10s
  minSyncPeriod: 0s
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, kubeconfig, node, rn.NSIP(), rn.NSIP(), rn.NSIP(), rn.PodSupernet())
}

// keepRealNodesDressed gives every real node, once registered, the labels, annotations, taints
// and GPU capacity its pool describes, and puts them back if they go (a kubelet that
// re-registers resets extended resources it does not manage).
func keepRealNodesDressed(ctx context.Context, kubeconfig string, nodes []NodeSpec) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		log.Printf("real nodes: %v", err)
		return
	}
	cfg.UserAgent = "kubesim-real-nodes"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		log.Printf("real nodes: %v", err)
		return
	}
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	dressed := map[string]bool{}
	for {
		for _, n := range nodes {
			ok, err := dressNode(ctx, client, n)
			if err != nil && ctx.Err() == nil {
				log.Printf("real node %s: %v", n.Name, err)
			}
			if ok && !dressed[n.Name] {
				log.Printf("real node %s registered: labels and GPU capacity set", n.Name)
			}
			dressed[n.Name] = ok
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		// After every node is dressed, look less often.
		all := true
		for _, n := range nodes {
			all = all && dressed[n.Name]
		}
		if all {
			tick.Reset(10 * time.Second)
		}
	}
}

// dressNode reports whether the node exists and carries its spec (patching what is missing).
func dressNode(ctx context.Context, client kubernetes.Interface, n NodeSpec) (bool, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	node, err := client.CoreV1().Nodes().Get(cctx, n.Name, metav1.GetOptions{})
	if err != nil {
		return false, nil //nolint:nilerr // not registered yet
	}
	labels := map[string]string{}
	for k, v := range n.Labels {
		if node.Labels[k] != v {
			labels[k] = v
		}
	}
	annotations := map[string]string{}
	for k, v := range n.Annotations {
		if k == AnnoNode {
			v = "real"
		}
		if node.Annotations[k] != v {
			annotations[k] = v
		}
	}
	var taints []corev1.Taint
	have := map[string]bool{}
	for _, t := range node.Spec.Taints {
		have[t.Key+"="+string(t.Effect)] = true
	}
	missingTaint := false
	for _, t := range n.Taints {
		if !have[t.Key+"="+string(t.Effect)] {
			missingTaint = true
		}
	}
	if missingTaint {
		taints = append(append(taints, node.Spec.Taints...), n.Taints...)
	}
	if len(labels) > 0 || len(annotations) > 0 || missingTaint {
		meta := map[string]interface{}{}
		if len(labels) > 0 {
			meta["labels"] = labels
		}
		if len(annotations) > 0 {
			meta["annotations"] = annotations
		}
		patch := map[string]interface{}{"metadata": meta}
		if missingTaint {
			patch["spec"] = map[string]interface{}{"taints": taints}
		}
		b, _ := json.Marshal(patch)
		if _, err := client.CoreV1().Nodes().Patch(cctx, n.Name, types.MergePatchType, b, metav1.PatchOptions{}); err != nil {
			return false, fmt.Errorf("patch labels: %w", err)
		}
	}
	capacity := map[string]string{}
	for name, q := range n.Capacity {
		if !strings.Contains(string(name), "/") { // cpu, memory, pods: the kubelet's own
			continue
		}
		if got, ok := node.Status.Capacity[name]; !ok || got.Cmp(q) != 0 {
			capacity[string(name)] = q.String()
		}
		if got, ok := node.Status.Allocatable[name]; !ok || got.Cmp(q) != 0 {
			capacity[string(name)] = q.String()
		}
	}
	if len(capacity) > 0 {
		patch := map[string]interface{}{"status": map[string]interface{}{"capacity": capacity, "allocatable": capacity}}
		b, _ := json.Marshal(patch)
		if _, err := client.CoreV1().Nodes().PatchStatus(cctx, n.Name, b); err != nil {
			return false, fmt.Errorf("patch GPU capacity: %w", err)
		}
	}
	return true, nil
}

// waitRealNodesDressed waits until every real node carries its labels and GPU capacity.
func (s *supervisor) waitRealNodesDressed(ctx context.Context, kubeconfig string, nodes []NodeSpec,
	deadline time.Time) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for {
		if err := s.check(); err != nil {
			return err
		}
		pending := ""
		for _, n := range nodes {
			ok, err := dressNode(ctx, client, n)
			if err != nil || !ok {
				pending = fmt.Sprintf("real node %s not dressed yet (%v)", n.Name, err)
				break
			}
			// dressed means patched; read it back once more to see the kubelet kept it
			node, err := client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				pending = err.Error()
				break
			}
			for name := range n.Capacity {
				if strings.Contains(string(name), "/") {
					if _, ok := node.Status.Allocatable[name]; !ok {
						pending = fmt.Sprintf("real node %s has no %s yet", n.Name, name)
					}
				}
			}
		}
		if pending == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("real nodes not ready before the deadline: %s", pending)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// hostPathsOfRealNodes are the host paths a real node mounts over inside its namespace; the
// ones that did not exist before are removed again when the cluster stops.
var hostPathsOfRealNodes = []string{"/var/lib/kubelet", "/var/log/pods", "/var/log/containers",
	"/var/lib/cni", "/run/netns", "/etc/cni/net.d", "/opt/cni/bin", "/opt/cni"}

func missingHostPaths() []string {
	var out []string
	for _, p := range hostPathsOfRealNodes {
		if _, err := os.Stat(p); os.IsNotExist(err) {
			out = append(out, p)
		}
	}
	return out
}

// cleanUpRealNodes runs after every child stopped: the mount points made on the host go (if
// empty), and so do the nodes' container images and layers (gigabytes; the logs stay).
func cleanUpRealNodes(dataDir string, created []string) {
	for i := len(created) - 1; i >= 0; i-- {
		_ = syscall.Rmdir(created[i])
	}
	dirs, _ := filepath.Glob(filepath.Join(dataDir, "realnodes", "*", "containerd"))
	for _, d := range dirs {
		if err := os.RemoveAll(d); err != nil {
			log.Printf("real nodes: remove %s: %v", d, err)
		}
	}
}
