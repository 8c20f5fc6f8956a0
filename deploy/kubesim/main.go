// Command kubesim runs a real Kubernetes control plane (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler) on 127.0.0.1 with simulated GPU nodes.
//
// It is a multi-call binary: `kubesim up` re-executes itself once per component, because
// the upstream component commands install process-wide signal handlers that may only be
// set up once per process.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	_ "time/tzdata" // CronJob time zones, as in upstream kube-apiserver

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/component-base/version"
	apiserverapp "k8s.io/kubernetes/cmd/kube-apiserver/app"
	kcmapp "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	proxyapp "k8s.io/kubernetes/cmd/kube-proxy/app"
	schedapp "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubeletapp "k8s.io/kubernetes/cmd/kubelet/app"
)

const usage = `usage: kubesim COMMAND [flags]

commands:
  up --data-dir DIR [--topology FILE]   run the whole cluster until SIGTERM/SIGINT
  topology [--topology FILE]            validate a topology file and print the nodes it makes
  version                               print the Kubernetes version
components (started by "up"):
  etcd, kube-apiserver, kube-controller-manager, kube-scheduler, fake-kubelet
  with --real-nodes: netns-holder, realnode (containerd + kubelet), kubelet, kube-proxy
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	name, args := os.Args[1], os.Args[2:]
	// Components parse os.Args in places; make it look like a normal argv for them.
	os.Args = append([]string{filepath.Base(os.Args[0]) + "-" + name}, args...)
	os.Exit(run(name, args))
}

func run(name string, args []string) int {
	switch name {
	case "up":
		return runUp(args)
	case "etcd":
		return runEtcd(args)
	case "fake-kubelet":
		return runFakeKubelet(args)
	case "kube-apiserver":
		c := apiserverapp.NewAPIServerCommand() // sets up the process signal handler itself
		c.SetArgs(args)
		return cli.Run(c)
	case "kube-controller-manager":
		c := kcmapp.NewControllerManagerCommand()
		c.SetArgs(args)
		return cli.Run(c)
	case "kube-scheduler":
		c := schedapp.NewSchedulerCommand() // sets up the process signal handler itself
		c.SetArgs(args)
		return cli.Run(c)
	case "kubelet":
		c := kubeletapp.NewKubeletCommand(context.Background())
		c.SetArgs(args)
		return cli.Run(c)
	case "kube-proxy":
		c := proxyapp.NewProxyCommand()
		c.SetArgs(args)
		return cli.Run(c)
	case "realnode":
		return runRealNode(args)
	case "netns-holder":
		return runNetnsHolder(args)
	case "topology":
		return runTopology(args)
	case "version", "--version", "-version":
		fmt.Println(kubeletVersion())
		return 0
	case "help", "-h", "--help":
		fmt.Print(usage)
		return 0
	}
	fmt.Fprintf(os.Stderr, "kubesim: unknown command %q\n%s", name, usage)
	return 2
}

func kubeletVersion() string {
	return version.Get().GitVersion
}

func runTopology(args []string) int {
	fs := flag.NewFlagSet("topology", flag.ContinueOnError)
	path := fs.String("topology", "", "topology file (default: the embedded default topology)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	t, err := LoadTopology(*path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubesim:", err)
		return 1
	}
	for _, n := range t.Nodes() {
		fmt.Println(n.Summary())
	}
	return 0
}
