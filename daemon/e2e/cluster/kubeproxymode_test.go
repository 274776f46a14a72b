//go:build clustertest

package cluster

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// nodeRules are names of what the proxies leave in a node's rules, read
// with the node's own programs: each KUBE-* chain iptables-save and
// ip6tables-save list ("ip nat KUBE-SERVICES"), and each nftables table
// that is not one of iptables' own ("table ip kube-proxy").
type nodeRules map[string]bool

// kubeletChains are the KUBE-* chains kubelet makes (kube-proxy's iptables
// mode makes KUBE-FIREWALL too, and leaves it at --cleanup): not
// kube-proxy's leftovers.
var kubeletChains = []string{"KUBE-FIREWALL", "KUBE-KUBELET-CANARY", "KUBE-IPTABLES-HINT"}

// iptablesTables are the nftables tables of iptables' nf_tables flavour.
var iptablesTables = []string{"filter", "nat", "mangle", "raw", "security"}

// kubeProxyMarks are, per mode, prefixes that some of its leftovers must
// have, so that "gone" and "restored" say something about the mode.
var kubeProxyMarks = map[string][]string{
	"ipvs":     {"ip nat KUBE-SERVICES"},
	"iptables": {"ip nat KUBE-SERVICES", "ip nat KUBE-SVC-", "ip nat KUBE-SEP-"},
	"nftables": {"table ip kube-proxy", "table ip6 kube-proxy"},
}

// readRulesScript prints iptables-save, ip6tables-save and nft list tables
// of the node, through its root mounted at /host (nodeRoot).
const readRulesScript = `chroot /host /usr/sbin/iptables-save && echo '--- ip6' &&
chroot /host /usr/sbin/ip6tables-save && echo '--- nft' && chroot /host /usr/sbin/nft list tables`

// parseNodeRules reads readRulesScript's output.
func parseNodeRules(out string) nodeRules {
	rules := nodeRules{}
	family, table := "ip", ""
	nft := false
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "--- ip6":
			family = "ip6"
		case line == "--- nft":
			nft = true
		case nft:
			f := strings.Fields(line)
			if len(f) == 3 && f[0] == "table" && !slices.Contains(iptablesTables, f[2]) {
				rules[line] = true
			}
		case strings.HasPrefix(line, "*"):
			table = line[1:]
		case strings.HasPrefix(line, ":KUBE-"):
			chain, _, _ := strings.Cut(line[1:], " ")
			if !slices.Contains(kubeletChains, chain) {
				rules[family+" "+table+" "+chain] = true
			}
		}
	}
	return rules
}

// rules reads the rules of the node tk.nodes[i].
func (tk *takeover) rules(ctx context.Context, i int) (nodeRules, error) {
	out, err := tk.c.exec(ctx, tk.ns, tk.readers[i], readRulesScript)
	if err != nil {
		return nil, fmt.Errorf("the rules of node %s: %w", tk.nodes[i], err)
	}
	return parseNodeRules(out), nil
}

// leftovers returns, per node, what kube-proxy in mode added to the
// node's rules since baseline (read before it started): what its
// --cleanup, and ipvsplane, remove.
func (tk *takeover) leftovers(t *testing.T, mode string, baseline []nodeRules) [][]string {
	t.Helper()
	var all [][]string
	for i, node := range tk.nodes {
		now, err := tk.rules(context.Background(), i)
		if err != nil {
			t.Fatal(err)
		}
		var added []string
		for name := range now {
			if !baseline[i][name] {
				added = append(added, name)
			}
		}
		slices.Sort(added)
		for _, mark := range kubeProxyMarks[mode] {
			if !slices.ContainsFunc(added, func(name string) bool { return strings.HasPrefix(name, mark) }) {
				t.Fatalf("kube-proxy in %s mode added no %s... on %s: %v", mode, mark, node, added)
			}
		}
		all = append(all, added)
	}
	return all
}

// gone fails while any of names is in node i's rules.
func (tk *takeover) gone(ctx context.Context, i int, names []string) error {
	rules, err := tk.rules(ctx, i)
	if err != nil {
		return err
	}
	if left := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return !rules[n] }); len(left) > 0 {
		return fmt.Errorf("still there: %v", left)
	}
	return nil
}

