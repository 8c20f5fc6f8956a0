package main

import (
	"flag"
	"fmt"
	"log"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// runEtcd runs a single-member embedded etcd until SIGTERM/SIGINT.
func runEtcd(args []string) int {
	fs := flag.NewFlagSet("etcd", flag.ContinueOnError)
	dataDir := fs.String("data-dir", "", "etcd data directory (required)")
	clientURL := fs.String("listen-client-url", "http://127.0.0.1:2379", "client URL")
	peerURL := fs.String("listen-peer-url", "http://127.0.0.1:2380", "peer URL")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dataDir == "" {
		fmt.Fprintln(os.Stderr, "etcd: --data-dir is required")
		return 2
	}
	cu, err := url.Parse(*clientURL)
	if err != nil {
		log.Printf("etcd: bad --listen-client-url: %v", err)
		return 2
	}
	pu, err := url.Parse(*peerURL)
	if err != nil {
		log.Printf("etcd: bad --listen-peer-url: %v", err)
		return 2
	}

	cfg := embed.NewConfig()
	cfg.Name = "kubesim"
	cfg.Dir = *dataDir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "warn"
	cfg.UnsafeNoFsync = true // throwaway data
	cfg.QuotaBackendBytes = 8 << 30
	cfg.AutoCompactionMode, cfg.AutoCompactionRetention = "periodic", "1"
	cfg.WatchProgressNotifyInterval = 5 * time.Second

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		log.Printf("etcd: start: %v", err)
		return 1
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
		log.Printf("etcd: ready on %s", cu.String())
	case <-time.After(60 * time.Second):
		e.Server.Stop()
		log.Print("etcd: not ready after 60s")
		return 1
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	select {
	case s := <-sig:
		log.Printf("etcd: %v, stopping", s)
	case err := <-e.Err():
		log.Printf("etcd: %v", err)
		return 1
	}
	return 0
}
