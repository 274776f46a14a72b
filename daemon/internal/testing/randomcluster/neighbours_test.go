package randomcluster

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// withNeighbours is seed's cluster of n Services with every kind of
// neighbour.
func withNeighbours(seed uint64, n int) *Cluster {
	c := Generate(seed, DefaultEnv(), n)
	c.AddNeighbours(NeighbourKinds)
	return c
}

// TestNeighboursAreDeterministic: the seed gives the neighbours too, and
// adding them changes nothing else of the seed's case.
func TestNeighboursAreDeterministic(t *testing.T) {
	a, b := withNeighbours(7, 30), withNeighbours(7, 30)
	if d := cmp.Diff(a.Neighbours, b.Neighbours); d != "" {
		t.Fatalf("seed 7 gave two sets of neighbours:\n%s", d)
	}
	if cmp.Equal(a.Neighbours, withNeighbours(8, 30).Neighbours) {
		t.Error("seeds 7 and 8 gave the same neighbours")
	}
	plain := Generate(7, DefaultEnv(), 30)
	plain.Neighbours = a.Neighbours
	ya, err := a.YAML()
	if err != nil {
		t.Fatal(err)
	}
	if yp, _ := plain.YAML(); !bytes.Equal(yp, ya) {
		t.Errorf("adding neighbours changed the seed's case:\n%s", cmp.Diff(string(yp), string(ya)))
	}
}

// TestNeighboursCover: a few seeds' neighbours have every kind and
// variant, and host ports and Docker ports on Services' ports.
func TestNeighboursCover(t *testing.T) {
	seen := map[string]bool{}
	for seed := range uint64(10) {
		c := withNeighbours(seed, 40)
		n := c.Neighbours
		for _, h := range n.HostPorts {
			seen["hostport="+string(h.Protocol)] = true
			seen["hostport-family="+string(h.Family)] = true
			seen[fmt.Sprintf("hostport-on-service=%v", h.Service != "")] = true
			if h.Service != "" && !servesPort(c, h.Service, h.Protocol, h.Port, h.Family) {
				t.Errorf("seed %d: host port %s/%d %s is not a port of %s", seed, h.Protocol, h.Port, h.Family, h.Service)
			}
		}
		seen[fmt.Sprintf("portmap-prepend=%v", n.PortmapPrepend)] = true
		for _, d := range n.DockerPorts {
			seen[fmt.Sprintf("docker-on-service=%v", d.Service != "")] = true
			if d.Service != "" && !servesPort(c, d.Service, corev1.ProtocolTCP, d.Port, corev1.IPv4Protocol) {
				t.Errorf("seed %d: Docker port %d is not a TCP port of %s", seed, d.Port, d.Service)
			}
		}
		seen[fmt.Sprintf("forward-accept-families=%d", len(n.ForwardDrop.AcceptFamilies))] = true
		for _, l := range append(slices.Clone(n.NFTablesLeftovers), n.IPTablesLeftovers...) {
			seen["leftover="+string(l.What)] = true
		}
		seen[fmt.Sprintf("installer-config=%v", n.InstallerConfig)] = true
	}
	for _, w := range []string{
		"hostport=TCP", "hostport=UDP", "hostport-family=IPv4", "hostport-family=IPv6",
		"hostport-on-service=true", "hostport-on-service=false", "portmap-prepend=true", "portmap-prepend=false",
		"docker-on-service=true", "docker-on-service=false", "forward-accept-families=1", "forward-accept-families=2",
		"leftover=cluster-ip", "leftover=node-port", "leftover=no-endpoints", "installer-config=true",
	} {
		if !seen[w] {
			t.Errorf("no seed of 0-9 has %s", w)
		}
	}
}

// servesPort reports whether the Service has the port, in the family.
func servesPort(c *Cluster, name string, proto corev1.Protocol, port int32, f corev1.IPFamily) bool {
	for _, s := range c.Services {
		if s.Service.Name == name {
			return slices.Contains(c.Env.serviceFamilies(&s.Service.Spec), f) && slices.ContainsFunc(s.Service.Spec.Ports, func(p corev1.ServicePort) bool { return p.Protocol == proto && p.Port == port })
		}
	}
	return false
}

