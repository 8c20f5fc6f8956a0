package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

func nodeByName(t *testing.T, topo *Topology, name string) NodeSpec {
	t.Helper()
	for _, n := range topo.Nodes() {
		if n.Name == name {
			return n
		}
	}
	t.Fatalf("node %s not in topology", name)
	return NodeSpec{}
}

func capacity(n NodeSpec, r string) string {
	q, ok := n.Capacity[corev1.ResourceName(r)]
	if !ok {
		return "<none>"
	}
	return q.String()
}

func TestDefaultTopologyHasEveryPoolTheIssueAsksFor(t *testing.T) {
	topo, err := LoadTopology("")
	if err != nil {
		t.Fatal(err)
	}
	if got := len(topo.Nodes()); got != 9 {
		t.Fatalf("nodes = %d, want 9", got)
	}
	h100 := nodeByName(t, topo, "h100-3")
	if capacity(h100, "nvidia.com/gpu") != "8" || h100.Labels["nvidia.com/gpu.product"] != "NVIDIA-H100-80GB-HBM3" {
		t.Errorf("h100: %v %v", h100.Capacity, h100.Labels)
	}
	mig := nodeByName(t, topo, "a100-mig-1")
	for r, want := range map[string]string{"nvidia.com/mig-1g.10gb": "16", "nvidia.com/mig-2g.20gb": "8",
		"nvidia.com/mig-3g.40gb": "8", "nvidia.com/gpu": "<none>"} {
		if got := capacity(mig, r); got != want {
			t.Errorf("mig %s = %s, want %s", r, got, want)
		}
	}
	if mig.Labels["nvidia.com/mig.strategy"] != "mixed" {
		t.Errorf("mig strategy label: %v", mig.Labels)
	}
	ts := nodeByName(t, topo, "l40s-ts-0")
	if capacity(ts, "nvidia.com/gpu.shared") != "16" || ts.Labels["nvidia.com/gpu.replicas"] != "4" ||
		ts.Labels["nvidia.com/gpu.sharing-strategy"] != "time-slicing" {
		t.Errorf("time-slicing: %v %v", ts.Capacity, ts.Labels)
	}
	hami := nodeByName(t, topo, "hami-0")
	for r, want := range map[string]string{"nvidia.com/gpu": "80", "nvidia.com/gpumem": "655360",
		"nvidia.com/gpucores": "800"} {
		if got := capacity(hami, r); got != want {
			t.Errorf("hami %s = %s, want %s", r, got, want)
		}
	}
}

func TestTinyTopologyParses(t *testing.T) {
	if _, err := LoadTopology("topologies/tiny.yaml"); err != nil {
		t.Fatal(err)
	}
}

func TestGPUUUIDsAreDeterministicAndDistinct(t *testing.T) {
	topo, _ := LoadTopology("")
	a := nodeByName(t, topo, "h100-0").Annotations[AnnoGPUUUIDs]
	b := nodeByName(t, topo, "h100-0").Annotations[AnnoGPUUUIDs]
	if a != b {
		t.Fatal("UUIDs differ between two expansions")
	}
	var uuids []string
	if err := json.Unmarshal([]byte(a), &uuids); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, u := range uuids {
		if !strings.HasPrefix(u, "GPU-") || len(u) != 40 || seen[u] {
			t.Errorf("bad or duplicate uuid %q", u)
		}
		seen[u] = true
	}
	if len(uuids) != 8 || GPUUUID("h100-0", 0) != uuids[0] || GPUUUID("h100-1", 0) == uuids[0] {
		t.Errorf("uuids %v", uuids)
	}
}

func TestInvalidTopologiesGiveErrorsNamingTheField(t *testing.T) {
	cases := map[string]string{
		"pools: []":                                                   "at least one pool",
		"pools: [{name: a, count: 1, cpu: x}]":                        "pools[0] (a).cpu",
		"pools: [{name: A, count: 1}]":                                "DNS-1123",
		"pools: [{name: a, count: 0}]":                                "pools[0] (a).count",
		"pools: [{name: a, count: 1}, {name: a, count: 1}]":           "duplicate pool name",
		"pools: [{name: a, count: 1, colour: red}]":                   "unknown field",
		"pools: [{name: a, count: 1, gpu: {count: 8, memoryMiB: 1}}]": "gpu.product: required",
		"pools: [{name: a, count: 1, gpu: {count: 8, product: X, memoryMiB: 1, sharing: {mode: mps}}}]":                                    "not one of whole",
		"pools: [{name: a, count: 1, gpu: {count: 8, product: X, memoryMiB: 1, sharing: {mode: time-slicing}}}]":                           "replicas",
		"pools: [{name: a, count: 1, gpu: {count: 8, product: X, memoryMiB: 81920, sharing: {mode: mig}}}]":                                "needs a layout",
		"pools: [{name: a, count: 1, gpu: {count: 8, product: X, memoryMiB: 81920, sharing: {mode: mig, migLayout: [4g.40gb, 4g.40gb]}}}]": "compute slices",
		"pools: [{name: a, count: 1, gpu: {count: 8, product: X, memoryMiB: 40960, sharing: {mode: mig, migLayout: [3g.40gb, 3g.40gb]}}}]": "needs 80 GB",
		"pools: [{name: a, count: 1, gpu: {count: 8, product: X, memoryMiB: 81920, sharing: {mode: mig, migLayout: [big]}}}]":              "not a MIG profile",
		"pools: [{name: a, count: 1, gpu: {count: 8, product: X, memoryMiB: 1, sharing: {mode: hami}}}]":                                   "splitCount",
		"pools: [{name: a, count: 1, gpu: {count: 8, product: X, memoryMiB: 1, sharing: {replicas: 4}}}]":                                  "only valid with mode",
		"pools: [{name: a, count: 1, taints: [{key: k, effect: Never}]}]":                                                                  "taints[0].effect",
	}
	for doc, want := range cases {
		_, err := ParseTopology([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want it to mention %q", doc, err, want)
		}
	}
}

func TestLoadTopologyNamesTheFile(t *testing.T) {
	path := t.TempDir() + "/bad.yaml"
	if err := os.WriteFile(path, []byte("pools: [{name: a}]"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadTopology(path)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("error %v does not name %s", err, path)
	}
}

func TestIPAMHandsOutDistinctAddressesAndReusesReleasedOnes(t *testing.T) {
	a, err := newIPAM("10.244.0.0/30")
	if err != nil {
		t.Fatal(err)
	}
	ip1, _ := a.allocate(types.UID("a"))
	ip2, _ := a.allocate(types.UID("b"))
	if ip1 != "10.244.0.1" || ip2 != "10.244.0.2" {
		t.Fatalf("got %s %s", ip1, ip2)
	}
	if again, _ := a.allocate(types.UID("a")); again != ip1 {
		t.Fatalf("same pod got a second address %s", again)
	}
	if _, err := a.allocate(types.UID("c")); err == nil {
		t.Fatal("a /30 has only two pod addresses")
	}
	a.release(types.UID("a"))
	if ip, err := a.allocate(types.UID("c")); err != nil || ip != ip1 {
		t.Fatalf("released address not reused: %s %v", ip, err)
	}
}
