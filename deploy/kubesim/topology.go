package main

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

//go:embed topologies/default.yaml
var defaultTopologyYAML []byte

// Sharing modes of a node pool.
const (
	SharingWhole       = "whole"
	SharingTimeSlicing = "time-slicing"
	SharingMIG         = "mig"
	SharingHAMi        = "hami"
)

// Annotation and label keys written by kubesim.
const (
	AnnoGPUUUIDs    = "kubesim.io/gpu-uuids"
	AnnoMIGDevices  = "kubesim.io/mig-devices"
	AnnoNode        = "kubesim.io/node"
	LabelPool       = "kubesim.io/pool"
	LabelSharing    = "kubesim.io/sharing-mode"
	AnnoRunDuration = "kubesim.io/run-duration"
	AnnoExitCode    = "kubesim.io/exit-code"
)

// Topology is the YAML document given with --topology.
type Topology struct {
	Pools []Pool `json:"pools"`
}

// Pool is a group of identical fake nodes.
type Pool struct {
	Name         string            `json:"name"`
	Count        int               `json:"count"`
	CPU          string            `json:"cpu,omitempty"`
	Memory       string            `json:"memory,omitempty"`
	Pods         int               `json:"pods,omitempty"`
	InstanceType string            `json:"instanceType,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"`
	Taints       []corev1.Taint    `json:"taints,omitempty"`
	GPU          *GPUSpec          `json:"gpu,omitempty"`
	// Real marks a pool of real nodes: with `up --real-nodes` each of its nodes is an upstream
	// kubelet with containerd that really runs pods; without it the pool is simulated like
	// any other.
	Real bool `json:"real,omitempty"`
}

// GPUSpec describes the GPUs of every node in a pool.
type GPUSpec struct {
	Count             int     `json:"count"`
	Product           string  `json:"product"`
	MemoryMiB         int     `json:"memoryMiB"`
	Family            string  `json:"family,omitempty"`
	ComputeCapability string  `json:"computeCapability,omitempty"`
	DriverVersion     string  `json:"driverVersion,omitempty"`
	CUDAVersion       string  `json:"cudaVersion,omitempty"`
	Sharing           Sharing `json:"sharing,omitempty"`
}

// Sharing selects how the GPUs are exposed to the scheduler.
type Sharing struct {
	Mode string `json:"mode,omitempty"`
	// time-slicing: replicas per GPU.
	Replicas int `json:"replicas,omitempty"`
	// mig: layouts, GPU i uses MIGLayouts[i % len]; MIGLayout is shorthand for one layout.
	MIGLayout  []string   `json:"migLayout,omitempty"`
	MIGLayouts [][]string `json:"migLayouts,omitempty"`
	MIGConfig  string     `json:"migConfig,omitempty"`
	// hami: virtual GPUs per physical GPU (HAMi deviceSplitCount).
	SplitCount int `json:"splitCount,omitempty"`
}

// NodeSpec is a fully computed fake node.
type NodeSpec struct {
	Name        string
	Pool        string
	Labels      map[string]string
	Annotations map[string]string
	Taints      []corev1.Taint
	Capacity    corev1.ResourceList
	InternalIP  string
	Real        bool
}

// MIGDevice is one entry of the kubesim.io/mig-devices annotation.
type MIGDevice struct {
	GPU     int    `json:"gpu"`
	Profile string `json:"profile"`
	UUID    string `json:"uuid"`
}

var migProfileRE = regexp.MustCompile(`^([1-7])g\.([0-9]+)gb(\+me)?$`)

// LoadTopology reads and validates a topology file; an empty path means the embedded default.
func LoadTopology(path string) (*Topology, error) {
	data := defaultTopologyYAML
	name := "default topology"
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("topology: %w", err)
		}
		data, name = b, path
	}
	t, err := ParseTopology(data)
	if err != nil {
		return nil, fmt.Errorf("topology %s: %w", name, err)
	}
	return t, nil
}

