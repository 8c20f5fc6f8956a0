package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
)

const defaultJobRunDuration = 2 * time.Second

// fakeKubelet plays the kubelet for every node of the topology: it registers the nodes,
// renews their Leases, reports Ready, and moves pods bound to them through their lifecycle.
type fakeKubelet struct {
	client         kubernetes.Interface
	nodes          map[string]NodeSpec
	order          []string
	leaseDuration  int32
	leaseInterval  time.Duration
	statusInterval time.Duration
	lister         corelisters.PodLister
	queue          workqueue.TypedRateLimitingInterface[string]
	ipam           *ipam
	nodeUIDs       sync.Map // node name -> types.UID
	tlsCert        string
	tlsKey         string
	volumeDir      string
	kubeletPort    int32 // the log server's port, advertised by every node
}

func runFakeKubelet(args []string) int {
	fs := flag.NewFlagSet("fake-kubelet", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "admin kubeconfig (required)")
	topologyPath := fs.String("topology", "", "topology file (default: embedded default topology)")
	leaseDuration := fs.Int("lease-duration-seconds", 40, "node Lease duration")
	leaseInterval := fs.Duration("lease-interval", 10*time.Second, "how often node Leases are renewed")
	statusInterval := fs.Duration("status-interval", 60*time.Second, "how often node status (Ready) is reported")
	podCIDR := fs.String("pod-cidr", "10.244.0.0/16", "pod IPs are assigned from this IPv4 range")
	workers := fs.Int("workers", 8, "pod workers")
	qps := fs.Float64("kube-api-qps", 500, "client QPS")
	burst := fs.Int("kube-api-burst", 1000, "client burst")
	tlsCert := fs.String("tls-cert", "", "serving certificate of the kubelet log endpoint (none: no logs)")
	tlsKey := fs.String("tls-key", "", "key of --tls-cert")
	realOn := fs.Bool("real-nodes", false, "leave the nodes of pools marked real to their real kubelets")
	volumeDir := fs.String("volume-dir", "", "directory under which each volume's hostPath is created "+
		"(world-writable, removed with its claim); empty: /var/lib/kubesim/volumes, never created")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "fake-kubelet: --kubeconfig is required")
		return 2
	}
	topo, err := LoadTopology(*topologyPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake-kubelet:", err)
		return 2
	}
	pool, err := newIPAM(*podCIDR)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake-kubelet:", err)
		return 2
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		log.Printf("fake-kubelet: %v", err)
		return 1
	}
	cfg.QPS, cfg.Burst = float32(*qps), *burst
	cfg.UserAgent = "kubesim-fake-kubelet"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		log.Printf("fake-kubelet: %v", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	fk := &fakeKubelet{
		client:         client,
		nodes:          map[string]NodeSpec{},
		leaseDuration:  int32(*leaseDuration),
		leaseInterval:  *leaseInterval,
		statusInterval: *statusInterval,
		ipam:           pool,
		tlsCert:        *tlsCert,
		tlsKey:         *tlsKey,
		kubeletPort:    10250,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "pods"}),
	}
	fk.volumeDir = *volumeDir
	for _, n := range topo.FakeNodes(*realOn) {
		fk.nodes[n.Name] = n
		fk.order = append(fk.order, n.Name)
	}
	if err := fk.run(ctx, *workers); err != nil && !errors.Is(err, context.Canceled) {
		log.Printf("fake-kubelet: %v", err)
		return 1
	}
	log.Print("fake-kubelet: stopped")
	return 0
}

