package controlplane_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/ipvsplane/ipvsplane/daemon/internal/testing/controlplane"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Start a control plane, list its namespaces, and restart its API server.
// Tests use New or Shared instead, which stop it for them.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cp, err := controlplane.Start(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer cp.Close()

	client, err := kubernetes.NewForConfig(cp.RESTConfig())
	if err != nil {
		log.Fatal(err)
	}
	list, err := client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		log.Fatal(err)
	}
	for _, ns := range list.Items {
		fmt.Println(ns.Name)
	}

	cp.StopAPIServer()
	if err := cp.StartAPIServer(ctx); err != nil {
		log.Fatal(err)
	}
}
