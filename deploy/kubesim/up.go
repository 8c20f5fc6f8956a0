package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// featureGates turns on, in the API server, the controller manager and the scheduler, what the
// cluster of today runs that Kubernetes 1.36 leaves off by default: DeviceTaintRules (beta), so
// that a health monitor can taint one unhealthy GPU for the scheduler (NoSchedule) and for the
// device taint eviction controller (NoExecute) without touching the driver's ResourceSlices.
const featureGates = "--feature-gates=DRADeviceTaintRules=true"

// Ports of the running cluster, as written to READY.
type Ports struct {
	Etcd              int `json:"etcd"`
	EtcdPeer          int `json:"etcd_peer"`
	APIServer         int `json:"apiserver"`
	ControllerManager int `json:"controller_manager"`
	Scheduler         int `json:"scheduler"`
}

// ReadyFile is the JSON document written to DATA_DIR/READY.
type ReadyFile struct {
	Kubeconfig   string    `json:"kubeconfig"`
	Server       string    `json:"server"`
	Ports        Ports     `json:"ports"`
	PID          int       `json:"pid"`
	DataDir      string    `json:"data_dir"`
	Nodes        []string  `json:"nodes"`
	ReadySeconds float64   `json:"ready_seconds"`
	Version      string    `json:"version"`
	Real         *RealInfo `json:"real,omitempty"`
}

type child struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
	// stopTimeout overrides the supervisor's for this child (a real node stops its pods first).
	stopTimeout time.Duration
}

type supervisor struct {
	dataDir     string
	logDir      string
	children    []*child
	stopTimeout time.Duration
	sig         chan os.Signal
	logLevel    int
	watchPID    int
	real        RealOptions
	cancel      context.CancelFunc
}

// parentGone reports whether the process given with --watch-pid has exited.
func (s *supervisor) parentGone() bool {
	if s.watchPID <= 0 {
		return false
	}
	err := syscall.Kill(s.watchPID, 0)
	return errors.Is(err, syscall.ESRCH)
}

var errInterrupted = errors.New("interrupted by signal")

