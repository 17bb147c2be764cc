// Package alerts is whypending as an Alertmanager receiver: POST /alertmanager takes
// Alertmanager's webhook body (payload version "4"), writes one ledger entry per channel and
// Alertmanager group (groupKey) with each alert's fingerprint and startsAt, answers 200 only
// once that is written, and then keeps one thread per group and channel: a root message (the
// alert name, status, count, links), one reply per alert with the answer /why-pending gives for
// the object its labels name (at most 20 per notification; none for alerts naming no object),
// and, when the group changes, an edit of the root plus one reply
// saying what changed. Alertmanager's redeliveries and repeat_interval re-sends post nothing
// new; the posting itself is ledger/thread's, so it happens once across retries, replicas and
// restarts. A channel of channels.namespaces that sees none of a group's alerts gets no thread
// of it. The group's silence made from chat is the group's, not a channel's: it lives in one
// more entry per receiver and groupKey (GroupSource), which every channel's root renders.
//
// The webhook body is decoded into small structs matching Alertmanager's v4 schema rather than
// Alertmanager's own types: those live in notify/webhook and template, which bring in
// Alertmanager's notify, config and embedded-asset packages, for eight fields.
package alerts

import (
	"strings"
	"time"
)

// Webhook is Alertmanager's webhook body, payload version "4" (notify/webhook.Message).
type Webhook struct {
	Version           string            `json:"version"`
	GroupKey          string            `json:"groupKey"`
	TruncatedAlerts   int               `json:"truncatedAlerts"`
	Status            string            `json:"status"`
	Receiver          string            `json:"receiver"`
	GroupLabels       map[string]string `json:"groupLabels"`
	CommonLabels      map[string]string `json:"commonLabels"`
	CommonAnnotations map[string]string `json:"commonAnnotations"`
	ExternalURL       string            `json:"externalURL"`
	Alerts            []Alert           `json:"alerts"`
}

// Alert is one alert of a webhook body. Alertmanager sets EndsAt to the zero time for an
// alert still firing when it flushes the group, so Fingerprint and StartsAt name one firing
// episode.
type Alert struct {
	Status       string            `json:"status"`
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL"`
	Fingerprint  string            `json:"fingerprint"`
}

// Object is the Kubernetes object an alert's labels name, as /why-pending's argument.
type Object struct {
	// Cluster is the value of the configured cluster label ("" is the default cluster).
	Cluster string `json:"cluster,omitempty"`
	// Namespace is the namespace label.
	Namespace string `json:"namespace"`
	// Kind is kubectl's short kind: pod, deploy, sts, ds, job, cj.
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// Arg is the object as /why-pending's TARGET (TYPE/NAME).
func (o Object) Arg() string { return o.Kind + "/" + o.Name }

func (o Object) String() string { return o.Namespace + "/" + o.Arg() }

// objectLabels are the kubernetes-mixin labels that name an object, most specific first:
// KubePodCrashLooping, KubePodNotReady and KubeContainerWaiting name a pod; the
// ReplicasMismatch, RolloutStuck and Job alerts name their workload.
var objectLabels = []struct{ label, kind string }{
	{"pod", "pod"},
	{"deployment", "deploy"},
	{"statefulset", "sts"},
	{"daemonset", "ds"},
	{"job_name", "job"},
	{"cronjob", "cj"},
}

// ObjectOf maps an alert's labels to the object they name; ok is false when they name none
// (no namespace, or none of the object labels).
func ObjectOf(labels map[string]string, clusterLabel string) (Object, bool) {
	ns := labels["namespace"]
	if ns == "" {
		return Object{}, false
	}
	for _, l := range objectLabels {
		if name := strings.TrimSpace(labels[l.label]); name != "" {
			o := Object{Namespace: ns, Kind: l.kind, Name: name}
			if clusterLabel != "" {
				o.Cluster = labels[clusterLabel]
			}
			return o, true
		}
	}
	return Object{}, false
}
