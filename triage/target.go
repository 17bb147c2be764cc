package triage

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Kind is the API kind of what a question names: a Pod or one of the workload kinds whose pods
// triage explains together.
type Kind string

// The kinds a question can name.
const (
	KindPod         Kind = "Pod"
	KindDeployment  Kind = "Deployment"
	KindReplicaSet  Kind = "ReplicaSet"
	KindStatefulSet Kind = "StatefulSet"
	KindDaemonSet   Kind = "DaemonSet"
	KindJob         Kind = "Job"
	KindCronJob     Kind = "CronJob"
)

// WorkloadKinds are the workload kinds, in the order a bare name is looked up when no pod has
// that name: the kinds people deploy directly first, ReplicaSets (which a Deployment owns)
// last.
var WorkloadKinds = []Kind{KindDeployment, KindStatefulSet, KindDaemonSet, KindCronJob, KindJob, KindReplicaSet}

// kindNames maps every way kubectl accepts to name a kind (lower case: the kind, its plural,
// its short name, and the plural qualified with the API group) to the kind.
var kindNames = map[string]Kind{}

// kindWords lists, per kind, kubectl's names for it; the first is its short name for commands.
var kindWords = map[Kind][]string{
	KindPod:         {"po", "pod", "pods"},
	KindDeployment:  {"deploy", "deployment", "deployments", "deployment.apps", "deployments.apps"},
	KindReplicaSet:  {"rs", "replicaset", "replicasets", "replicaset.apps", "replicasets.apps"},
	KindStatefulSet: {"sts", "statefulset", "statefulsets", "statefulset.apps", "statefulsets.apps"},
	KindDaemonSet:   {"ds", "daemonset", "daemonsets", "daemonset.apps", "daemonsets.apps"},
	KindJob:         {"job", "jobs", "job.batch", "jobs.batch"},
	KindCronJob:     {"cj", "cronjob", "cronjobs", "cronjob.batch", "cronjobs.batch"},
}

func init() {
	for k, words := range kindWords {
		for _, w := range words {
			kindNames[w] = k
		}
	}
}

// KindFor returns the kind kubectl reads word as ("deploy", "Deployments", "sts", "cj", …;
// case does not matter), and false when word names no kind triage knows.
func KindFor(word string) (Kind, bool) {
	k, ok := kindNames[strings.ToLower(word)]
	return k, ok
}

// Short is kubectl's short name for the kind ("deploy", "sts", "po", …), for commands and
// TYPE/NAME targets.
func (k Kind) Short() string {
	if w := kindWords[k]; len(w) > 0 {
		return w[0]
	}
	return strings.ToLower(string(k))
}

// Target is what a question names: one pod, one workload, a bare name (a pod, else the
// workload of that name), or every stuck pod and failing workload of a namespace (All).
type Target struct {
	// Namespace is the namespace asked about.
	Namespace string `json:"namespace"`
	// Kind is the kind named with TYPE/NAME; "" for a bare NAME, which is a pod if one has that
	// name, else a workload (WorkloadKinds order).
	Kind Kind `json:"kind,omitempty"`
	// Name is the pod's or workload's name; "" with All.
	Name string `json:"name,omitempty"`
	// All asks about the whole namespace.
	All bool `json:"all,omitempty"`
	// OtherReading is the NS/POD reading of a TYPE/NAME argument whose TYPE is also a valid
	// namespace name ("deploy/checkout": pod checkout in namespace deploy), which whypending
	// read that way before it understood TYPE/NAME; nil otherwise. The answer is for the
	// workload; when that pod exists too, the answer says how to ask for it.
	OtherReading *PodRef `json:"otherReading,omitempty"`
	// NamespaceGiven says the asker named the namespace (-n): a TYPE/NAME whose workload does
	// not exist is then answered as such, never as OtherReading's pod.
	NamespaceGiven bool `json:"namespaceGiven,omitempty"`
	// FlagNamespace is the namespace named with -n when the argument is NAMESPACE/NAME in
	// another namespace whose name is also kubectl's name of a kind whypending does not
	// diagnose ("svc/web -n shop"); "" otherwise. Whether svc/ names a namespace or a kind
	// depends on whether namespace svc exists, which Given cannot know: the question is read
	// as NAME in NAMESPACE, the way it is without -n (a missing namespace svc gets the answer
	// that says what svc/ names), and when namespace svc exists the answer is
	// TwoNamespaces, the error Given returns for any other namespace.
	FlagNamespace string `json:"flagNamespace,omitempty"`
	// Visible, when set, says whether the answer may name what is in another namespace than
	// Namespace: the pods and workloads a mistyped name is close to. Nil allows every
	// namespace. The bot sets it, under per-user authorization, to the namespaces the asker
	// may read; it may ask the API server, so it takes the question's context.
	Visible func(ctx context.Context, namespace string) bool `json:"-"`
}