func runUp(args []string) int {
	// Pdeathsig is delivered when the *thread* that forked the child exits. Every child is
	// started from this goroutine, which stays locked to its thread until the process exits.
	runtime.LockOSThread()

	fs := flag.NewFlagSet("up", flag.ContinueOnError)
	dataDir := fs.String("data-dir", "", "directory for pki, etcd data, logs, admin.kubeconfig and READY (required)")
	topologyPath := fs.String("topology", "", "topology YAML file (default: the embedded topologies/default.yaml)")
	var ports Ports
	fs.IntVar(&ports.Etcd, "etcd-port", 0, "etcd client port (0 = pick a free port)")
	fs.IntVar(&ports.EtcdPeer, "etcd-peer-port", 0, "etcd peer port (0 = pick a free port)")
	fs.IntVar(&ports.APIServer, "apiserver-port", 0, "kube-apiserver secure port (0 = pick a free port)")
	fs.IntVar(&ports.ControllerManager, "controller-manager-port", 0, "kube-controller-manager port (0 = free)")
	fs.IntVar(&ports.Scheduler, "scheduler-port", 0, "kube-scheduler port (0 = pick a free port)")
	readyTimeout := fs.Duration("ready-timeout", 5*time.Minute, "give up when the cluster is not READY by then")
	stopTimeout := fs.Duration("stop-timeout", 10*time.Second, "per component: SIGTERM, then SIGKILL after this")
	verbosity := fs.Int("v", 1, "klog verbosity of the components")
	watchPID := fs.Int("watch-pid", 0, "stop the cluster when this process (e.g. the test runner) is gone")
	var real RealOptions
	fs.BoolVar(&real.Enabled, "real-nodes", false, "run the nodes of pools marked real as real kubelets with containerd")
	fs.StringVar(&real.Images, "images", "", "with --real-nodes: the image index to import into every real node")
	fs.StringVar(&real.CoreDNS, "coredns", "", "with --real-nodes: the CoreDNS binary serving cluster DNS to real nodes")
	fs.StringVar(&real.Containerd, "containerd", "containerd", "with --real-nodes: the containerd binary")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dataDir == "" {
		fmt.Fprintln(os.Stderr, "kubesim up: --data-dir is required")
		return 2
	}
	topo, err := LoadTopology(*topologyPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubesim up:", err)
		return 2
	}
	dir, err := filepath.Abs(*dataDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubesim up:", err)
		return 2
	}
	topoAbs := ""
	if *topologyPath != "" {
		topoAbs, _ = filepath.Abs(*topologyPath)
	}
	logDir := filepath.Join(dir, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "kubesim up:", err)
		return 1
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".kubesim.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubesim up:", err)
		return 1
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		fmt.Fprintf(os.Stderr, "kubesim up: data dir %s is in use by another kubesim up (%v)\n", dir, err)
		return 1
	}
	_ = os.Remove(filepath.Join(dir, "READY"))
	if f, err := os.OpenFile(filepath.Join(logDir, "up.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
		log.SetOutput(io.MultiWriter(os.Stderr, f))
		defer f.Close()
	}
	log.SetPrefix("kubesim up: ")

	s := &supervisor{dataDir: dir, logDir: logDir, stopTimeout: *stopTimeout, logLevel: *verbosity,
		sig: make(chan os.Signal, 2), watchPID: *watchPID, real: real}
	signal.Notify(s.sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	start := time.Now()
	var createdHostPaths []string
	if real.Enabled {
		createdHostPaths = missingHostPaths()
		defer cleanUpRealNodes(dir, createdHostPaths)
	}
	rf, err := s.bringUp(topo, topoAbs, ports, start.Add(*readyTimeout))
	if err != nil {
		code := 1
		if errors.Is(err, errInterrupted) {
			code = 0
			log.Print("interrupted during startup, stopping")
		} else {
			log.Printf("FAILED: %v", err)
		}
		s.stopAll()
		return code
	}
	rf.ReadySeconds = time.Since(start).Seconds()
	if err := writeJSONAtomic(filepath.Join(dir, "READY"), rf); err != nil {
		log.Printf("write READY: %v", err)
		s.stopAll()
		return 1
	}
	log.Printf("READY in %.1fs: kubeconfig %s, apiserver %s", rf.ReadySeconds, rf.Kubeconfig, rf.Server)

	code := 0
	exits := s.anyExit()
	watch := time.NewTicker(time.Second)
	defer watch.Stop()
wait:
	for {
		select {
		case sg := <-s.sig:
			log.Printf("received %v, stopping", sg)
			break wait
		case c := <-exits:
			log.Printf("component %s exited unexpectedly (%v); last log lines:\n%s", c.name, c.err, tail(c.log, 40))
			code = 1
			break wait
		case <-watch.C:
			if s.parentGone() {
				log.Printf("watched process %d is gone, stopping", s.watchPID)
				break wait
			}
		}
	}
	_ = os.Remove(filepath.Join(dir, "READY"))
	s.stopAll()
	log.Print("stopped")
	return code
}

func (s *supervisor) bringUp(topo *Topology, topoPath string, ports Ports, deadline time.Time) (*ReadyFile, error) {
	pk := newPKIPaths(s.dataDir)
	if err := ensurePKI(pk); err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	kubeconfig := filepath.Join(s.dataDir, "admin.kubeconfig")

	// etcd
	err := s.startWithPorts("etcd", []*int{&ports.Etcd, &ports.EtcdPeer}, deadline, func() []string {
		return []string{"--data-dir=" + filepath.Join(s.dataDir, "etcd"),
			fmt.Sprintf("--listen-client-url=http://127.0.0.1:%d", ports.Etcd),
			fmt.Sprintf("--listen-peer-url=http://127.0.0.1:%d", ports.EtcdPeer)}
	}, func() string { return fmt.Sprintf("http://127.0.0.1:%d/health", ports.Etcd) }, `"health":"true"`)
	if err != nil {
		return nil, err
	}

	// kube-apiserver
	err = s.startWithPorts("kube-apiserver", []*int{&ports.APIServer}, deadline, func() []string {
		return []string{
			fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", ports.Etcd),
			"--bind-address=127.0.0.1",
			fmt.Sprintf("--secure-port=%d", ports.APIServer),
			"--advertise-address=127.0.0.1",
			"--endpoint-reconciler-type=none",
			"--cert-dir=" + filepath.Join(pk.Dir, "apiserver"),
			"--tls-cert-file=" + pk.AdminCert,
			"--tls-private-key-file=" + pk.AdminKey,
			"--client-ca-file=" + pk.CACert,
			"--requestheader-client-ca-file=" + pk.CACert,
			"--requestheader-allowed-names=kubesim-admin",
			"--requestheader-username-headers=X-Remote-User",
			"--requestheader-group-headers=X-Remote-Group",
			"--requestheader-extra-headers-prefix=X-Remote-Extra-",
			"--proxy-client-cert-file=" + pk.AdminCert,
			"--proxy-client-key-file=" + pk.AdminKey,
			// Pod logs: the fake kubelet serves them on 127.0.0.1, the nodes' ExternalIP.
			"--kubelet-preferred-address-types=ExternalIP,InternalIP,Hostname",
			"--kubelet-client-certificate=" + pk.AdminCert,
			"--kubelet-client-key=" + pk.AdminKey,
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file=" + pk.SAKey,
			"--service-account-signing-key-file=" + pk.SAKey,
			"--service-cluster-ip-range=10.96.0.0/16",
			"--authorization-mode=Node,RBAC",
			"--allow-privileged=true",
			"--profiling=false",
			featureGates,
			// DeviceTaintRule (resource.k8s.io/v1beta2) is a beta API, off by default in 1.36.
			"--runtime-config=resource.k8s.io/v1beta2/devicetaintrules=true",
			"--v=" + strconv.Itoa(s.logLevel),
		}
	}, func() string { return fmt.Sprintf("https://127.0.0.1:%d/readyz", ports.APIServer) }, "ok")
	if err != nil {
		return nil, err
	}
	server := fmt.Sprintf("https://127.0.0.1:%d", ports.APIServer)
	if err := writeKubeconfig(kubeconfig, pk, server); err != nil {
		return nil, err
	}

	// kube-controller-manager and kube-scheduler
	common := []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
		"--bind-address=127.0.0.1",
		featureGates,
		"--v=" + strconv.Itoa(s.logLevel),
	}
	err = s.startWithPorts("kube-controller-manager", []*int{&ports.ControllerManager}, deadline, func() []string {
		return append(append([]string{}, common...),
			fmt.Sprintf("--secure-port=%d", ports.ControllerManager),
			"--cert-dir="+filepath.Join(pk.Dir, "kube-controller-manager"),
			"--leader-elect=false",
			"--root-ca-file="+pk.CACert,
			"--service-account-private-key-file="+pk.SAKey,
			"--cluster-signing-cert-file="+pk.CACert,
			"--cluster-signing-key-file="+pk.CAKey,
			"--node-monitor-period=5s",
			"--node-monitor-grace-period=40s",
			"--kube-api-qps=200",
			"--kube-api-burst=400",
		)
	}, func() string { return fmt.Sprintf("https://127.0.0.1:%d/healthz", ports.ControllerManager) }, "ok")
	if err != nil {
		return nil, err
	}
	schedCfg := filepath.Join(s.dataDir, "kube-scheduler.yaml")
	if err := os.WriteFile(schedCfg, []byte(schedulerConfig(kubeconfig)), 0o644); err != nil {
		return nil, err
	}
	err = s.startWithPorts("kube-scheduler", []*int{&ports.Scheduler}, deadline, func() []string {
		return append(append([]string{}, common...),
			"--config="+schedCfg,
			fmt.Sprintf("--secure-port=%d", ports.Scheduler),
			"--cert-dir="+filepath.Join(pk.Dir, "kube-scheduler"),
		)
	}, func() string { return fmt.Sprintf("https://127.0.0.1:%d/healthz", ports.Scheduler) }, "ok")
	if err != nil {
		return nil, err
	}

	// fake kubelet for every node of the topology (but the real ones)
	fkArgs := []string{"--kubeconfig=" + kubeconfig, "--tls-cert=" + pk.AdminCert, "--tls-key=" + pk.AdminKey}
	if topoPath != "" {
		fkArgs = append(fkArgs, "--topology="+topoPath)
	}
	if s.real.Enabled {
		fkArgs = append(fkArgs, "--real-nodes", "--volume-dir="+filepath.Join(s.dataDir, "volumes"))
	}
	if _, err := s.spawn("fake-kubelet", fkArgs...); err != nil {
		return nil, err
	}

	var realInfo *RealInfo
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	if s.real.Enabled {
		info, err := s.startRealNodes(ctx, topo, pk, ports.APIServer, s.real)
		if err != nil {
			return nil, err
		}
		realInfo = info
		go keepRealNodesDressed(ctx, kubeconfig, topo.RealNodes())
	}

	var names []string
	for _, n := range topo.Nodes() {
		names = append(names, n.Name)
	}
	if err := s.waitClusterReady(kubeconfig, names, deadline); err != nil {
		return nil, err
	}
	if s.real.Enabled {
		if err := s.waitRealNodesDressed(ctx, kubeconfig, topo.RealNodes(), deadline); err != nil {
			return nil, err
		}
	}
	return &ReadyFile{Kubeconfig: kubeconfig, Server: server, Ports: ports, PID: os.Getpid(),
		DataDir: s.dataDir, Nodes: names, Version: kubeletVersion(), Real: realInfo}, nil
}

