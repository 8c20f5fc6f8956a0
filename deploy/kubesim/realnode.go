package main

// A real node: `kubesim realnode` runs, in a mount namespace of its own and the real nodes'
// network namespace (see realnet.go), Debian's containerd (with runc and the CNI bridge) and
// the upstream kubelet linked into this binary (`kubesim kubelet`). The recipe and the traps
// of these machines it avoids are in shared/REALNODE.md: cgroup v1 hybrid (runc, cgroupfs,
// failCgroupV1: false), no CAP_SYS_RESOURCE (restrict_oom_score_adj), the kubelet's writes to
// host sysctls (bind-mounted over from files of the node) and to fixed paths such as
// /var/lib/kubelet/device-plugins and /var/log/pods (mounted over from the node's directory).
//
// The node's directory (DATA_DIR/realnodes/<name>/) holds containerd's root and state, the
// kubelet's root, the pod logs, the CNI configuration and the IPAM state. On SIGTERM the kubelet
// stops, every container is killed, containerd and its shims stop and the node's cgroups are
// removed; the mount namespace dies with its last process.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func signalNotify(ch chan os.Signal) {
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
}

// ImageIndex is the file written by `python -m deploy.devtools.images build`.
type ImageIndex struct {
	Images []struct {
		Name       string   `json:"name"`
		Archive    string   `json:"archive"`
		References []string `json:"references"`
	} `json:"images"`
	Pause struct {
		Archive    string   `json:"archive"`
		Reference  string   `json:"reference"`
		References []string `json:"references"`
	} `json:"pause"`
}

func loadImageIndex(path string) (*ImageIndex, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("image index: %w", err)
	}
	var idx ImageIndex
	if err := json.Unmarshal(b, &idx); err != nil {
		return nil, fmt.Errorf("image index %s: %w", path, err)
	}
	if idx.Pause.Archive == "" || idx.Pause.Reference == "" {
		return nil, fmt.Errorf("image index %s: no pause image", path)
	}
	return &idx, nil
}

// Kernel tunables the kubelet sets at start (setupKernelTunables); on a machine shared with
// other work they must not change, so the node sees files of its own there.
var kubeletSysctls = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

type realNodeAgent struct {
	name, dir, ip, podSubnet, podGateway, bridge string
	kubeconfig, caFile, images, containerdBin    string
	index                                        int
	net                                          realNet
	cgroupRoot                                   string
	verbosity                                    int
	memoryMiB                                    int64
}

func (a *realNodeAgent) sock() string { return filepath.Join(a.dir, "containerd", "containerd.sock") }

func runRealNode(args []string) int {
	fs := flag.NewFlagSet("realnode", flag.ContinueOnError)
	a := &realNodeAgent{}
	fs.StringVar(&a.name, "name", "", "node name")
	fs.StringVar(&a.dir, "dir", "", "the node's directory")
	fs.IntVar(&a.index, "index", 0, "the node's index among the real nodes (its addresses)")
	fs.IntVar(&a.net.slot, "slot", 0, "the cluster's node-network slot (its addresses)")
	fs.StringVar(&a.kubeconfig, "kubeconfig", "", "the kubelet's kubeconfig")
	fs.StringVar(&a.caFile, "client-ca", "", "CA of the clients the kubelet accepts (the apiserver)")
	fs.StringVar(&a.images, "images", "", "image index JSON (deploy/devtools/images.py)")
	fs.StringVar(&a.containerdBin, "containerd", "containerd", "containerd binary")
	fs.IntVar(&a.verbosity, "v", 1, "kubelet verbosity")
	fs.Int64Var(&a.memoryMiB, "memory-mib", 0, "memory the node advertises in MiB (0: the machine's)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if a.name == "" || a.dir == "" || a.kubeconfig == "" || a.images == "" {
		fmt.Fprintln(os.Stderr, "realnode: --name, --dir, --kubeconfig and --images are required")
		return 2
	}
	a.ip = a.net.NodeIP(a.index)
	a.podSubnet = a.net.PodSubnet(a.index)
	a.podGateway = a.net.PodGateway(a.index)
	a.bridge = fmt.Sprintf("ksbr%d", a.index)
	// The cluster's slot in the name: clusters running at once on one machine have nodes of the
	// same names, and a cluster that stops removes its nodes' cgroups (an empty one of another
	// cluster's node would go with them, and that node's kubelet then refuses to start).
	a.cgroupRoot = fmt.Sprintf("/kubesim-%d-%s", a.net.slot, a.name)
	log.SetPrefix("realnode " + a.name + ": ")
	sig := make(chan os.Signal, 2)
	signalNotify(sig)
	code := a.run(sig)
	log.Printf("stopped (exit %d)", code)
	return code
}