// String renders the target the way it can be asked again: "shop/web-7f9c" for a pod,
// "deploy/checkout -n shop" for a workload, "--all -n shop" for a namespace.
func (t Target) String() string {
	switch {
	case t.All:
		return "--all -n " + t.Namespace
	case t.Kind == "" && t.FlagNamespace != "":
		return t.Namespace + "/" + t.Name + " -n " + t.FlagNamespace
	case t.Kind == "":
		return t.Namespace + "/" + t.Name
	case t.Kind == KindPod:
		return t.Namespace + "/" + t.Name
	default:
		return t.Kind.Short() + "/" + t.Name + " -n " + t.Namespace
	}
}

// ParseTarget reads a why-pending argument the way kubectl reads TYPE/NAME: when the part
// before the slash is a kind kubectl knows (po, pod, deploy, deployment, sts, ds, job, cj, rs,
// their plurals and group-qualified names, in any case), arg is TYPE/NAME and the namespace is
// namespace (from -n or the default). Otherwise a slash separates NAMESPACE/NAME, as whypending
// always read it, and NAME is read as a bare NAME in that namespace; without a slash arg is a
// bare NAME in namespace. NAMESPACE/TYPE/NAME and TYPE/NAMESPACE/NAME are refused with a
// *NamespaceKindNameError that says how to ask (-n NAMESPACE TYPE/NAME). all asks about the whole
// namespace and then arg must be empty. The error says what is wrong with the input (no
// namespace or name that cannot exist is sent to the API server).
func ParseTarget(arg, namespace string, all bool) (Target, error) {
	if all {
		if arg != "" {
			return Target{}, fmt.Errorf("--all asks about the whole namespace: give no name with it (got %q)", arg)
		}
		if err := checkNames(namespace, "", ""); err != nil {
			return Target{}, err
		}
		return Target{Namespace: namespace, All: true}, nil
	}
	if arg == "" {
		return Target{}, fmt.Errorf("name a pod, a workload (deploy/NAME, sts/NAME, ds/NAME, job/NAME, cj/NAME, rs/NAME) or use --all")
	}
	t := Target{Namespace: namespace, Name: arg}
	if before, after, ok := strings.Cut(arg, "/"); ok {
		if before == "" || after == "" {
			return Target{}, fmt.Errorf("%q has nothing on one side of its '/': ask about NAME, KIND/NAME (deploy/cart) or NAMESPACE/NAME (shop/cart)", arg)
		}
		if kind, isKind := KindFor(before); isKind {
			if namespace, name, ok := strings.Cut(after, "/"); ok {
				// KIND/NAMESPACE/NAME ("deploy/shop/cart"): no name holds a '/'.
				return Target{}, misplacedNamespace(arg, namespace, kind, name, true)
			}
			t.Kind, t.Name = kind, after
			if validation.IsDNS1123Label(before) == nil && validation.IsDNS1123Subdomain(after) == nil {
				t.OtherReading = &PodRef{Namespace: before, Name: after}
			}
		} else {
			if err := namespaceKindName(arg, before, after); err != nil {
				return Target{}, err
			}
			// NAMESPACE/NAME: a bare NAME in that namespace (a pod, else a workload).
			t.Namespace, t.Name = before, after
		}
	}
	what := "pod or workload"
	if t.Kind != "" {
		what = t.Kind.what()
	}
	if err := checkNames(t.Namespace, t.Name, what); err != nil {
		return Target{}, err
	}
	return t, nil
}

// namespaceKindName returns the error of an argument NAMESPACE/KIND/NAME ("shop/deploy/cart":
// namespace is "shop", rest "deploy/cart"): a *NamespaceKindNameError when KIND is a kind
// kubectl knows and the namespace and name are valid, the name's error when it is not, and
// nil for any other argument.
func namespaceKindName(arg, namespace, rest string) error {
	word, name, ok := strings.Cut(rest, "/")
	if !ok {
		return nil
	}
	kind, isKind := KindFor(word)
	if !isKind {
		return nil
	}
	return misplacedNamespace(arg, namespace, kind, name, false)
}

