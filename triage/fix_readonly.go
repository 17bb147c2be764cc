package triage

import "strings"

// This file tells a fix command that only reads (kubectl get, crictl ps, journalctl) from one
// that changes something (kubectl delete, crictl rmi, whypending ipam release-ips), so a
// renderer never puts a change in the same code block as another command: a person who copies
// a block to look around must not run a write with it.

// ReadOnly reports whether the step is a command that only reads: every command of its pipes
// and lists (|, &&, ||, ;) reads, and nothing is written to a file. A command this file does
// not know, a command substitution, or a prose step is not read-only: when in doubt, a command
// is treated as one that changes something.
func (s FixStep) ReadOnly() bool {
	if s.Command == "" {
		return false
	}
	line := stripComment(s.Command)
	if strings.ContainsAny(line, "`") || strings.Contains(line, "$(") || writesFile(line) {
		return false
	}
	for _, seg := range shellSegments(line) {
		if !readsOnly(strings.Fields(seg)) {
			return false
		}
	}
	return true
}

// readOnlyVerbs maps a program to the subcommands that only read; "" means the program reads
// whatever its arguments (journalctl, dmesg). A program absent here is not read-only.
var readOnlyVerbs = map[string]map[string]bool{
	"kubectl":    kubectlReads,
	"oc":         kubectlReads,
	"calicoctl":  set("get", "version", "ipam check", "ipam show", "node status", "node checksystem"),
	"whypending": set("why-pending", "ipam check", "ipam show", "version", "help"),
	"crictl":     set("ps", "pods", "images", "img", "inspect", "inspecti", "inspectp", "logs", "info", "version", "stats", "statsp", "imagefsinfo"),
	"crane":      set("manifest", "ls", "digest", "config", "catalog", "validate"),
	"docker":     set("manifest inspect", "images", "image ls", "image inspect", "inspect", "ps", "logs", "version", "info"),
	"minikube":   set("image ls", "status", "ip", "version", "logs"),
	"kind":       set("get", "version"),
	"k3d":        set("image list", "image ls", "cluster list", "version"),
	"systemctl":  set("status", "show", "cat", "is-active", "is-enabled", "is-failed", "list-units"),
	"ip":         set("addr", "a", "address", "route", "r", "link", "neigh", "rule"),
	"ctr":        set("images ls", "image ls", "i ls", "containers ls", "c ls", "tasks ls", "t ls", "version", "info"),
	"rpcinfo":    set(""), // but -d unregisters a program: readsOnly checks it
	"mount":      set(""),
	"sed":        set(""),
	// Programs that read whatever their arguments (curl and ip are checked further in readsOnly).
	"journalctl": set(""), "dmesg": set(""), "grep": set(""), "cat": set(""), "ls": set(""),
	"df": set(""), "ps": set(""), "iostat": set(""), "getent": set(""), "curl": set(""),
	"nc": set(""), "openssl": set(""), "showmount": set(""), "findmnt": set(""),
	"aa-status": set(""), "head": set(""), "tail": set(""), "wc": set(""), "jq": set(""),
	"sort": set(""), "uniq": set(""), "cut": set(""), "column": set(""), "awk": set(""),
	"base64": set(""),
}

// kubectlReads are the kubectl (and oc) subcommands that only read.
var kubectlReads = set("get", "describe", "logs", "top", "explain", "api-resources", "api-versions",
	"version", "cluster-info", "events", "diff", "wait", "auth can-i", "auth whoami",
	"rollout status", "rollout history", "config view", "config current-context", "config get-contexts",
	"adm top", "whoami", "status")

// valueFlags are the global flags of kubectl, oc, crictl and ctr-like tools that take the next
// word as their value, so the subcommand is the first word after them.
var valueFlags = set("-n", "--namespace", "--context", "--kubeconfig", "--cluster", "--user", "-s",
	"--server", "--as", "--request-timeout", "-r", "--runtime-endpoint", "-i", "--image-endpoint")