func (fk *fakeKubelet) run(ctx context.Context, workers int) error {
	factory := informers.NewSharedInformerFactory(fk.client, 0)
	fk.lister = factory.Core().V1().Pods().Lister()
	if fk.tlsCert != "" {
		port, err := fk.startLogServer(ctx, fk.tlsCert, fk.tlsKey)
		if err != nil {
			return err
		}
		fk.kubeletPort = int32(port)
		log.Printf("fake-kubelet: container logs served on 127.0.0.1:%d", port)
	}
	for _, name := range fk.order {
		if err := fk.registerNode(ctx, fk.nodes[name]); err != nil {
			return fmt.Errorf("register node %s: %w", name, err)
		}
	}
	log.Printf("fake-kubelet: registered %d nodes", len(fk.order))
	fk.renewLeases(ctx)

	podInformer := factory.Core().V1().Pods()
	if err := fk.watchClaims(ctx, factory); err != nil {
		return err
	}
	_, err := podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { fk.onPod(obj) },
		UpdateFunc: func(_, obj interface{}) { fk.onPod(obj) },
		DeleteFunc: func(obj interface{}) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				fk.ipam.release(pod.UID)
			}
		},
	})
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("informer %v did not sync", typ)
		}
	}
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for fk.processNext(ctx) {
			}
		}()
	}
	leaseTick := time.NewTicker(fk.leaseInterval)
	statusTick := time.NewTicker(fk.statusInterval)
	defer leaseTick.Stop()
	defer statusTick.Stop()
	for {
		select {
		case <-ctx.Done():
			fk.queue.ShutDown()
			wg.Wait()
			factory.Shutdown()
			return nil
		case <-leaseTick.C:
			fk.renewLeases(ctx)
		case <-statusTick.C:
			for _, name := range fk.order {
				if err := fk.reportStatus(ctx, name); err != nil && ctx.Err() == nil {
					log.Printf("fake-kubelet: node %s status: %v", name, err)
				}
			}
		}
	}
}

// registerNode creates the Node (or refreshes labels/annotations of an existing one) and
// reports its status.
func (fk *fakeKubelet) registerNode(ctx context.Context, spec NodeSpec) error {
	want := spec.Node()
	nodes := fk.client.CoreV1().Nodes()
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cur, err := nodes.Get(ctx, spec.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			created, err := nodes.Create(ctx, want, metav1.CreateOptions{})
			if err == nil {
				fk.nodeUIDs.Store(spec.Name, created.UID)
			}
			return err
		}
		if err != nil {
			return err
		}
		if cur.Labels == nil {
			cur.Labels = map[string]string{}
		}
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		for k, v := range want.Labels {
			cur.Labels[k] = v
		}
		for k, v := range want.Annotations {
			cur.Annotations[k] = v
		}
		updated, err := nodes.Update(ctx, cur, metav1.UpdateOptions{})
		if err == nil {
			fk.nodeUIDs.Store(spec.Name, updated.UID)
		}
		return err
	})
	if err != nil {
		return err
	}
	return fk.reportStatus(ctx, spec.Name)
}