// misplacedNamespace is the error of an argument that names namespace, kind and name in
// another order than -n NAMESPACE KIND/NAME: the invalid part's error, else the
// *NamespaceKindNameError that says how to ask.
func misplacedNamespace(arg, namespace string, kind Kind, name string, kindFirst bool) error {
	if err := checkNames(namespace, name, kind.what()); err != nil {
		return err
	}
	return &NamespaceKindNameError{Arg: arg, Namespace: namespace, Kind: kind, Name: name, KindFirst: kindFirst}
}

// NamespaceKindNameError is an argument that puts the namespace before KIND/NAME
// ("shop/deploy/cart", kubectl's habit being -n shop deploy/cart). It is not answered: the
// text says how to ask (-n Namespace KIND/Name) and nothing is looked up, so no other object
// than the one meant is answered.
type NamespaceKindNameError struct {
	// Arg is the argument as given.
	Arg string
	// Namespace, Kind and Name are its parts.
	Namespace string
	Kind      Kind
	Name      string
	// KindFirst is set for KIND/NAMESPACE/NAME ("deploy/shop/cart").
	KindFirst bool
}

func (e *NamespaceKindNameError) Error() string {
	where := "before the kind"
	if e.KindFirst {
		where = "between the kind and the name"
	}
	return fmt.Sprintf("%q puts the namespace %s: use -n %s %s/%s (namespace first, then kind/name)",
		e.Arg, where, e.Namespace, e.Kind.Short(), e.Name)
}

// what is the kind as the invalid-name errors name it ("pod", "deployment").
func (k Kind) what() string {
	if k == KindPod {
		return "pod"
	}
	return strings.ToLower(string(k))
}

// Given marks t's namespace as named by the asker (-n namespace; see NamespaceGiven). A
// NAMESPACE/NAME argument that names another namespace is an error (*TwoNamespacesError):
// the question names two, and answering either one would answer what was not asked. When
// NAMESPACE is also kubectl's name of a kind whypending does not diagnose ("svc/web -n shop"),
// the answer decides instead (see FlagNamespace).
func (t Target) Given(namespace string) (Target, error) {
	if !t.All && t.Kind == "" && t.Namespace != namespace {
		if _, isKind := otherKind(t.Namespace); !isKind {
			return Target{}, &TwoNamespacesError{Flag: namespace, Namespace: t.Namespace, Name: t.Name}
		}
		t.FlagNamespace = namespace
	}
	t.NamespaceGiven = true
	return t, nil
}

// TwoNamespaces is the error of a FlagNamespace question whose NAMESPACE exists, nil for any
// other target.
func (t Target) TwoNamespaces() error {
	if t.FlagNamespace == "" {
		return nil
	}
	return &TwoNamespacesError{Flag: t.FlagNamespace, Namespace: t.Namespace, Name: t.Name}
}

// TwoNamespacesError is a question that names two namespaces: -n Flag, and Namespace in the
// argument Namespace/Name. Its text is for the asker, who gives one of the two.
type TwoNamespacesError struct {
	Flag, Namespace, Name string
}

func (e *TwoNamespacesError) Error() string {
	return fmt.Sprintf("two namespaces given: -n %s, and %s in %s/%s; give one (-n %s %s, or %s/%s)",
		e.Flag, e.Namespace, e.Namespace, e.Name, e.Flag, e.Name, e.Namespace, e.Name)
}

// TargetSyntax explains how ParseTarget reads its argument, for --help and /whypending help.
const TargetSyntax = `TARGET is read the way kubectl reads it:
  POD or NAME          a pod; a name no pod has is looked up as a Deployment, StatefulSet,
                       DaemonSet, CronJob, Job or ReplicaSet of that name
  TYPE/NAME            a workload (or pod) when TYPE is a kind or short name: po, pod, deploy,
                       deployment, rs, sts, ds, job, cj, cronjob (plurals too); the namespace
                       comes from -n or the default
  NAMESPACE/NAME       the same as NAME in that namespace, when the part before the slash
                       is not a kind
  NAMESPACE/TYPE/NAME  is not read (nor TYPE/NAMESPACE/NAME): ask -n NAMESPACE TYPE/NAME
  --all                every stuck pod and failing workload of the namespace, grouped by cause
When a namespace is named like a kind ("deploy/checkout" could also mean pod checkout in
namespace deploy), the workload wins and the answer says how to ask for the pod (-n deploy
checkout); when no such workload exists but that pod does, the pod is answered, with a note.`
