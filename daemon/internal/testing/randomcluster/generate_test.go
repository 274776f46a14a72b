package randomcluster

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/yaml"
)

// TestGenerateIsDeterministic: a seed is a case's whole reproduction.
func TestGenerateIsDeterministic(t *testing.T) {
	a, b := Generate(7, DefaultEnv(), 30), Generate(7, DefaultEnv(), 30)
	ya, err := a.YAML()
	if err != nil {
		t.Fatal(err)
	}
	yb, _ := b.YAML()
	if !bytes.Equal(ya, yb) {
		t.Fatalf("seed 7 gave two clusters:\n%s", cmp.Diff(string(ya), string(yb)))
	}
	yc, _ := Generate(8, DefaultEnv(), 30).YAML()
	if bytes.Equal(ya, yc) {
		t.Fatal("seeds 7 and 8 gave the same cluster")
	}
}

// TestGenerateCoversEveryShape: a few seeds' Services together cover
// every shape the package promises.
func TestGenerateCoversEveryShape(t *testing.T) {
	want := []string{
		"type=ClusterIP", "type=NodePort", "type=LoadBalancer", "headless",
		"family-policy=SingleStack", "family-policy=PreferDualStack", "family-policy=RequireDualStack",
		"family-0=IPv4", "family-0=IPv6", "family-1=IPv4", "family-1=IPv6",
		"ports=several", "protocol=TCP", "protocol=UDP", "protocol=SCTP", "target-port=named",
		"affinity=ClientIP", "affinity-timeout", "external-ips", "etp=Local", "itp=Local",
		"traffic-distribution=PreferClose", "traffic-distribution=PreferSameZone", "traffic-distribution=PreferSameNode",
		"lb-no-node-ports", "source-range=0.0.0.0/0", "source-range=::/0", "source-range=IPv4", "source-range=IPv6",
		"lb-hostname", "lb-ipmode=unset", "lb-ipmode=VIP", "lb-ipmode=Proxy",
		"label=" + LabelServiceProxyName, "label=" + LabelHeadless, "slice-label=headless",
		"no-endpoints", "slice-family=IPv4", "slice-family=IPv6",
		"endpoint-node=kp-node", "endpoint-node=kp-other", "endpoint-node=unset",
		"hints=zones", "hints=nodes", "endpoint-in-several-slices",
	}
	for _, r := range []string{"nil", "true", "false"} {
		for _, s := range []string{"nil", "true", "false"} {
			for _, term := range []string{"nil", "true", "false"} {
				want = append(want, "conditions=ready:"+r+",serving:"+s+",terminating:"+term)
			}
		}
	}
	seen := map[string]int{}
	for seed := range uint64(6) {
		for _, s := range Generate(seed, DefaultEnv(), 50).Services {
			for _, shape := range s.Shapes() {
				seen[shape]++
			}
		}
	}
	for _, w := range want {
		if seen[w] == 0 {
			t.Errorf("no Service of seeds 0-5 has shape %s", w)
		}
	}
}

// TestGenerateNodeSettings: the node settings vary over every option the
// package promises.
func TestGenerateNodeSettings(t *testing.T) {
	seen := map[string]bool{}
	for seed := range uint64(60) {
		c := Generate(seed, DefaultEnv(), 0).Config
		seen["scheduler="+c.IPVS.Scheduler] = true
		seen["detect-local="+string(c.DetectLocalMode)] = true
		seen["node-port-addresses="+strings.Join(c.NodePortAddresses, ",")] = true
		seen["strict-arp="+map[bool]string{true: "on", false: "off"}[c.IPVS.StrictARP]] = true
		seen["masquerade-all="+map[bool]string{true: "on", false: "off"}[c.IPTables.MasqueradeAll]] = true
		seen["exclude-cidrs="+map[bool]string{true: "some", false: "none"}[len(c.IPVS.ExcludeCIDRs) > 0]] = true
	}
	for _, w := range []string{
		"scheduler=", "scheduler=sh", "detect-local=NodeCIDR", "detect-local=BridgeInterface",
		"detect-local=InterfaceNamePrefix", "detect-local=ClusterCIDR", "node-port-addresses=primary",
		"node-port-addresses=", "strict-arp=on", "strict-arp=off", "masquerade-all=on", "masquerade-all=off",
		"exclude-cidrs=some", "exclude-cidrs=none",
	} {
		if !seen[w] {
			t.Errorf("no seed of 0-59 has %s", w)
		}
	}
}

