package ledger

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// Client reads and writes Notifications over the API server's REST API as typed objects: the
// fields this package owns are decoded, and the rest of spec and status stays the JSON it
// arrived as. An entry carries a rendered message, so a dynamic client's generic maps (one
// allocation per JSON value, and a conversion each way) made each write cost many times the
// entry's size (calico/BENCHMARKS.md, "Where the watch's memory goes").
type Client struct {
	rest rest.Interface
}

// NewClient returns a Client over cfg (copied; its content type becomes JSON). Each Client has
// its own client-side rate limiter unless cfg sets one.
func NewClient(cfg *rest.Config) (*Client, error) {
	cfg = rest.CopyConfig(cfg)
	gv := GVR.GroupVersion()
	cfg.GroupVersion = &gv
	cfg.APIPath = "/apis"
	cfg.ContentType = runtime.ContentTypeJSON
	cfg.AcceptContentTypes = runtime.ContentTypeJSON
	cfg.NegotiatedSerializer = codecs.WithoutConversion()
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("notification client: %w", err)
	}
	return &Client{rest: rc}, nil
}

var (
	scheme = runtime.NewScheme()
	codecs = serializer.NewCodecFactory(scheme)
)

func init() {
	gv := GVR.GroupVersion()
	scheme.AddKnownTypeWithName(gv.WithKind("Notification"), &notification{})
	scheme.AddKnownTypeWithName(gv.WithKind("NotificationList"), &notificationList{})
	metav1.AddToGroupVersion(scheme, gv) // Status, WatchEvent and the options
}

// notification is a Notification as the API server stores it.
type notification struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec and Status are kept as the JSON they arrived as: fromObject decodes the fields this
	// package owns from them, and toObject keeps the keys it does not know.
	Spec   json.RawMessage `json:"spec,omitempty"`
	Status json.RawMessage `json:"status,omitempty"`
}

// DeepCopyObject implements runtime.Object (the informer's store).
func (n *notification) DeepCopyObject() runtime.Object {
	out := *n
	n.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec, out.Status = bytes.Clone(n.Spec), bytes.Clone(n.Status)
	return &out
}

type notificationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []notification `json:"items"`
}

// DeepCopyObject implements runtime.Object.
func (l *notificationList) DeepCopyObject() runtime.Object {
	out := *l
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = make([]notification, len(l.Items))
	for i := range l.Items {
		out.Items[i] = *l.Items[i].DeepCopyObject().(*notification)
	}
	return &out
}

func (c *Client) get(ctx context.Context, namespace, name string) (*notification, error) {
	out := &notification{}
	err := c.rest.Get().Namespace(namespace).Resource(GVR.Resource).Name(name).Do(ctx).Into(out)
	return out, err
}

func (c *Client) create(ctx context.Context, n *notification) (*notification, error) {
	out := &notification{}
	err := c.rest.Post().Namespace(n.Namespace).Resource(GVR.Resource).Body(n).Do(ctx).Into(out)
	return out, err
}

func (c *Client) update(ctx context.Context, n *notification) (*notification, error) {
	out := &notification{}
	err := c.rest.Put().Namespace(n.Namespace).Resource(GVR.Resource).Name(n.Name).Body(n).Do(ctx).Into(out)
	return out, err
}

func (c *Client) delete(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
	return c.rest.Delete().Namespace(namespace).Resource(GVR.Resource).Name(name).Body(&opts).Do(ctx).Error()
}

func (c *Client) list(ctx context.Context, namespace string, opts metav1.ListOptions) (*notificationList, error) {
	out := &notificationList{}
	err := c.rest.Get().Namespace(namespace).Resource(GVR.Resource).VersionedParams(&opts, metav1.ParameterCodec).Do(ctx).Into(out)
	return out, err
}

func (c *Client) watch(ctx context.Context, namespace string, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return c.rest.Get().Namespace(namespace).Resource(GVR.Resource).VersionedParams(&opts, metav1.ParameterCodec).Watch(ctx)
}