// present fails while any of names is missing from node i's rules.
func (tk *takeover) present(ctx context.Context, i int, names []string) error {
	rules, err := tk.rules(ctx, i)
	if err != nil {
		return err
	}
	if missing := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return rules[n] }); len(missing) > 0 {
		return fmt.Errorf("missing: %v", missing)
	}
	return nil
}

// kubeProxySynced fails until kube-proxy in mode has made its first sync
// on node i: the chain KUBE-SERVICES it first makes empty has rules, or
// its nftables map of service addresses has elements.
func (tk *takeover) kubeProxySynced(ctx context.Context, i int, mode string) error {
	script := "chroot /host /usr/sbin/iptables-save -t nat | grep -c '^-A KUBE-SERVICES' || true"
	if mode == "nftables" {
		script = "chroot /host /usr/sbin/nft list map ip kube-proxy service-ips | grep -c 'elements = ' || true"
	}
	out, err := tk.c.exec(ctx, tk.ns, tk.readers[i], script)
	if err == nil && strings.TrimSpace(out) == "0" {
		err = fmt.Errorf("no rules yet on %s", tk.nodes[i])
	}
	return err
}

// restartKubeProxy puts kube-proxy in mode as an operator changing its
// mode would: its pods stopped (a node selector no node matches),
// `kube-proxy --cleanup` run on every node from kube-proxy's image, the
// mode set in its ConfigMap, its pods started again and waited for until
// their first sync. It returns each node's rules as they were between
// the cleanup and the start: what is not kube-proxy's.
func (tk *takeover) restartKubeProxy(t *testing.T, mode string) []nodeRules {
	c, ctx := tk.c, context.Background()
	ds, err := c.client.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	image := ds.Spec.Template.Spec.Containers[0].Image
	tk.patchKubeProxy(t, `{"spec":{"template":{"spec":{"nodeSelector":{"ipvsplane.io/proxy":"stopped"}}}}}`)
	c.waitDaemonSet(t, "kube-proxy", 0)
	var baseline []nodeRules
	for i, node := range tk.nodes {
		c.runToCompletion(t, tk.ns, fmt.Sprintf("kube-proxy-cleanup-%s-%d", mode, i), node, kubeProxyCleanup(image), kubeProxyVolumes()...)
		rules, err := tk.rules(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		baseline = append(baseline, rules)
	}
	tk.setKubeProxyMode(t, mode)
	tk.patchKubeProxy(t, `{"spec":{"template":{"spec":{"nodeSelector":null}}}}`)
	c.waitDaemonSet(t, "kube-proxy", int32(len(tk.nodes)))
	for i, node := range tk.nodes {
		eventually(t, 2*time.Minute, "kube-proxy's "+mode+" rules synced on "+node, func() error {
			return tk.kubeProxySynced(ctx, i, mode)
		})
	}
	return baseline
}

func (tk *takeover) patchKubeProxy(t *testing.T, patch string) {
	t.Helper()
	if out, err := tk.c.kubectl(context.Background(), "-n", "kube-system", "patch", "daemonset", "kube-proxy", "-p", patch); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

// patchKubeProxyFile patches kube-proxy's DaemonSet with the strategic
// merge patch in the file at path, as the guide's kubectl patch
// --patch-file does.
func (tk *takeover) patchKubeProxyFile(t *testing.T, path string) {
	t.Helper()
	if out, err := tk.c.kubectl(context.Background(), "-n", "kube-system", "patch", "daemonset", "kube-proxy", "--patch-file", path); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

// modeLine is the mode's line in a KubeProxyConfiguration.
var modeLine = regexp.MustCompile(`(?m)^mode: .*$`)

// setKubeProxyMode sets mode in kube-proxy's ConfigMap, the rest of its
// configuration as it was.
func (tk *takeover) setKubeProxyMode(t *testing.T, mode string) {
	t.Helper()
	ctx := context.Background()
	cms := tk.c.client.CoreV1().ConfigMaps("kube-system")
	cm, err := cms.Get(ctx, "kube-proxy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conf := cm.Data["config.conf"]
	if !modeLine.MatchString(conf) {
		t.Fatalf("kube-proxy's config.conf has no mode line:\n%s", conf)
	}
	cm.Data["config.conf"] = modeLine.ReplaceAllString(conf, "mode: "+mode)
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// kubeProxyCleanup is `kube-proxy --cleanup` in kube-proxy's image, with
// what its DaemonSet mounts, run a second time if the first fails: after
// IPVS mode the first fails, as it removes the iptables mode's chains
// before the IPVS mode's, some of which still jump to KUBE-MARK-MASQ and
// KUBE-PROXY-FIREWALL ("CHAIN_DEL failed (Device or resource busy)").
func kubeProxyCleanup(image string) corev1.Container {
	privileged := true
	return corev1.Container{
		Name: "cleanup", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
		Command:         []string{"/bin/sh", "-c", "/usr/local/bin/kube-proxy --cleanup || /usr/local/bin/kube-proxy --cleanup"},
		SecurityContext: &corev1.SecurityContext{Privileged: &privileged},
		VolumeMounts: []corev1.VolumeMount{
			{Name: "xtables-lock", MountPath: "/run/xtables.lock"},
			{Name: "lib-modules", MountPath: "/lib/modules", ReadOnly: true},
		},
	}
}

func kubeProxyVolumes() []corev1.Volume {
	fileOrCreate := corev1.HostPathFileOrCreate
	return []corev1.Volume{
		{Name: "xtables-lock", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/run/xtables.lock", Type: &fileOrCreate}}},
		{Name: "lib-modules", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/lib/modules"}}},
	}
}

// nodeRoot starts a privileged pod on the node named node, in its network
// namespace, with the node's root at /host, read-only: the node's own
// iptables-save, ip6tables-save and nft read its rules through chroot.
func (c *cluster) nodeRoot(t *testing.T, ns, name, node string) string {
	t.Helper()
	return c.nodeRootPod(t, ns, name, node, true)
}

// nodeRootPod is nodeRoot with the node's root read-only or writable.
func (c *cluster) nodeRootPod(t *testing.T, ns, name, node string, readOnly bool) string {
	t.Helper()
	privileged := true
	c.createRunning(t, ns, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			HostNetwork:                   true,
			TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{
				Name: "tools", Image: nodetools, ImagePullPolicy: corev1.PullNever,
				SecurityContext: &corev1.SecurityContext{Privileged: &privileged},
				VolumeMounts:    []corev1.VolumeMount{{Name: "root", MountPath: "/host", ReadOnly: readOnly}},
			}},
			Volumes: []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}},
		},
	})
	return name
}

// parseNodeRules keeps KUBE-* chains per family and table, but kubelet's,
// and the nftables tables that are not iptables' own.
func TestParseNodeRules(t *testing.T) {
	out := `# Generated by iptables-nft-save v1.8.9 (nf_tables) on ...
*nat
:PREROUTING ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-SVC-ERIFXISQEP7F7OF4 - [0:0]
-A KUBE-SERVICES -j KUBE-SVC-ERIFXISQEP7F7OF4
COMMIT
*filter
:KUBE-FIREWALL - [0:0]
:KUBE-FORWARD - [0:0]
COMMIT
--- ip6
# Table ` + "`kube-proxy'" + ` is incompatible, use 'nft' tool.
*nat
:KUBE-POSTROUTING - [0:0]
COMMIT
--- nft
table ip nat
table ip filter
table ip kube-proxy
table ip6 kube-proxy
table inet cni
`
	got := slices.Sorted(maps.Keys(parseNodeRules(out)))
	want := []string{"ip filter KUBE-FORWARD", "ip nat KUBE-SERVICES", "ip nat KUBE-SVC-ERIFXISQEP7F7OF4",
		"ip6 nat KUBE-POSTROUTING", "table inet cni", "table ip kube-proxy", "table ip6 kube-proxy"}
	if !slices.Equal(got, want) {
		t.Errorf("parseNodeRules:\n got %v\nwant %v", got, want)
	}
}
