package clientset_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/watcher"
	"github.com/ipvsplane/ipvsplane/daemon/watcher/clientset"
	"github.com/ipvsplane/ipvsplane/dataplane/model"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
)

// Feeds a tracker from a clientset (here client-go's fake, holding one
// Service) until the Services and EndpointSlices are listed.
func Example() {
	cs := fake.NewClientset(&v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web"},
		Spec: v1.ServiceSpec{
			Type: v1.ServiceTypeClusterIP, ClusterIP: "10.96.0.80", ClusterIPs: []string{"10.96.0.80"},
			Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}},
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tracker := watcher.NewTracker(watcher.TrackerConfig{Node: model.Node{Name: "node-a"}})
	done := make(chan error)
	go func() {
		done <- watcher.WatchKubernetes(ctx, watcher.KubernetesConfig{Client: clientset.New(cs), Tracker: tracker})
	}()
	for !tracker.Synced() {
		time.Sleep(10 * time.Millisecond)
	}
	for _, sp := range tracker.Sync().State.Services {
		fmt.Printf("%s %s %v:%d\n", sp.Name, sp.Protocol, sp.ClusterIPs, sp.Port)
	}
	cancel()
	<-done
	// Output:
	// demo/web:http tcp [10.96.0.80]:80
}
