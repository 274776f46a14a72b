package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/ipvsplane/ipvsplane/daemon/internal/events"
	"github.com/ipvsplane/ipvsplane/daemon/watcher"
	"go.uber.org/zap"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// restConfig is the API server's address and credentials: through
// --kubeconfig or --master when given, else the pod's service account.
func restConfig(o *options) (*rest.Config, error) {
	cc := o.kp.ClientConnection
	var cfg *rest.Config
	var err error
	if cc.Kubeconfig == "" && o.master == "" {
		cfg, err = rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("no --kubeconfig or --master, and not running in a pod: %w", err)
		}
	} else if cfg, err = clientcmd.BuildConfigFromFlags(o.master, cc.Kubeconfig); err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = cc.QPS, int(cc.Burst)
	cfg.ContentType, cfg.AcceptContentTypes = cc.ContentType, cc.AcceptContentTypes
	cfg.UserAgent = "ipvsplane"
	return cfg, nil
}

// kubeClient connects to the API server (see restConfig).
func kubeClient(o *options) (*watcher.Client, error) {
	cfg, err := restConfig(o)
	if err != nil {
		return nil, err
	}
	return watcher.NewClient(cfg)
}

// kubeEventSink records Events in the API server (see restConfig).
func kubeEventSink(o *options) (events.Sink, error) {
	cfg, err := restConfig(o)
	if err != nil {
		return nil, err
	}
	return events.NewRESTSink(cfg)
}

// watch feeds the tracker from the configured source until ctx is done,
// through client with the Kubernetes source (nil makes one). Objects that
// cannot be used are skipped, and entries of objects left out; each is
// logged, and each object version with any is passed to invalid, if not
// nil.
func (a *app) watch(ctx context.Context, log *zap.Logger, o *options, client *watcher.Client, tracker *watcher.Tracker, nodeName string, invalid func(error)) error {
	onError := func(err error) {
		for _, e := range watcher.Unjoin(err) {
			msg := "skipped"
			if ie, ok := errors.AsType[*watcher.InvalidError](e); ok && ie.Entry {
				msg = "left out"
			}
			log.Warn(msg, zap.Error(e))
		}
		if invalid != nil {
			invalid(err)
		}
	}
	var err error
	switch o.source {
	case sourceFiles:
		err = watcher.WatchFiles(ctx, watcher.FilesConfig{Dir: o.manifests, Tracker: tracker, OnError: onError})
	default:
		if client == nil {
			if client, err = a.kubeClient(o); err != nil {
				return err
			}
		}
		err = watcher.WatchKubernetes(ctx, watcher.KubernetesConfig{
			Client: client, Tracker: tracker, NodeName: nodeName,
			OnError: onError,
		})
	}
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil
	}
	return err
}