func (fk *fakeKubelet) reportStatus(ctx context.Context, name string) error {
	spec := fk.nodes[name]
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		node, err := fk.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		st := &node.Status
		st.Capacity = spec.Capacity.DeepCopy()
		st.Allocatable = spec.Capacity.DeepCopy()
		st.Phase = corev1.NodeRunning
		st.Addresses = []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: spec.InternalIP},
			{Type: corev1.NodeHostName, Address: name},
		}
		if fk.tlsCert != "" {
			// The apiserver prefers ExternalIP (see up.go) and so reaches the log server here.
			st.Addresses = append(st.Addresses, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "127.0.0.1"})
		}
		st.DaemonEndpoints = corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: fk.kubeletPort}}
		st.NodeInfo = corev1.NodeSystemInfo{
			MachineID:               name,
			SystemUUID:              deterministicUUID("", "kubesim/"+name+"/system"),
			BootID:                  deterministicUUID("", "kubesim/"+name+"/boot"),
			KernelVersion:           "6.8.0-kubesim",
			OSImage:                 "kubesim",
			ContainerRuntimeVersion: "kubesim://1.0.0",
			KubeletVersion:          kubeletVersion(),
			KubeProxyVersion:        "",
			OperatingSystem:         "linux",
			Architecture:            "amd64",
		}
		type cond struct {
			t               corev1.NodeConditionType
			s               corev1.ConditionStatus
			reason, message string
		}
		conds := []cond{
			{corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"},
			{corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"},
			{corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"},
			{corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status (kubesim)"},
		}
		for _, c := range conds {
			found := false
			for i := range st.Conditions {
				ex := &st.Conditions[i]
				if ex.Type != c.t {
					continue
				}
				found = true
				if ex.Status != c.s {
					ex.LastTransitionTime = now
				}
				ex.Status, ex.Reason, ex.Message, ex.LastHeartbeatTime = c.s, c.reason, c.message, now
			}
			if !found {
				st.Conditions = append(st.Conditions, corev1.NodeCondition{Type: c.t, Status: c.s, Reason: c.reason,
					Message: c.message, LastHeartbeatTime: now, LastTransitionTime: now})
			}
		}
		updated, err := fk.client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		if err == nil {
			fk.nodeUIDs.Store(name, updated.UID)
		}
		return err
	})
}

func (fk *fakeKubelet) renewLeases(ctx context.Context) {
	for _, name := range fk.order {
		if err := fk.renewLease(ctx, name); err != nil && ctx.Err() == nil {
			log.Printf("fake-kubelet: lease %s: %v", name, err)
		}
	}
}

func (fk *fakeKubelet) renewLease(ctx context.Context, name string) error {
	leases := fk.client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	now := metav1.NewMicroTime(time.Now())
	lease, err := leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		l := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: corev1.NamespaceNodeLease},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To(name),
				LeaseDurationSeconds: ptr.To(fk.leaseDuration),
				RenewTime:            &now,
			},
		}
		if uid, ok := fk.nodeUIDs.Load(name); ok {
			l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: name,
				UID: uid.(types.UID)}}
		}
		_, err = leases.Create(ctx, l, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	lease.Spec.HolderIdentity = ptr.To(name)
	lease.Spec.LeaseDurationSeconds = ptr.To(fk.leaseDuration)
	lease.Spec.RenewTime = &now
	_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	return err
}

func (fk *fakeKubelet) onPod(obj interface{}) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if _, mine := fk.nodes[pod.Spec.NodeName]; !mine {
		return
	}
	if pod.Status.PodIP != "" {
		fk.ipam.reserve(pod.UID, pod.Status.PodIP)
	}
	key, err := cache.MetaNamespaceKeyFunc(pod)
	if err != nil {
		return
	}
	fk.queue.Add(key)
}

func (fk *fakeKubelet) processNext(ctx context.Context) bool {
	key, quit := fk.queue.Get()
	if quit {
		return false
	}
	defer fk.queue.Done(key)
	if err := fk.syncPod(ctx, key); err != nil {
		if ctx.Err() == nil {
			log.Printf("fake-kubelet: pod %s: %v (retrying)", key, err)
		}
		fk.queue.AddRateLimited(key)
		return true
	}
	fk.queue.Forget(key)
	return true
}

// runDuration says how long the pod's containers run: the kubesim.io/run-duration annotation,
// else 2s for Job-owned pods and pods with an exit-code annotation, else forever (ok=false).
func runDuration(pod *corev1.Pod) (time.Duration, bool) {
	if v, ok := pod.Annotations[AnnoRunDuration]; ok {
		d, err := time.ParseDuration(v)
		if err == nil && d >= 0 {
			return d, true
		}
		log.Printf("fake-kubelet: pod %s/%s: bad %s %q, using %s", pod.Namespace, pod.Name, AnnoRunDuration,
			v, defaultJobRunDuration)
		return defaultJobRunDuration, true
	}
	if _, ok := pod.Annotations[AnnoExitCode]; ok {
		return defaultJobRunDuration, true
	}
	for _, o := range pod.OwnerReferences {
		if o.Kind == "Job" && o.APIVersion == "batch/v1" {
			return defaultJobRunDuration, true
		}
	}
	return 0, false
}

func exitCode(pod *corev1.Pod) int32 {
	v, ok := pod.Annotations[AnnoExitCode]
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		log.Printf("fake-kubelet: pod %s/%s: bad %s %q, using 1", pod.Namespace, pod.Name, AnnoExitCode, v)
		return 1
	}
	return int32(n)
}