func (a *realNodeAgent) run(sig chan os.Signal) int {
	start := time.Now()
	a.killStaleShims()
	if err := a.setupMounts(); err != nil {
		log.Printf("FAILED: mounts: %v", err)
		return 1
	}
	if err := a.setupCgroups(); err != nil {
		log.Printf("FAILED: cgroups: %v", err)
		return 1
	}
	defer a.removeCgroups()
	idx, err := loadImageIndex(a.images)
	if err != nil {
		log.Printf("FAILED: %v", err)
		return 1
	}
	if err := a.writeConfigs(idx); err != nil {
		log.Printf("FAILED: config: %v", err)
		return 1
	}
	ctrd, err := a.startChild("containerd", a.containerdBin, "--config", filepath.Join(a.dir, "containerd.toml"))
	if err != nil {
		log.Printf("FAILED: %v", err)
		return 1
	}
	defer a.stopContainerd(ctrd)
	if err := a.waitContainerd(ctrd, sig); err != nil {
		log.Printf("FAILED: %v", err)
		return 1
	}
	log.Printf("containerd ready after %.1fs", time.Since(start).Seconds())
	if err := a.importImages(idx, sig); err != nil {
		log.Printf("FAILED: images: %v", err)
		return 1
	}
	log.Printf("images imported after %.1fs", time.Since(start).Seconds())
	self, _ := os.Executable()
	kubelet, err := a.startChild("kubelet", self, "kubelet",
		"--config="+filepath.Join(a.dir, "kubelet.yaml"),
		"--kubeconfig="+a.kubeconfig,
		"--hostname-override="+a.name,
		"--node-ip="+a.ip,
		"--root-dir="+filepath.Join(a.dir, "kubelet"),
		"--cert-dir="+filepath.Join(a.dir, "kubelet", "pki"),
		"--v="+strconv.Itoa(a.verbosity))
	if err != nil {
		log.Printf("FAILED: %v", err)
		return 1
	}
	_ = os.WriteFile(filepath.Join(a.dir, "kubelet.pid"), []byte(strconv.Itoa(kubelet.Process.Pid)), 0o644)
	kubeletDone := make(chan error, 1)
	go func() { kubeletDone <- kubelet.Wait() }()
	ctrdDone := make(chan error, 1)
	go func() { ctrdDone <- ctrd.Wait() }()
	log.Printf("kubelet started (pid %d) after %.1fs", kubelet.Process.Pid, time.Since(start).Seconds())
	kubeletAlive := true
	for {
		select {
		case s := <-sig:
			log.Printf("received %v, stopping", s)
			if kubeletAlive {
				stopProcess(kubelet, kubeletDone, 10*time.Second)
			}
			a.killAllContainers()
			return 0
		case err := <-kubeletDone:
			// A dead kubelet is a dead node to the cluster; its containers keep running, as on
			// a node whose kubelet crashed. The agent stays so that `up` can stop it cleanly.
			kubeletAlive = false
			log.Printf("kubelet exited (%v); the node stays down", err)
		case err := <-ctrdDone:
			log.Printf("containerd exited (%v)", err)
			ctrdDone = nil
		}
	}
}

func stopProcess(cmd *exec.Cmd, done <-chan error, timeout time.Duration) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
	}
}

func (a *realNodeAgent) startChild(name, path string, args ...string) (*exec.Cmd, error) {
	f, err := os.OpenFile(filepath.Join(a.dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(f, "=== %s %s %s\n", time.Now().Format(time.RFC3339), path, strings.Join(args, " "))
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Dir = a.dir
	cmd.Env = append(os.Environ(), "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return cmd, nil
}

// setupMounts makes this mount namespace private and lays the node's own directories and
// sysctl files over the paths the kubelet and containerd write whatever they are told.
func (a *realNodeAgent) setupMounts() error {
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private: %w", err)
	}
	binds := map[string]string{
		"/var/lib/kubelet":    filepath.Join(a.dir, "var-lib-kubelet"),
		"/var/log/pods":       filepath.Join(a.dir, "logs", "pods"),
		"/var/log/containers": filepath.Join(a.dir, "logs", "containers"),
		"/var/lib/cni":        filepath.Join(a.dir, "var-lib-cni"),
		"/run/netns":          filepath.Join(a.dir, "netns"),
		"/etc/cni/net.d":      filepath.Join(a.dir, "cni", "net.d"),
		"/opt/cni/bin":        "/usr/lib/cni",
	}
	for target, source := range binds {
		if err := os.MkdirAll(source, 0o755); err != nil {
			return err
		}
		if err := os.MkdirAll(target, 0o755); err != nil {
			return err
		}
		if err := syscall.Mount(source, target, "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s over %s: %w", source, target, err)
		}
	}
	if err := a.advertiseMachine(); err != nil {
		return err
	}
	sysDir := filepath.Join(a.dir, "sysctl")
	if err := os.MkdirAll(sysDir, 0o755); err != nil {
		return err
	}
	for _, key := range kubeletSysctls {
		target := "/proc/sys/" + key
		cur, err := os.ReadFile(target)
		if err != nil {
			continue // not on this kernel
		}
		file := filepath.Join(sysDir, strings.ReplaceAll(key, "/", "."))
		if err := os.WriteFile(file, cur, 0o644); err != nil {
			return err
		}
		if err := syscall.Mount(file, target, "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind over %s: %w", target, err)
		}
	}
	return nil
}