// TestNeighboursKinds: only the kinds asked for are generated.
func TestNeighboursKinds(t *testing.T) {
	c := Generate(3, DefaultEnv(), 20)
	c.AddNeighbours([]NeighbourKind{DockerNeighbour})
	n := c.Neighbours
	if len(n.DockerPorts) == 0 || len(n.HostPorts) > 0 || n.ForwardDrop != nil || len(n.NFTablesLeftovers) > 0 || len(n.IPTablesLeftovers) > 0 || n.InstallerConfig {
		t.Errorf("Docker alone gave %+v", n)
	}
	for in, want := range map[string][]NeighbourKind{
		"docker,hostport": {DockerNeighbour, HostPortNeighbour},
		"default":         DefaultNeighbourKinds,
		"all,docker":      NeighbourKinds,
	} {
		got, err := ParseNeighbourKinds(in)
		if err != nil || !cmp.Equal(sortedKinds(got), sortedKinds(want)) {
			t.Errorf("ParseNeighbourKinds(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseNeighbourKinds("hostport,dockerd"); err == nil || !strings.Contains(err.Error(), "dockerd") {
		t.Errorf("an unknown kind: %v", err)
	}
}

func sortedKinds(k []NeighbourKind) []NeighbourKind {
	k = slices.Clone(k)
	slices.Sort(k)
	return k
}

// TestNeighboursYAMLRoundTrip: the reproduction carries the neighbours,
// whole even when it names only some Services, and reads them back.
func TestNeighboursYAMLRoundTrip(t *testing.T) {
	c := withNeighbours(5, 20)
	out, err := c.YAML(c.Services[1].Service.Name)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte("\nkind: Neighbours\n")) {
		t.Fatalf("no Neighbours document:\n%s", out)
	}
	back, err := ParseYAML(out, DefaultEnv())
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(c.Neighbours, back.Neighbours); d != "" {
		t.Errorf("the neighbours read back differ:\n%s", d)
	}
	// Without neighbours, none come back.
	plain, _ := Generate(5, DefaultEnv(), 3).YAML()
	if back, err := ParseYAML(plain, DefaultEnv()); err != nil || back.Neighbours != nil {
		t.Errorf("a case without neighbours read back %+v, %v", back.Neighbours, err)
	}
	bad := bytes.Replace(out, []byte("\nkind: Neighbours\n"), []byte("\nkind: Neighbours\nhostPortz: []\n"), 1)
	if _, err := ParseYAML(bad, DefaultEnv()); err == nil {
		t.Error("a Neighbours document with an unknown field was read")
	}
}

// TestInstallerConfig: with the installer's file, the configuration has
// kubeadm's fields, removed ones included, under the generated and the
// test's settings.
func TestInstallerConfig(t *testing.T) {
	c := Generate(1, DefaultEnv(), 0)
	c.Config.IPVS.Scheduler = "sh"
	c.AddNeighbours([]NeighbourKind{InstallerConfigNeighbour})
	out, err := c.ConfigYAML([]byte("conntrack:\n  maxPerCore: 0\nhealthzBindAddress: 127.0.0.1:10256\n"))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := yaml.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	ipvs, conntrack := got["ipvs"].(map[string]any), got["conntrack"].(map[string]any)
	if got["udpIdleTimeout"] != "250ms" || got["resourceContainer"] != "/kube-proxy" || got["bindAddress"] != "0.0.0.0" {
		t.Errorf("kubeadm's fields are missing:\n%s", out)
	}
	if got["mode"] != "ipvs" || ipvs["scheduler"] != "sh" || ipvs["syncPeriod"] != "30s" {
		t.Errorf("the generated settings do not go over kubeadm's:\n%s", out)
	}
	if conntrack["maxPerCore"] != float64(0) || conntrack["min"] != float64(131072) || got["healthzBindAddress"] != "127.0.0.1:10256" {
		t.Errorf("the test's settings do not go over kubeadm's:\n%s", out)
	}
	c.Neighbours = nil
	plain, _ := c.ConfigYAML(nil)
	if bytes.Contains(plain, []byte("udpIdleTimeout")) {
		t.Errorf("without the installer's file:\n%s", plain)
	}
}