func schedulerConfig(kubeconfig string) string {
	return fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
  qps: 500
  burst: 1000
leaderElection:
  leaderElect: false
`, kubeconfig)
}

// freePort asks the kernel for an unused loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startWithPorts picks free ports for the zero entries of ports, starts the component and
// waits for its health URL. If the component dies because a picked port was taken in the
// meantime, it retries with new ports.
func (s *supervisor) startWithPorts(name string, ports []*int, deadline time.Time, args func() []string,
	url func() string, want string) error {
	var auto []*int
	for _, p := range ports {
		if *p == 0 {
			auto = append(auto, p)
		}
	}
	for attempt := 1; ; attempt++ {
		for _, p := range auto {
			fp, err := freePort()
			if err != nil {
				return err
			}
			*p = fp
		}
		c, err := s.spawn(name, args()...)
		if err != nil {
			return err
		}
		err = s.waitHealthy(c, url(), want, deadline)
		if err == nil {
			return nil
		}
		exited := false
		select {
		case <-c.done:
			exited = true
		default:
		}
		if exited && len(auto) > 0 && attempt < 4 && strings.Contains(tail(c.log, 200), "address already in use") {
			log.Printf("%s: port taken, retrying with other ports", name)
			s.children = s.children[:len(s.children)-1]
			continue
		}
		return err
	}
}

func (s *supervisor) spawn(name string, args ...string) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(s.logDir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(f, "=== %s kubesim %s %s\n", time.Now().Format(time.RFC3339), name, strings.Join(args, " "))
	cmd := exec.Command(self, append([]string{name}, args...)...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Dir = s.dataDir
	// Own process group (a terminal's Ctrl-C reaches only `up`, which stops children in
	// order); Pdeathsig kills the child if `up` dies without cleaning up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		f.Close()
		close(c.done)
	}()
	s.children = append(s.children, c)
	log.Printf("started %s (pid %d), log %s", name, cmd.Process.Pid, logPath)
	return c, nil
}

// anyExit returns a channel that yields the first child to exit.
func (s *supervisor) anyExit() <-chan *child {
	ch := make(chan *child, len(s.children))
	for _, c := range s.children {
		go func(c *child) {
			<-c.done
			ch <- c
		}(c)
	}
	return ch
}

// check reports a signal or a dead child.
func (s *supervisor) check() error {
	select {
	case <-s.sig:
		return errInterrupted
	default:
	}
	if s.parentGone() {
		return errInterrupted
	}
	for _, c := range s.children {
		select {
		case <-c.done:
			return fmt.Errorf("%s exited during startup (%v); last log lines:\n%s", c.name, c.err, tail(c.log, 40))
		default:
		}
	}
	return nil
}

var insecureHTTP = &http.Client{
	Timeout: 3 * time.Second,
	Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback health checks only
	},
}

func (s *supervisor) waitHealthy(c *child, url, want string, deadline time.Time) error {
	last := ""
	for {
		if err := s.check(); err != nil {
			return err
		}
		resp, err := insecureHTTP.Get(url)
		if err == nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && bytes.Contains(b, []byte(want)) {
				log.Printf("%s healthy (%s)", c.name, url)
				return nil
			}
			last = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not healthy at %s before the deadline (last: %s); last log lines:\n%s",
				c.name, url, last, tail(c.log, 40))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func (s *supervisor) waitClusterReady(kubeconfig string, nodes []string, deadline time.Time) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.Timeout = 5 * time.Second
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for _, n := range nodes {
		want[n] = true
	}
	last := ""
	for {
		if err := s.check(); err != nil {
			return err
		}
		last = clusterNotReadyReason(client, want)
		if last == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster not ready before the deadline: %s", last)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// clusterNotReadyReason returns "" when every node is Ready and untainted by node conditions,
// and the default ServiceAccount exists.
func clusterNotReadyReason(client kubernetes.Interface, want map[string]bool) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "list nodes: " + err.Error()
	}
	ready := 0
	for _, n := range list.Items {
		if !want[n.Name] {
			continue
		}
		ok := false
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ok = true
			}
		}
		if !ok {
			return "node " + n.Name + " not Ready"
		}
		for _, t := range n.Spec.Taints {
			if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
				return "node " + n.Name + " still has taint " + t.Key
			}
		}
		ready++
	}
	if ready != len(want) {
		return fmt.Sprintf("%d of %d nodes registered and Ready", ready, len(want))
	}
	if _, err := client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return "ServiceAccount default/default not created yet"
		}
		return "get ServiceAccount: " + err.Error()
	}
	return ""
}

// stopAll stops the children in reverse start order: SIGTERM, then SIGKILL after stopTimeout.
func (s *supervisor) stopAll() {
	if s.cancel != nil {
		s.cancel()
	}
	for i := len(s.children) - 1; i >= 0; i-- {
		c := s.children[i]
		select {
		case <-c.done:
			continue
		default:
		}
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		timeout := s.stopTimeout
		if c.stopTimeout > timeout {
			timeout = c.stopTimeout
		}
		select {
		case <-c.done:
			log.Printf("stopped %s", c.name)
		case <-time.After(timeout):
			log.Printf("%s did not stop within %s, killing", c.name, timeout)
			_ = c.cmd.Process.Kill()
			<-c.done
		}
	}
}

func writeJSONAtomic(path string, v interface{}) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