func (fk *fakeKubelet) syncPod(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pod, err := fk.lister.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	node, mine := fk.nodes[pod.Spec.NodeName]
	if !mine {
		return nil
	}
	if pod.DeletionTimestamp != nil {
		// The kubelet's part of graceful deletion: the containers are gone, remove the object.
		err := fk.client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{
			GracePeriodSeconds: ptr.To(int64(0)),
			Preconditions:      &metav1.Preconditions{UID: &pod.UID},
		})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		return err
	}
	switch pod.Status.Phase {
	case corev1.PodPending, "":
		if err := fk.startPod(ctx, pod, node); err != nil {
			return err
		}
		if d, ok := runDuration(pod); ok {
			fk.queue.AddAfter(key, d)
		}
	case corev1.PodRunning:
		d, ok := runDuration(pod)
		if !ok {
			return nil
		}
		started := pod.CreationTimestamp.Time
		if pod.Status.StartTime != nil {
			started = pod.Status.StartTime.Time
		}
		if left := time.Until(started.Add(d)); left > 0 {
			fk.queue.AddAfter(key, left)
			return nil
		}
		return fk.finishPod(ctx, pod)
	}
	return nil
}

// updatePodStatus applies mutate to the pod and writes its status; on a conflict it re-reads.
func (fk *fakeKubelet) updatePodStatus(ctx context.Context, pod *corev1.Pod, mutate func(*corev1.Pod) bool) error {
	cur := pod.DeepCopy()
	first := true
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		if !first {
			fresh, err := fk.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if fresh.UID != pod.UID {
				return nil
			}
			cur = fresh
		}
		first = false
		if cur.DeletionTimestamp != nil || !mutate(cur) {
			return nil
		}
		_, err := fk.client.CoreV1().Pods(cur.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

func setPodCondition(st *corev1.PodStatus, t corev1.PodConditionType, s corev1.ConditionStatus, now metav1.Time) {
	for i := range st.Conditions {
		c := &st.Conditions[i]
		if c.Type == t {
			if c.Status != s {
				c.LastTransitionTime = now
			}
			c.Status = s
			c.Reason, c.Message = "", ""
			return
		}
	}
	st.Conditions = append(st.Conditions, corev1.PodCondition{Type: t, Status: s, LastTransitionTime: now})
}

func (fk *fakeKubelet) startPod(ctx context.Context, pod *corev1.Pod, node NodeSpec) error {
	ip, err := fk.ipam.allocate(pod.UID)
	if err != nil {
		return err
	}
	return fk.updatePodStatus(ctx, pod, func(p *corev1.Pod) bool {
		if p.Status.Phase != corev1.PodPending && p.Status.Phase != "" {
			return false
		}
		now := metav1.Now()
		st := &p.Status
		st.Phase = corev1.PodRunning
		st.StartTime = &now
		st.HostIP = node.InternalIP
		st.HostIPs = []corev1.HostIP{{IP: node.InternalIP}}
		st.PodIP = ip
		st.PodIPs = []corev1.PodIP{{IP: ip}}
		st.QOSClass = qosClass(p)
		for _, t := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized,
			corev1.ContainersReady, corev1.PodReady, corev1.PodScheduled} {
			setPodCondition(st, t, corev1.ConditionTrue, now)
		}
		st.InitContainerStatuses = nil
		for _, c := range p.Spec.InitContainers {
			st.InitContainerStatuses = append(st.InitContainerStatuses, corev1.ContainerStatus{
				Name: c.Name, Image: c.Image, ImageID: "kubesim://" + c.Image,
				ContainerID: containerID(p, c.Name), Ready: true, Started: ptr.To(false),
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
					ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now,
					ContainerID: containerID(p, c.Name)}},
			})
		}
		st.ContainerStatuses = nil
		for _, c := range p.Spec.Containers {
			st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
				Name: c.Name, Image: c.Image, ImageID: "kubesim://" + c.Image,
				ContainerID: containerID(p, c.Name), Ready: true, Started: ptr.To(true),
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
			})
		}
		return true
	})
}

