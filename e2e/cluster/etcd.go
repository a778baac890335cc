// etcd.go: an embedded single-member etcd on free 127.0.0.1 ports.
package main

import (
	"fmt"
	"net/url"
	"strconv"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// startEtcd starts etcd with its data in dir and returns it once it serves.
func startEtcd(dir, logFile string) (*embed.Etcd, string, error) {
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ { // free-port picking races; retry
		cfg := embed.NewConfig()
		cfg.Name = "e2e"
		cfg.Dir = dir
		cfg.UnsafeNoFsync = true
		cfg.LogLevel = "warn"
		cfg.LogOutputs = []string{logFile}
		cu := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(freePort())}
		pu := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(freePort())}
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
		cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
		e, err := embed.StartEtcd(cfg)
		if err != nil {
			lastErr = err
			continue
		}
		select {
		case <-e.Server.ReadyNotify():
			return e, cu.String(), nil
		case err := <-e.Err():
			e.Close()
			lastErr = err
		case <-time.After(time.Minute):
			e.Close()
			return nil, "", fmt.Errorf("etcd not ready after 1m")
		}
	}
	return nil, "", fmt.Errorf("etcd: %w", lastErr)
}