// ParseTopology parses YAML strictly (unknown fields are errors) and validates it.
func ParseTopology(data []byte) (*Topology, error) {
	var t Topology
	if err := yaml.UnmarshalStrict(data, &t); err != nil {
		return nil, fmt.Errorf("invalid YAML: %w", err)
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return &t, nil
}

// Validate reports the first problem found, naming the pool and field.
func (t *Topology) Validate() error {
	if len(t.Pools) == 0 {
		return errors.New("pools: at least one pool is required")
	}
	seen := map[string]bool{}
	total := 0
	for i := range t.Pools {
		p := &t.Pools[i]
		where := fmt.Sprintf("pools[%d]", i)
		if p.Name != "" {
			where = fmt.Sprintf("pools[%d] (%s)", i, p.Name)
		}
		if p.Name == "" {
			return fmt.Errorf("%s.name: required", where)
		}
		if errs := validation.IsDNS1123Label(p.Name); len(errs) > 0 {
			return fmt.Errorf("%s.name: %q is not a DNS-1123 label: %s", where, p.Name, strings.Join(errs, "; "))
		}
		if len(p.Name) > 50 {
			return fmt.Errorf("%s.name: at most 50 characters", where)
		}
		if seen[p.Name] {
			return fmt.Errorf("%s.name: duplicate pool name %q", where, p.Name)
		}
		seen[p.Name] = true
		if p.Count < 1 || p.Count > 1000 {
			return fmt.Errorf("%s.count: must be between 1 and 1000, got %d", where, p.Count)
		}
		total += p.Count
		for field, v := range map[string]string{"cpu": p.CPU, "memory": p.Memory} {
			if v == "" {
				continue
			}
			q, err := resource.ParseQuantity(v)
			if err != nil {
				return fmt.Errorf("%s.%s: %q is not a quantity: %v", where, field, v, err)
			}
			if q.Sign() <= 0 {
				return fmt.Errorf("%s.%s: must be positive", where, field)
			}
		}
		if p.Pods < 0 || p.Pods > 10000 {
			return fmt.Errorf("%s.pods: must be between 1 and 10000", where)
		}
		for k, v := range p.Labels {
			if errs := validation.IsQualifiedName(k); len(errs) > 0 {
				return fmt.Errorf("%s.labels: key %q: %s", where, k, strings.Join(errs, "; "))
			}
			if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
				return fmt.Errorf("%s.labels[%s]: value %q: %s", where, k, v, strings.Join(errs, "; "))
			}
		}
		for j, tn := range p.Taints {
			if tn.Key == "" {
				return fmt.Errorf("%s.taints[%d].key: required", where, j)
			}
			switch tn.Effect {
			case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
			default:
				return fmt.Errorf("%s.taints[%d].effect: must be NoSchedule, PreferNoSchedule or NoExecute, got %q",
					where, j, tn.Effect)
			}
		}
		if p.GPU != nil {
			if err := p.GPU.validate(where + ".gpu"); err != nil {
				return err
			}
		}
	}
	real := 0
	for _, p := range t.Pools {
		if p.Real {
			real += p.Count
		}
	}
	if real > maxRealNodes {
		return fmt.Errorf("pools: %d real nodes, at most %d", real, maxRealNodes)
	}
	if total > 5000 {
		return fmt.Errorf("pools: %d nodes in total, at most 5000", total)
	}
	return nil
}

func (g *GPUSpec) mode() string {
	if g.Sharing.Mode == "" {
		return SharingWhole
	}
	return g.Sharing.Mode
}

func (g *GPUSpec) layouts() [][]string {
	if len(g.Sharing.MIGLayouts) > 0 {
		return g.Sharing.MIGLayouts
	}
	if len(g.Sharing.MIGLayout) > 0 {
		return [][]string{g.Sharing.MIGLayout}
	}
	return nil
}

