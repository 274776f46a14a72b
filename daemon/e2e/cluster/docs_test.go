//go:build clustertest

package cluster

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// repoRoot is the repository's root, where the docs' commands run: they
// name its files (deploy/..., bin/..., VERSION) from there.
const repoRoot = "../../.."

// docBlocks returns the ```sh blocks of the doc at path (from the
// repository's root) that follow a line reading marker, each as its
// lines without the fence's indentation. A marker that is not followed by
// such a block is an error, so a doc edited around its markers fails the
// test rather than losing a block.
func docBlocks(path, marker string) ([]string, error) {
	data, err := os.ReadFile(filepath.Join(repoRoot, path))
	if err != nil {
		return nil, err
	}
	lines := strings.Split(string(data), "\n")
	var blocks []string
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != marker {
			continue
		}
		if i+1 == len(lines) || strings.TrimSpace(lines[i+1]) != "```sh" {
			return nil, fmt.Errorf("%s:%d: the marker %q is not followed by a ```sh block", path, i+1, marker)
		}
		indent := lines[i+1][:strings.Index(lines[i+1], "```")]
		var block []string
		for i += 2; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			block = append(block, strings.TrimPrefix(lines[i], indent))
		}
		if i == len(lines) {
			return nil, fmt.Errorf("%s: the block after the marker %q is not closed", path, marker)
		}
		blocks = append(blocks, strings.Join(block, "\n"))
	}
	if len(blocks) == 0 {
		return nil, fmt.Errorf("%s has no block marked %q", path, marker)
	}
	return blocks, nil
}

// shellCommands splits a block into its commands: a line ending in a
// backslash continues on the next; blank lines and lines that are only a
// comment are left out.
func shellCommands(block string) []string {
	var commands []string
	var current strings.Builder
	sc := bufio.NewScanner(strings.NewReader(block))
	for sc.Scan() {
		line := sc.Text()
		if current.Len() == 0 && (strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#")) {
			continue
		}
		current.WriteString(line)
		if strings.HasSuffix(line, `\`) {
			current.WriteString("\n")
			continue
		}
		commands = append(commands, current.String())
		current.Reset()
	}
	if current.Len() > 0 {
		commands = append(commands, current.String())
	}
	return commands
}

// nodeWord is the docs' placeholder for a node's name.
var nodeWord = regexp.MustCompile(`\bNODE\b`)

// docStep is commands that run once, or for every node in turn with
// NODE replaced by the node's name.
type docStep struct {
	commands []string
	perNode  bool
}

// docSteps groups a block's commands as an operator runs them: commands
// next to each other that name NODE are one step run for each node, the
// others run once, in the block's order.
func docSteps(commands []string) []docStep {
	var steps []docStep
	for _, command := range commands {
		perNode := nodeWord.MatchString(command)
		if n := len(steps); n > 0 && steps[n-1].perNode == perNode {
			steps[n-1].commands = append(steps[n-1].commands, command)
			continue
		}
		steps = append(steps, docStep{commands: []string{command}, perNode: perNode})
	}
	return steps
}

// sameCommand is a command with its line breaks and runs of blanks as one
// blank, for comparing a command as two docs write it.
func sameCommand(command string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(command, "\\\n", " ")), " ")
}

// missingCommands returns the commands of blocks that are not in ran.
func missingCommands(blocks, ran []string) []string {
	var normal []string
	for _, command := range ran {
		normal = append(normal, sameCommand(command))
	}
	var missing []string
	for _, block := range blocks {
		for _, command := range shellCommands(block) {
			if !slices.Contains(normal, sameCommand(command)) {
				missing = append(missing, command)
			}
		}
	}
	return missing
}

func TestDocSteps(t *testing.T) {
	block := "# 1. once\nkubectl apply -k deploy/\n\n# 2. node by node\nkubectl label node NODE a=b\n" +
		"kubectl wait pod \\\n  --field-selector spec.nodeName=NODE   # wait\n# 3.\nkubectl delete daemonset kube-proxy\n"
	commands := shellCommands(block)
	want := []string{"kubectl apply -k deploy/", "kubectl label node NODE a=b",
		"kubectl wait pod \\\n  --field-selector spec.nodeName=NODE   # wait", "kubectl delete daemonset kube-proxy"}
	if !slices.Equal(commands, want) {
		t.Fatalf("commands %q, want %q", commands, want)
	}
	steps := docSteps(commands)
	if len(steps) != 3 || steps[0].perNode || !steps[1].perNode || len(steps[1].commands) != 2 || steps[2].perNode {
		t.Errorf("steps %+v", steps)
	}
	if got := missingCommands([]string{"kubectl wait pod --field-selector spec.nodeName=NODE # wait\nkubectl x"}, commands); !slices.Equal(got, []string{"kubectl x"}) {
		t.Errorf("missing %q, want [kubectl x]", got)
	}
}

// The docs' marked blocks, as TestKubeadmMigration reads them: the
// guide's image built once and imported on each node; docs/kubeadm.md's
// migration with its node-by-node step between two run once; the guide's
// kubeadm procedure made of docs/kubeadm.md's commands.
func TestKubeadmDocBlocks(t *testing.T) {
	images, migration := kubeadmDocBlocks(t)
	var shape []string
	for _, block := range append(images, migration) {
		var s []string
		for _, step := range docSteps(shellCommands(block)) {
			s = append(s, fmt.Sprintf("%d%s", len(step.commands), map[bool]string{true: " per node"}[step.perNode]))
		}
		shape = append(shape, strings.Join(s, ", "))
	}
	want := []string{"1", "2 per node", "6, 3 per node, 1"}
	if !slices.Equal(shape, want) {
		t.Errorf("the blocks' steps (commands in each) %q, want %q:\n%s", shape, want, strings.Join(append(images, migration), "\n---\n"))
	}
	guide, err := docBlocks("docs/migrating-from-kube-proxy.md", docSame)
	if err != nil {
		t.Fatal(err)
	}
	if missing := missingCommands(guide, shellCommands(migration)); len(missing) != 0 {
		t.Errorf("the guide's kubeadm procedure has commands docs/kubeadm.md's block does not: %q", missing)
	}
}
