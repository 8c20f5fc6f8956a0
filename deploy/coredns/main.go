// Command coredns is CoreDNS with only the plugins the cluster's DNS needs.
//
// The upstream binary links every plugin in its plugin.cfg (cloud DNS providers, etcd, dnstap,
// ...). This one registers a short list instead, in the execution order CoreDNS defines
// (core/dnsserver/zdirectives.go), and then runs CoreDNS's own main.
//
// A few more plugins are linked because these import them (metadata, transfer, prometheus,
// dnstap, debug), but a Corefile can name only the directives below: any other is an
// "Unknown directive" error at startup.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	// Each import registers one plugin (its init calls plugin.Register).
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/ready"
)

// directives is the plugin chain order: a plugin sees a query before every plugin after it.
// It must stay a subsequence of the upstream order.
var directives = []string{
	"bind",
	"ready",
	"health",
	"errors",
	"log",
	"cache",
	"kubernetes",
	"loop",
	"forward",
}

func init() {
	dnsserver.Directives = directives
}

func main() {
	coremain.Run()
}