func (g *GPUSpec) validate(where string) error {
	if g.Count < 1 || g.Count > 64 {
		return fmt.Errorf("%s.count: must be between 1 and 64, got %d", where, g.Count)
	}
	if g.Product == "" {
		return fmt.Errorf("%s.product: required (e.g. NVIDIA-H100-80GB-HBM3)", where)
	}
	if errs := validation.IsValidLabelValue(g.Product); len(errs) > 0 {
		return fmt.Errorf("%s.product: %q is not a valid label value: %s", where, g.Product, strings.Join(errs, "; "))
	}
	if g.MemoryMiB < 1 {
		return fmt.Errorf("%s.memoryMiB: required, the memory of one GPU in MiB (e.g. 81559)", where)
	}
	for field, v := range map[string]string{"family": g.Family, "driverVersion": g.DriverVersion} {
		if errs := validation.IsValidLabelValue(v); v != "" && len(errs) > 0 {
			return fmt.Errorf("%s.%s: %q is not a valid label value", where, field, v)
		}
	}
	for field, v := range map[string]string{"computeCapability": g.ComputeCapability, "cudaVersion": g.CUDAVersion} {
		if v == "" {
			continue
		}
		if _, _, err := splitMajorMinor(v); err != nil {
			return fmt.Errorf("%s.%s: %q must look like MAJOR.MINOR", where, field, v)
		}
	}
	if g.DriverVersion != "" {
		if parts := strings.Split(g.DriverVersion, "."); len(parts) < 2 {
			return fmt.Errorf("%s.driverVersion: %q must look like MAJOR.MINOR[.REV]", where, g.DriverVersion)
		}
	}
	s := g.Sharing
	sw := where + ".sharing"
	mode := g.mode()
	if mode != SharingTimeSlicing && s.Replicas != 0 {
		return fmt.Errorf("%s.replicas: only valid with mode %q", sw, SharingTimeSlicing)
	}
	if mode != SharingMIG && (len(s.MIGLayout) > 0 || len(s.MIGLayouts) > 0 || s.MIGConfig != "") {
		return fmt.Errorf("%s: migLayout/migLayouts/migConfig only valid with mode %q", sw, SharingMIG)
	}
	if mode != SharingHAMi && s.SplitCount != 0 {
		return fmt.Errorf("%s.splitCount: only valid with mode %q", sw, SharingHAMi)
	}
	switch mode {
	case SharingWhole:
	case SharingTimeSlicing:
		if s.Replicas < 2 || s.Replicas > 1000 {
			return fmt.Errorf("%s.replicas: time-slicing needs 2..1000 replicas per GPU, got %d", sw, s.Replicas)
		}
	case SharingMIG:
		if len(s.MIGLayout) > 0 && len(s.MIGLayouts) > 0 {
			return fmt.Errorf("%s: give either migLayout or migLayouts, not both", sw)
		}
		ls := g.layouts()
		if len(ls) == 0 {
			return fmt.Errorf("%s.migLayout: mig mode needs a layout, e.g. [3g.40gb, 2g.20gb, 1g.10gb, 1g.10gb]", sw)
		}
		maxGB := (g.MemoryMiB + 1023) / 1024
		for li, l := range ls {
			lw := fmt.Sprintf("%s.migLayouts[%d]", sw, li)
			if len(s.MIGLayout) > 0 {
				lw = sw + ".migLayout"
			}
			if len(l) == 0 {
				return fmt.Errorf("%s: empty layout", lw)
			}
			slices, gb := 0, 0
			for _, prof := range l {
				m := migProfileRE.FindStringSubmatch(prof)
				if m == nil {
					return fmt.Errorf("%s: %q is not a MIG profile like 1g.10gb, 3g.40gb or 1g.10gb+me", lw, prof)
				}
				n, _ := strconv.Atoi(m[1])
				mem, _ := strconv.Atoi(m[2])
				slices += n
				gb += mem
			}
			if slices > 7 {
				return fmt.Errorf("%s: %v uses %d compute slices, a GPU has 7", lw, l, slices)
			}
			if gb > maxGB {
				return fmt.Errorf("%s: %v needs %d GB, the GPU has %d MiB", lw, l, gb, g.MemoryMiB)
			}
		}
		if s.MIGConfig != "" {
			if errs := validation.IsValidLabelValue(s.MIGConfig); len(errs) > 0 {
				return fmt.Errorf("%s.migConfig: %q is not a valid label value", sw, s.MIGConfig)
			}
		}
	case SharingHAMi:
		if s.SplitCount < 1 || s.SplitCount > 100 {
			return fmt.Errorf("%s.splitCount: hami needs 1..100 virtual GPUs per GPU, got %d", sw, s.SplitCount)
		}
	default:
		return fmt.Errorf("%s.mode: %q is not one of whole, time-slicing, mig, hami", sw, mode)
	}
	return nil
}

func splitMajorMinor(v string) (string, string, error) {
	parts := strings.Split(v, ".")
	if len(parts) != 2 {
		return "", "", errors.New("not MAJOR.MINOR")
	}
	for _, p := range parts {
		if _, err := strconv.Atoi(p); err != nil {
			return "", "", err
		}
	}
	return parts[0], parts[1], nil
}

// deterministicUUID formats sha256(seed) as a UUID with the given prefix ("GPU-" or "MIG-").
func deterministicUUID(prefix, seed string) string {
	sum := sha256.Sum256([]byte(seed))
	h := hex.EncodeToString(sum[:16])
	return fmt.Sprintf("%s%s-%s-%s-%s-%s", prefix, h[0:8], h[8:12], h[12:16], h[16:20], h[20:32])
}