// advertiseMachine makes the kubelet see the memory its pool describes (a GPU server has more
// than the machine the nodes share): cAdvisor reads it from /proc/meminfo, so the node's mount
// namespace gets a file of its own there; the kubelet only turns it into capacity and the pods'
// cgroup limit. CPUs cannot be advertised the same way: the kubelet writes the CPUs it counts
// into the pods' cpuset cgroup, which the kernel holds to the machine's own, so a real node
// has the machine's CPUs (WORKLOAD_CPU_MILLI sizes requests for them).
func (a *realNodeAgent) advertiseMachine() error {
	if a.memoryMiB > 0 {
		real, err := os.ReadFile("/proc/meminfo")
		if err != nil {
			return err
		}
		var out []string
		for _, line := range strings.Split(strings.TrimRight(string(real), "\n"), "\n") {
			if strings.HasPrefix(line, "MemTotal:") {
				line = fmt.Sprintf("MemTotal:       %d kB", a.memoryMiB*1024)
			}
			out = append(out, line)
		}
		file := filepath.Join(a.dir, "machine", "meminfo")
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(file, []byte(strings.Join(out, "\n")+"\n"), 0o644); err != nil {
			return err
		}
		if err := syscall.Mount(file, "/proc/meminfo", "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind over /proc/meminfo: %w", err)
		}
	}
	return nil
}

// cgroupControllers lists the cgroup v1 hierarchies mounted under /sys/fs/cgroup.
func cgroupControllers() []string {
	entries, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		p := filepath.Join("/sys/fs/cgroup", e.Name())
		if fi, err := os.Lstat(p); err != nil || fi.Mode()&os.ModeSymlink != 0 || !fi.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(p, "cgroup.procs")); err != nil {
			continue
		}
		out = append(out, p)
	}
	return out
}

// setupCgroups creates the node's cgroup root in every hierarchy (the kubelet's cgroupRoot must
// exist); two nodes on one machine keep their pods apart this way.
func (a *realNodeAgent) setupCgroups() error {
	a.removeCgroups()
	for _, c := range cgroupControllers() {
		dir := filepath.Join(c, a.cgroupRoot)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if strings.HasSuffix(c, "cpuset") || strings.Contains(filepath.Base(c), "cpuset") {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				if v, err := os.ReadFile(filepath.Join(c, f)); err == nil {
					_ = os.WriteFile(filepath.Join(dir, f), v, 0o644)
				}
			}
		}
	}
	return nil
}

// removeCgroups removes the node's cgroups, deepest first (only empty cgroups can go).
func (a *realNodeAgent) removeCgroups() {
	for _, c := range cgroupControllers() {
		root := filepath.Join(c, a.cgroupRoot)
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			_ = syscall.Rmdir(dirs[i])
		}
	}
}

func (a *realNodeAgent) writeConfigs(idx *ImageIndex) error {
	for _, d := range []string{"containerd/root", "containerd/state", "kubelet/pki", "cni/ipam"} {
		if err := os.MkdirAll(filepath.Join(a.dir, d), 0o755); err != nil {
			return err
		}
	}
	ctrd := fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = %q

[plugins."io.containerd.internal.v1.opt"]
  path = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  disable_apparmor = true
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "/usr/sbin/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %q
    max_conf_num = 1
`, filepath.Join(a.dir, "containerd", "root"), filepath.Join(a.dir, "containerd", "state"), a.sock(),
		filepath.Join(a.dir, "containerd", "opt"), idx.Pause.Reference, filepath.Join(a.dir, "cni", "net.d"))
	if err := os.WriteFile(filepath.Join(a.dir, "containerd.toml"), []byte(ctrd), 0o644); err != nil {
		return err
	}
	cni := map[string]interface{}{
		"cniVersion": "1.0.0",
		"name":       "kubesim",
		"plugins": []interface{}{
			map[string]interface{}{
				"type": "bridge", "bridge": a.bridge, "isGateway": true, "ipMasq": false, "hairpinMode": true,
				"ipam": map[string]interface{}{
					"type":    "host-local",
					"ranges":  [][]map[string]string{{{"subnet": a.podSubnet, "gateway": a.podGateway}}},
					"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
					"dataDir": filepath.Join(a.dir, "cni", "ipam"),
				},
			},
			map[string]interface{}{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	b, _ := json.MarshalIndent(cni, "", "  ")
	if err := os.WriteFile(filepath.Join(a.dir, "cni", "net.d", "10-kubesim.conflist"), b, 0o644); err != nil {
		return err
	}
	kubelet := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: 10250
readOnlyPort: 0
healthzBindAddress: %s
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %q}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
cgroupRoot: %s
cgroupsPerQOS: true
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://%s
clusterDNS: [%s]
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "50Mi", nodefs.available: "1%%", nodefs.inodesFree: "1%%", imagefs.available: "1%%"}
protectKernelDefaults: false
registerNode: true
nodeStatusUpdateFrequency: 10s
nodeStatusReportFrequency: 1m
syncFrequency: 10s
fileCheckFrequency: 20s
shutdownGracePeriod: 0s
maxPods: 110
`, a.ip, a.ip, a.caFile, a.cgroupRoot, a.sock(), a.net.DNSIP())
	return os.WriteFile(filepath.Join(a.dir, "kubelet.yaml"), []byte(kubelet), 0o644)
}

