package main

// The network of the real nodes. Every real node's kubelet, containerd and pods, kube-proxy and
// CoreDNS live in one private network namespace (held open by a `netns-holder` child), joined
// to the host by one veth pair. Nothing is written to the host's iptables or sysctls: the
// kernel keeps both per network namespace, and the namespace, its veth pair and the route
// to the pods go away with the holder.
//
//	host (slot N)                 node network namespace
//	ks-<id> 10.250.N.1/24  <──>  eth0 10.250.N.2/24 (default route via 10.250.N.1)
//	route 10.251.16N.0/20 via      lo: 10.250.N.10 (CoreDNS), 10.250.N.11… (node IPs)
//	  10.250.N.2                   bridge ksbr<i> 10.251.16N+i.1/24 per node (CNI bridge)
//	                               forwarder 10.250.N.2:6443 → apiserver on 127.0.0.1
//
// Pods of different nodes reach each other through the namespace's routing between the nodes'
// bridges, as through a flat pod network; Service ClusterIPs are kube-proxy's iptables rules
// inside the namespace; names resolve through CoreDNS at 10.250.0.10 (the kubelets'
// clusterDNS at 10.250.N.10).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const (
	maxRealNodes = 8
	maxRealSlots = 16
	realAPIPort  = 6443
)

// realNet are the addresses of one cluster's node network. Several clusters with real nodes
// may run on one machine (parallel test processes): each takes a free slot N, with
// 10.250.N.0/24 for the link to the host, the nodes and DNS, and 10.251.16N.0/20 for pods.
type realNet struct{ slot int }

func (r realNet) HostIP() string      { return fmt.Sprintf("10.250.%d.1", r.slot) }
func (r realNet) NSIP() string        { return fmt.Sprintf("10.250.%d.2", r.slot) }
func (r realNet) DNSIP() string       { return fmt.Sprintf("10.250.%d.10", r.slot) }
func (r realNet) NodeIP(i int) string { return fmt.Sprintf("10.250.%d.%d", r.slot, 11+i) }
func (r realNet) PodSupernet() string { return fmt.Sprintf("10.251.%d.0/20", 16*r.slot) }
func (r realNet) PodSubnet(i int) string {
	return fmt.Sprintf("10.251.%d.0/24", 16*r.slot+i)
}
func (r realNet) PodGateway(i int) string {
	return fmt.Sprintf("10.251.%d.1", 16*r.slot+i)
}

// hostVethName is unique per data dir (at most 15 characters, as the kernel wants).
func hostVethName(dataDir string) string {
	sum := sha256.Sum256([]byte(dataDir))
	return "ks-" + hex.EncodeToString(sum[:])[:8]
}

func runCmd(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// inNetns runs a command inside the network namespace of pid.
func inNetns(pid int, name string, args ...string) error {
	return runCmd("nsenter", append([]string{fmt.Sprintf("--net=/proc/%d/ns/net", pid), "--", name}, args...)...)
}

// hostAddressTaken reports whether some interface of the host already has ip (another
// kubesim with real nodes, or a network of the machine's own).
func hostAddressTaken(ip string) (string, bool) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return "", false
	}
	for _, ifc := range ifaces {
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.String() == ip {
				return ifc.Name, true
			}
		}
	}
	return "", false
}

// freeRealSlot picks the first slot whose host address no interface has (a slot's addresses
// belong to the cluster that took it until its veth goes away).
func freeRealSlot() (realNet, error) {
	for slot := 0; slot < maxRealSlots; slot++ {
		if _, taken := hostAddressTaken(realNet{slot}.HostIP()); !taken {
			return realNet{slot}, nil
		}
	}
	return realNet{}, fmt.Errorf("all %d node-network slots (10.250.0-%d.1 on the host) are taken by other "+
		"kubesims with real nodes", maxRealSlots, maxRealSlots-1)
}

// setupRealNetwork wires the holder's namespace to the host. nodes is the number of real
// nodes (one address each on the namespace's loopback).
func setupRealNetwork(r realNet, holderPID int, hostIf string, nodes int) error {
	if ifc, taken := hostAddressTaken(r.HostIP()); taken {
		return fmt.Errorf("the host already has %s (on %s): another kubesim with real nodes took this slot",
			r.HostIP(), ifc)
	}
	steps := [][]string{
		{"ip", "link", "add", hostIf, "type", "veth", "peer", "name", "eth0", "netns", fmt.Sprint(holderPID)},
		{"ip", "addr", "add", r.HostIP() + "/24", "dev", hostIf},
		{"ip", "link", "set", hostIf, "up"},
	}
	for _, st := range steps {
		if err := runCmd(st[0], st[1:]...); err != nil {
			return err
		}
	}
	ns := [][]string{
		{"ip", "link", "set", "lo", "up"},
		{"ip", "addr", "add", r.NSIP() + "/24", "dev", "eth0"},
		{"ip", "link", "set", "eth0", "up"},
		{"ip", "route", "add", "default", "via", r.HostIP()},
		{"ip", "addr", "add", r.DNSIP() + "/32", "dev", "lo"},
		{"sysctl", "-q", "-w", "net.ipv4.ip_forward=1"},
	}
	for i := 0; i < nodes; i++ {
		ns = append(ns, []string{"ip", "addr", "add", r.NodeIP(i) + "/32", "dev", "lo"})
	}
	for _, st := range ns {
		if err := inNetns(holderPID, st[0], st[1:]...); err != nil {
			return err
		}
	}
	// The host reaches pods (the portal's gateway, tests) through the namespace. The route
	// lives on the veth and goes with it.
	return runCmd("ip", "route", "add", r.PodSupernet(), "via", r.NSIP(), "dev", hostIf)
}

// listenInNetns opens a TCP listener inside the network namespace of pid. The socket belongs
// to the namespace it was created in; the thread that created it is left locked so that it
// ends with its goroutine instead of serving other goroutines from the wrong namespace.
func listenInNetns(pid int, addr string) (net.Listener, error) {
	type result struct {
		l   net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with this goroutine
		fd, err := unix.Open(fmt.Sprintf("/proc/%d/ns/net", pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			ch <- result{nil, err}
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			ch <- result{nil, fmt.Errorf("setns: %w", err)}
			return
		}
		l, err := net.Listen("tcp", addr)
		ch <- result{l, err}
	}()
	r := <-ch
	return r.l, r.err
}

// forwardTCP accepts on l and relays every connection to target (TLS passes through untouched:
// the nodes verify the apiserver's own certificate).
func forwardTCP(ctx context.Context, l net.Listener, target string) {
	go func() {
		<-ctx.Done()
		l.Close()
	}()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() == nil {
				log.Printf("node network: forwarder to %s: %v", target, err)
			}
			return
		}
		go func(c net.Conn) {
			defer c.Close()
			u, err := net.DialTimeout("tcp", target, 5*time.Second)
			if err != nil {
				return
			}
			defer u.Close()
			var wg sync.WaitGroup
			wg.Add(2)
			relay := func(dst, src net.Conn) {
				defer wg.Done()
				_, _ = io.Copy(dst, src)
				if tc, ok := dst.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
				}
			}
			go relay(u, c)
			go relay(c, u)
			wg.Wait()
		}(c)
	}
}

// runNetnsHolder keeps a network namespace alive until it is told to stop.
func runNetnsHolder(_ []string) int {
	sig := make(chan os.Signal, 1)
	signalNotify(sig)
	<-sig
	return 0
}

// netnsAttr makes a child start in a new network namespace (the holder).
func netnsAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Cloneflags: syscall.CLONE_NEWNET}
}