func set(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

// readsOnly reports whether one simple command (its words) only reads.
func readsOnly(words []string) bool {
	if len(words) == 0 {
		return false
	}
	prog, args := words[0], words[1:]
	verbs, ok := readOnlyVerbs[prog]
	if !ok {
		return false
	}
	switch prog {
	case "kubectl", "oc":
		if dryRun(args) {
			return true
		}
	case "mount":
		return len(args) == 0 // bare mount lists; with arguments it mounts
	case "curl":
		return !anyWord(args, "-X", "--request", "-d", "--data", "--data-binary", "--data-raw", "-T", "--upload-file", "-F", "--form", "-o", "--output", "-O")
	case "sed":
		return !anyWord(args, "-i")
	case "rpcinfo":
		return !anyWord(args, "-d")
	case "ip":
		if anyWord(args, "add", "del", "delete", "set", "flush", "change", "replace", "append") {
			return false
		}
	}
	if verbs[""] {
		return true
	}
	sub := subcommand(args)
	if len(sub) == 0 {
		return false
	}
	return verbs[sub[0]] || (len(sub) > 1 && verbs[sub[0]+" "+sub[1]])
}

// subcommand returns args from the first word that is not a flag (or a global flag's value).
func subcommand(args []string) []string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			return args[i:]
		}
		if valueFlags[a] {
			i++
		}
	}
	return nil
}

// dryRun reports whether a kubectl command's args ask for a server or client dry run.
func dryRun(args []string) bool {
	for _, a := range args {
		if a == "--dry-run=server" || a == "--dry-run=client" {
			return true
		}
	}
	return false
}

func anyWord(args []string, words ...string) bool {
	for _, a := range args {
		for _, w := range words {
			if a == w || strings.HasPrefix(a, w+"=") {
				return true
			}
		}
	}
	return false
}

// unquoted calls f with each rune of line outside single or double quotes (the quote marks
// excluded), its byte index and the rune before it, until f returns false.
func unquoted(line string, f func(i int, r, prev rune) bool) {
	var quote rune
	prev := ' '
	for i, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		default:
			if !f(i, r, prev) {
				return
			}
		}
		prev = r
	}
}

// stripComment cuts a trailing shell comment ("  # see Allocated resources") outside quotes.
func stripComment(line string) string {
	out := line
	unquoted(line, func(i int, r, prev rune) bool {
		if r == '#' && (prev == ' ' || prev == '\t') {
			out = strings.TrimSpace(line[:i])
			return false
		}
		return true
	})
	return out
}

// shellSegments splits line into its simple commands at |, ||, && and ; outside quotes (the &
// of a duplication such as 2>&1 stays in its command).
func shellSegments(line string) []string {
	var segs []string
	start := 0
	cut := func(end int) {
		if seg := strings.TrimSpace(line[start:end]); seg != "" {
			segs = append(segs, seg)
		}
	}
	unquoted(line, func(i int, r, prev rune) bool {
		if r == '|' || r == ';' || (r == '&' && prev != '>') {
			cut(i)
			start = i + 1
		}
		return true
	})
	cut(len(line))
	return segs
}

// writesFile reports whether line redirects output to a file (outside quotes): > or >> to
// anything but /dev/null or a stream duplication such as 2>&1.
func writesFile(line string) bool {
	writes := false
	unquoted(line, func(i int, r, _ rune) bool {
		if r == '>' {
			rest := strings.TrimLeft(line[i+1:], "> ")
			writes = !strings.HasPrefix(rest, "/dev/null") && !strings.HasPrefix(rest, "&")
		}
		return !writes
	})
	return writes
}

// Follows reports whether the step is a command that runs until it is interrupted: a watch
// (kubectl get -w, --watch), a followed log (kubectl logs -f, journalctl -f, tail -f, crictl
// or docker logs -f), or watch(1). A person stops it with Ctrl-C, and a pasted line after it
// in the same paste never runs, so a renderer ends the code block after it.
func (s FixStep) Follows() bool {
	if s.Command == "" {
		return false
	}
	for _, seg := range shellSegments(stripComment(s.Command)) {
		words := strings.Fields(seg)
		if len(words) == 0 {
			continue
		}
		prog, args := words[0], words[1:]
		switch prog {
		case "watch":
			return true
		case "kubectl", "oc":
			sub := subcommand(args)
			if anyWord(args, "-w", "--watch", "--watch-only") ||
				(len(sub) > 0 && sub[0] == "logs" && anyWord(args, "-f", "--follow")) {
				return true
			}
		case "journalctl", "tail", "crictl", "docker":
			if anyWord(args, "-f", "--follow", "-F") {
				return true
			}
		}
	}
	return false
}