func (fk *fakeKubelet) finishPod(ctx context.Context, pod *corev1.Pod) error {
	code := exitCode(pod)
	return fk.updatePodStatus(ctx, pod, func(p *corev1.Pod) bool {
		if p.Status.Phase != corev1.PodRunning {
			return false
		}
		now := metav1.Now()
		st := &p.Status
		reason := "Completed"
		st.Phase = corev1.PodSucceeded
		if code != 0 {
			reason = "Error"
			st.Phase = corev1.PodFailed
		}
		setPodCondition(st, corev1.ContainersReady, corev1.ConditionFalse, now)
		setPodCondition(st, corev1.PodReady, corev1.ConditionFalse, now)
		setPodCondition(st, corev1.PodReadyToStartContainers, corev1.ConditionFalse, now)
		for i := range st.ContainerStatuses {
			cs := &st.ContainerStatuses[i]
			startedAt := now
			if cs.State.Running != nil {
				startedAt = cs.State.Running.StartedAt
			}
			cs.Ready, cs.Started = false, ptr.To(false)
			cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: code, Reason: reason, StartedAt: startedAt, FinishedAt: now, ContainerID: cs.ContainerID}}
		}
		return true
	})
}

func containerID(p *corev1.Pod, name string) string {
	return "kubesim://" + string(p.UID) + "/" + name
}

func qosClass(p *corev1.Pod) corev1.PodQOSClass {
	if p.Status.QOSClass != "" {
		return p.Status.QOSClass
	}
	any, guaranteed := false, true
	for _, c := range p.Spec.Containers {
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			req, hasReq := c.Resources.Requests[r]
			lim, hasLim := c.Resources.Limits[r]
			if hasReq || hasLim {
				any = true
			}
			if !hasLim || (hasReq && req.Cmp(lim) != 0) {
				guaranteed = false
			}
		}
	}
	switch {
	case !any:
		return corev1.PodQOSBestEffort
	case guaranteed:
		return corev1.PodQOSGuaranteed
	}
	return corev1.PodQOSBurstable
}

// ipam hands out pod IPs from an IPv4 range (network and broadcast addresses excluded).
type ipam struct {
	mu    sync.Mutex
	base  uint32
	size  uint32
	next  uint32
	byUID map[types.UID]uint32
	used  map[uint32]types.UID
}

func newIPAM(cidr string) (*ipam, error) {
	_, n, err := net.ParseCIDR(cidr)
	if err != nil {
		return nil, fmt.Errorf("--pod-cidr: %w", err)
	}
	ones, bits := n.Mask.Size()
	if n.IP.To4() == nil || bits != 32 || ones > 30 {
		return nil, fmt.Errorf("--pod-cidr: %s must be an IPv4 range of at least /30", cidr)
	}
	return &ipam{base: binary.BigEndian.Uint32(n.IP.To4()), size: 1 << uint(32-ones),
		next: 1, byUID: map[types.UID]uint32{}, used: map[uint32]types.UID{}}, nil
}

func (a *ipam) ipString(off uint32) string {
	b := make(net.IP, 4)
	binary.BigEndian.PutUint32(b, a.base+off)
	return b.String()
}

func (a *ipam) allocate(uid types.UID) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if off, ok := a.byUID[uid]; ok {
		return a.ipString(off), nil
	}
	for i := uint32(0); i < a.size; i++ {
		off := a.next
		a.next++
		if a.next >= a.size-1 {
			a.next = 1
		}
		if off == 0 || off >= a.size-1 {
			continue
		}
		if _, taken := a.used[off]; !taken {
			a.used[off] = uid
			a.byUID[uid] = off
			return a.ipString(off), nil
		}
	}
	return "", errors.New("pod CIDR exhausted")
}

func (a *ipam) reserve(uid types.UID, ip string) {
	p := net.ParseIP(ip).To4()
	if p == nil {
		return
	}
	off := binary.BigEndian.Uint32(p) - a.base
	a.mu.Lock()
	defer a.mu.Unlock()
	if off == 0 || off >= a.size-1 {
		return
	}
	if _, ok := a.byUID[uid]; ok {
		return
	}
	if _, taken := a.used[off]; !taken {
		a.used[off] = uid
		a.byUID[uid] = off
	}
}

func (a *ipam) release(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if off, ok := a.byUID[uid]; ok {
		delete(a.byUID, uid)
		delete(a.used, off)
	}
}