func (a *realNodeAgent) ctr(args ...string) ([]byte, error) {
	cmd := exec.Command("ctr", append([]string{"--address", a.sock(), "--namespace", "k8s.io"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("ctr %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return out, nil
}

func (a *realNodeAgent) waitContainerd(cmd *exec.Cmd, sig chan os.Signal) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := a.ctr("version"); err == nil {
			return nil
		}
		select {
		case s := <-sig:
			sig <- s
			return errors.New("interrupted")
		default:
		}
		if cmd.ProcessState != nil || time.Now().After(deadline) {
			return fmt.Errorf("containerd did not answer on %s within 60s; see %s", a.sock(),
				filepath.Join(a.dir, "containerd.log"))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// importImages imports every archive of the index (once per node: each node has its own
// content store, as on a cluster) and tags it with its references.
func (a *realNodeAgent) importImages(idx *ImageIndex, sig chan os.Signal) error {
	type item struct {
		archive string
		refs    []string
	}
	pauseRefs := idx.Pause.References
	if len(pauseRefs) == 0 {
		pauseRefs = []string{idx.Pause.Reference}
	}
	items := []item{{idx.Pause.Archive, pauseRefs}}
	for _, im := range idx.Images {
		items = append(items, item{im.Archive, im.References})
	}
	for _, it := range items {
		select {
		case s := <-sig:
			sig <- s
			return errors.New("interrupted")
		default:
		}
		have, err := a.ctr("images", "ls", "-q")
		if err != nil {
			return err
		}
		present := map[string]bool{}
		for _, l := range strings.Split(string(have), "\n") {
			present[strings.TrimSpace(l)] = true
		}
		missing := false
		for _, r := range it.refs {
			if !present[r] {
				missing = true
			}
		}
		if !missing {
			continue
		}
		t := time.Now()
		out, err := a.ctr("images", "import", "--no-unpack=false", it.archive)
		if err != nil {
			return err
		}
		imported := importedNames(string(out))
		if len(imported) == 0 {
			return fmt.Errorf("ctr imported nothing from %s: %s", it.archive, strings.TrimSpace(string(out)))
		}
		for _, r := range it.refs {
			if r == imported[0] {
				continue
			}
			if _, err := a.ctr("images", "tag", "--force", imported[0], r); err != nil {
				return err
			}
		}
		log.Printf("imported %s as %s in %.1fs", filepath.Base(it.archive), strings.Join(it.refs, ", "),
			time.Since(t).Seconds())
	}
	return nil
}

// importedNames reads the image names from `ctr images import` output ("unpacking NAME (sha256:…)").
func importedNames(out string) []string {
	var names []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "unpacking" {
			names = append(names, f[1])
		}
	}
	return names
}

func (a *realNodeAgent) killAllContainers() {
	out, err := a.ctr("tasks", "ls", "-q")
	if err != nil {
		return
	}
	for _, id := range strings.Fields(string(out)) {
		_, _ = a.ctr("tasks", "kill", "--signal", "SIGKILL", "--all", id)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		out, err := a.ctr("tasks", "ls", "-q")
		if err != nil || strings.TrimSpace(string(out)) == "" {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (a *realNodeAgent) stopContainerd(cmd *exec.Cmd) {
	a.killAllContainers()
	if cmd.ProcessState == nil {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _, _ = cmd.Process.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
		}
	}
	a.killStaleShims()
}

// killStaleShims kills the containerd shims of this node (they outlive containerd by design),
// found by the node's socket in their command line; with them go the containers they hold.
func (a *realNodeAgent) killStaleShims() {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	needle := a.sock()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		cmdline := strings.ReplaceAll(string(b), "\x00", " ")
		if strings.Contains(cmdline, "containerd-shim") && strings.Contains(cmdline, needle) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

var _ = context.Background