// GPUUUID is the UUID of GPU index i on a node.
func GPUUUID(node string, i int) string {
	return deterministicUUID("GPU-", fmt.Sprintf("kubesim/%s/gpu/%d", node, i))
}

// Nodes expands the pools into node specs; names are <pool>-<index>.
func (t *Topology) Nodes() []NodeSpec {
	var out []NodeSpec
	idx := 0
	for _, p := range t.Pools {
		for i := 0; i < p.Count; i++ {
			idx++
			out = append(out, p.node(fmt.Sprintf("%s-%d", p.Name, i), idx))
		}
	}
	return out
}

// FakeNodes are the nodes the fake kubelet runs: all of them, or, when real nodes are on, the
// nodes of the pools that are not marked real.
func (t *Topology) FakeNodes(realOn bool) []NodeSpec {
	var out []NodeSpec
	for _, n := range t.Nodes() {
		if !(realOn && n.Real) {
			out = append(out, n)
		}
	}
	return out
}

// RealNodes are the nodes of the pools marked real.
func (t *Topology) RealNodes() []NodeSpec {
	var out []NodeSpec
	for _, n := range t.Nodes() {
		if n.Real {
			out = append(out, n)
		}
	}
	return out
}

func (p *Pool) node(name string, idx int) NodeSpec {
	cpu, mem, pods := p.CPU, p.Memory, p.Pods
	if cpu == "" {
		cpu = "64"
	}
	if mem == "" {
		mem = "512Gi"
	}
	if pods == 0 {
		pods = 110
	}
	n := NodeSpec{
		Name: name,
		Pool: p.Name,
		Labels: map[string]string{
			"kubernetes.io/hostname": name,
			"kubernetes.io/os":       "linux",
			"kubernetes.io/arch":     "amd64",
			"type":                   "kubesim",
			LabelPool:                p.Name,
		},
		Annotations: map[string]string{
			AnnoNode:                       "fake",
			"node.alpha.kubernetes.io/ttl": "0",
		},
		Taints: append([]corev1.Taint(nil), p.Taints...),
		Capacity: corev1.ResourceList{
			corev1.ResourceCPU:              resource.MustParse(cpu),
			corev1.ResourceMemory:           resource.MustParse(mem),
			corev1.ResourcePods:             *resource.NewQuantity(int64(pods), resource.DecimalSI),
			corev1.ResourceEphemeralStorage: resource.MustParse("1Ti"),
		},
		InternalIP: fmt.Sprintf("172.30.%d.%d", (idx/250)%250, idx%250+1),
		Real:       p.Real,
	}
	if p.InstanceType != "" {
		n.Labels["node.kubernetes.io/instance-type"] = p.InstanceType
	}
	for k, v := range p.Labels {
		n.Labels[k] = v
	}
	if p.GPU == nil {
		n.Labels[LabelSharing] = "none"
		return n
	}
	g := p.GPU
	mode := g.mode()
	n.Labels[LabelSharing] = mode
	n.Labels["nvidia.com/gpu.present"] = "true"
	n.Labels["nvidia.com/gpu.product"] = g.Product
	n.Labels["nvidia.com/gpu.count"] = strconv.Itoa(g.Count)
	n.Labels["nvidia.com/gpu.memory"] = strconv.Itoa(g.MemoryMiB)
	n.Labels["nvidia.com/gpu.deploy.device-plugin"] = "true"
	if g.Family != "" {
		n.Labels["nvidia.com/gpu.family"] = g.Family
	}
	if g.ComputeCapability != "" {
		maj, min, _ := splitMajorMinor(g.ComputeCapability)
		n.Labels["nvidia.com/gpu.compute.major"] = maj
		n.Labels["nvidia.com/gpu.compute.minor"] = min
	}
	if g.DriverVersion != "" {
		parts := strings.Split(g.DriverVersion, ".")
		n.Labels["nvidia.com/cuda.driver.major"] = parts[0]
		n.Labels["nvidia.com/cuda.driver.minor"] = parts[1]
		if len(parts) > 2 {
			n.Labels["nvidia.com/cuda.driver.rev"] = parts[2]
		}
	}
	if g.CUDAVersion != "" {
		maj, min, _ := splitMajorMinor(g.CUDAVersion)
		n.Labels["nvidia.com/cuda.runtime.major"] = maj
		n.Labels["nvidia.com/cuda.runtime.minor"] = min
	}
	uuids := make([]string, g.Count)
	for i := range uuids {
		uuids[i] = GPUUUID(name, i)
	}
	b, _ := json.Marshal(uuids)
	n.Annotations[AnnoGPUUUIDs] = string(b)
	count := int64(g.Count)
	switch mode {
	case SharingWhole:
		n.Labels["nvidia.com/gpu.replicas"] = "1"
		n.Labels["nvidia.com/gpu.sharing-strategy"] = "none"
		n.Labels["nvidia.com/mig.capable"] = "false"
		n.Capacity["nvidia.com/gpu"] = *resource.NewQuantity(count, resource.DecimalSI)
	case SharingTimeSlicing:
		// GPU Operator time-slicing with renameByDefault: true.
		n.Labels["nvidia.com/gpu.replicas"] = strconv.Itoa(g.Sharing.Replicas)
		n.Labels["nvidia.com/gpu.sharing-strategy"] = "time-slicing"
		n.Capacity["nvidia.com/gpu.shared"] = *resource.NewQuantity(count*int64(g.Sharing.Replicas), resource.DecimalSI)
	case SharingMIG:
		n.Labels["nvidia.com/mig.strategy"] = "mixed"
		n.Labels["nvidia.com/mig.capable"] = "true"
		n.Labels["nvidia.com/gpu.sharing-strategy"] = "none"
		n.Labels["nvidia.com/gpu.replicas"] = "1"
		cfg := g.Sharing.MIGConfig
		if cfg == "" {
			cfg = "custom"
		}
		n.Labels["nvidia.com/mig.config"] = cfg
		n.Labels["nvidia.com/mig.config.state"] = "success"
		counts := map[string]int64{}
		var devs []MIGDevice
		ls := g.layouts()
		for i := 0; i < g.Count; i++ {
			for j, prof := range ls[i%len(ls)] {
				counts[prof]++
				devs = append(devs, MIGDevice{GPU: i, Profile: prof,
					UUID: deterministicUUID("MIG-", fmt.Sprintf("kubesim/%s/gpu/%d/mig/%d", name, i, j))})
			}
		}
		for prof, c := range counts {
			n.Capacity[corev1.ResourceName("nvidia.com/mig-"+prof)] = *resource.NewQuantity(c, resource.DecimalSI)
			m := migProfileRE.FindStringSubmatch(prof)
			gb, _ := strconv.Atoi(m[2])
			slices, _ := strconv.Atoi(m[1])
			n.Labels["nvidia.com/mig-"+prof+".count"] = strconv.FormatInt(c, 10)
			n.Labels["nvidia.com/mig-"+prof+".memory"] = strconv.Itoa(gb * 1024)
			n.Labels["nvidia.com/mig-"+prof+".slices.gi"] = strconv.Itoa(slices)
			n.Labels["nvidia.com/mig-"+prof+".slices.ci"] = strconv.Itoa(slices)
		}
		b, _ := json.Marshal(devs)
		n.Annotations[AnnoMIGDevices] = string(b)
	case SharingHAMi:
		n.Labels["gpu"] = "on" // HAMi's device-plugin node selector
		n.Labels["nvidia.com/gpu.replicas"] = strconv.Itoa(g.Sharing.SplitCount)
		n.Capacity["nvidia.com/gpu"] = *resource.NewQuantity(count*int64(g.Sharing.SplitCount), resource.DecimalSI)
		n.Capacity["nvidia.com/gpumem"] = *resource.NewQuantity(count*int64(g.MemoryMiB), resource.DecimalSI)
		n.Capacity["nvidia.com/gpucores"] = *resource.NewQuantity(count*100, resource.DecimalSI)
	}
	return n
}

// Node renders the spec as a v1.Node (status carries capacity and allocatable).
func (n *NodeSpec) Node() *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels, Annotations: n.Annotations},
		Spec:       corev1.NodeSpec{Taints: n.Taints},
		Status: corev1.NodeStatus{
			Capacity:    n.Capacity.DeepCopy(),
			Allocatable: n.Capacity.DeepCopy(),
		},
	}
}

// Summary is what `kubesim topology` prints: one line per node.
func (n *NodeSpec) Summary() string {
	var keys []string
	for k := range n.Capacity {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		q := n.Capacity[corev1.ResourceName(k)]
		parts = append(parts, k+"="+q.String())
	}
	return fmt.Sprintf("%s pool=%s sharing=%s %s", n.Name, n.Pool, n.Labels[LabelSharing], strings.Join(parts, " "))
}