// TestGenerateConsistent checks what the API server would not: each
// Service's external and load-balancer addresses are its own, slices
// belong to their Service and carry its port names, endpoints are of the
// slice's family and from the node's pod addresses.
func TestGenerateConsistent(t *testing.T) {
	env := DefaultEnv()
	pods := map[string]bool{}
	for _, local := range []bool{true, false} {
		for _, addrs := range env.PodAddrs(local) {
			for _, a := range addrs {
				pods[a.String()] = true
			}
		}
	}
	for seed := range uint64(10) {
		c := Generate(seed, env, 60)
		owner := map[string]string{}
		for _, s := range c.Services {
			svc := s.Service
			addrs := append([]string{}, svc.Spec.ExternalIPs...)
			for _, in := range svc.Status.LoadBalancer.Ingress {
				if in.IP != "" {
					addrs = append(addrs, in.IP)
				}
			}
			for _, a := range addrs {
				if o, ok := owner[a]; ok {
					t.Errorf("seed %d: %s and %s both have address %s", seed, o, svc.Name, a)
				}
				owner[a] = svc.Name
			}
			names := map[string]bool{}
			for _, p := range svc.Spec.Ports {
				names[p.Name] = true
			}
			for _, sl := range s.Slices {
				if sl.Labels[discoveryv1.LabelServiceName] != svc.Name {
					t.Errorf("seed %d: slice %s is not labelled for %s", seed, sl.Name, svc.Name)
				}
				for _, p := range sl.Ports {
					if !names[*p.Name] {
						t.Errorf("seed %d: slice %s has port %q that %s lacks", seed, sl.Name, *p.Name, svc.Name)
					}
				}
				for _, ep := range sl.Endpoints {
					a := ep.Addresses[0]
					if !pods[a] || strings.Contains(a, ":") != (sl.AddressType == discoveryv1.AddressTypeIPv6) {
						t.Errorf("seed %d: slice %s (%s) has endpoint %s", seed, sl.Name, sl.AddressType, a)
					}
				}
			}
		}
	}
}

// TestYAMLRoundTrip: the reproduction YAML reads back into the same
// case.
func TestYAMLRoundTrip(t *testing.T) {
	c := Generate(3, DefaultEnv(), 10)
	out, err := c.YAML(c.Services[2].Service.Name)
	if err != nil {
		t.Fatal(err)
	}
	// The seed's comment, then one document per object.
	docs := strings.Split(string(out), "\n---\n")[1:]
	if len(docs) != 3+len(c.Services[2].Slices) {
		t.Fatalf("%d documents, want config, node, service and %d slices:\n%s", len(docs), len(c.Services[2].Slices), out)
	}
	back, err := ParseYAML(out, DefaultEnv())
	if err != nil {
		t.Fatal(err)
	}
	if back.Seed != c.Seed || len(back.Services) != 1 {
		t.Fatalf("read back seed %d with %d Services, want seed %d with 1", back.Seed, len(back.Services), c.Seed)
	}
	for what, pair := range map[string][2]any{
		"configuration": {c.Config, back.Config},
		"Node":          {c.Node, back.Node},
		"Service":       {c.Services[2], back.Services[0]},
	} {
		if d := cmp.Diff(pair[0], pair[1]); d != "" {
			t.Errorf("the %s read back differs:\n%s", what, d)
		}
	}
	if _, err := ParseYAML(out[strings.Index(string(out), "\n"):], DefaultEnv()); err == nil {
		t.Error("a case without its seed line was read")
	}
}

// TestConfigYAML: the generated settings without zero values, the test's
// own merged over them.
func TestConfigYAML(t *testing.T) {
	c := Generate(1, DefaultEnv(), 0)
	c.Config.IPVS.Scheduler, c.Config.IPVS.StrictARP, c.Config.NodePortAddresses = "sh", true, []string{"primary"}
	out, err := c.ConfigYAML([]byte("ipvs:\n  syncPeriod: 30s\nconntrack:\n  maxPerCore: 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := yaml.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	ipvs := got["ipvs"].(map[string]any)
	if ipvs["scheduler"] != "sh" || ipvs["strictARP"] != true || ipvs["syncPeriod"] != "30s" {
		t.Errorf("ipvs: %v", ipvs)
	}
	if got["conntrack"].(map[string]any)["maxPerCore"] != float64(0) {
		t.Errorf("the test's explicit zero was lost:\n%s", out)
	}
	if _, ok := got["winkernel"]; ok || got["kind"] != "KubeProxyConfiguration" || got["mode"] != "ipvs" {
		t.Errorf("unexpected file:\n%s", out)
	}
}
