package calico

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
)

// Sentinel errors. Callers test them with errors.Is.
var (
	// ErrCalicoNotInstalled: the API server serves neither crd.projectcalico.org nor
	// projectcalico.org, so the cluster has no Calico datastore in KDD mode.
	ErrCalicoNotInstalled = errors.New("calico api group not served (neither crd.projectcalico.org nor projectcalico.org)")
	// ErrDatastoreLocked: ClusterInformation default has datastoreReady=false set by someone
	// else (no whypending marker of the caller's owner).
	ErrDatastoreLocked = errors.New("calico datastore is locked by someone else")
	// ErrLockLost: the caller's lock was replaced by another owner's before Unlock.
	ErrLockLost = errors.New("calico datastore lock is now held by another owner")
	// ErrNotInitialized: ClusterInformation default does not exist.
	ErrNotInitialized = errors.New("calico clusterinformation default not found")
)

const (
	groupV1 = "crd.projectcalico.org"
	groupV3 = "projectcalico.org"

	// minQPS and minBurst are the client-side rate limits NewClient raises a config to.
	minQPS   = 500
	minBurst = 1000
)

// Client reads and repairs Calico IPAM through the Kubernetes API. It is safe for concurrent
// use. Build it with NewClient.
type Client struct {
	kube kubernetes.Interface // core objects, protobuf
	meta metadata.Interface   // node metadata, protobuf
	dyn  dynamic.Interface    // Calico objects for writes (unstructured, JSON)
	raw  rest.Interface       // Calico objects for bulk reads (JSON decoded into small structs)

	group, version string
	v3             bool // projectcalico.org/v3 CRDs ("no API server" mode)
}

// NewClient connects to the cluster cfg points at and detects where Calico stores its data, as
// Calico's own KDD client does: projectcalico.org/v3 CRDs when only projectcalico.org is served,
// else crd.projectcalico.org/v1 (when both are served, the v3 group is Calico's aggregated API
// server and v1 is the storage). The environment variable CALICO_API_GROUP ("crd.projectcalico.org/v1"
// or "projectcalico.org/v3") overrides the detection. It returns ErrCalicoNotInstalled when
// neither group is served.
//
// NewClient copies cfg; unless cfg sets its own RateLimiter or a negative QPS (no limit) it
// raises the client-side limits to at least 500 QPS and a burst of 1000, because bulk reads and releases are bounded by the
// engine's own worker count and the API server's priority and fairness is the real throttle.
// It also turns off response compression: gzip of large lists costs the API server (and the
// client) more CPU than it saves on an in-cluster or LAN link.
func NewClient(ctx context.Context, cfg *rest.Config) (*Client, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.DisableCompression = true
	if cfg.RateLimiter == nil && cfg.QPS >= 0 {
		cfg.QPS = max(cfg.QPS, minQPS)
		cfg.Burst = max(cfg.Burst, minBurst)
	}
	group, version, err := detectGroup(ctx, cfg)
	if err != nil {
		return nil, err
	}
	c := &Client{group: group, version: version, v3: group == groupV3}

	pb := rest.CopyConfig(cfg)
	pb.ContentType = "application/vnd.kubernetes.protobuf"
	pb.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	if c.kube, err = kubernetes.NewForConfig(pb); err != nil {
		return nil, fmt.Errorf("build kubernetes client: %w", err)
	}
	if c.meta, err = metadata.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("build metadata client: %w", err)
	}
	if c.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("build dynamic client: %w", err)
	}
	rc := rest.CopyConfig(cfg)
	rc.GroupVersion = &schema.GroupVersion{Group: group, Version: version}
	rc.APIPath = "/apis"
	rc.ContentType = "application/json"
	rc.AcceptContentTypes = "application/json"
	rc.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	if c.raw, err = rest.RESTClientFor(rc); err != nil {
		return nil, fmt.Errorf("build calico rest client: %w", err)
	}
	return c, nil
}

// APIGroup is the group/version the client reads and writes Calico objects in, e.g.
// "crd.projectcalico.org/v1".
func (c *Client) APIGroup() string { return c.group + "/" + c.version }

// CheckAccess is the permission a person needs to see an IPAM check or utilization, as the
// API server authorizes it: list IPAMBlocks (cluster-wide), which hold every allocation and
// the pod each names. The bot asks it for the person (bot/authz); the reads are still made
// with the bot's own credentials.
func (c *Client) CheckAccess() authorizationv1.ResourceAttributes {
	return authorizationv1.ResourceAttributes{Verb: "list", Group: c.group, Resource: ResourceBlocks}
}

func detectGroup(ctx context.Context, cfg *rest.Config) (group, version string, err error) {
	if v := os.Getenv("CALICO_API_GROUP"); v != "" {
		g, ver, ok := strings.Cut(v, "/")
		if !ok {
			ver = "v1"
			if g == groupV3 {
				ver = "v3"
			}
		}
		return g, ver, nil
	}
	dc := rest.CopyConfig(cfg)
	dc.GroupVersion = &schema.GroupVersion{}
	dc.APIPath = "/apis"
	dc.AcceptContentTypes = "application/json"
	dc.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	rc, err := rest.UnversionedRESTClientFor(dc)
	if err != nil {
		return "", "", fmt.Errorf("build discovery client: %w", err)
	}
	body, err := rc.Get().AbsPath("/apis").DoRaw(ctx)
	if err != nil {
		return "", "", fmt.Errorf("discover api groups: %w", err)
	}
	var groups metav1.APIGroupList
	if err := json.Unmarshal(body, &groups); err != nil {
		return "", "", fmt.Errorf("decode api groups: %w", err)
	}
	return pickGroup(&groups)
}

// pickGroup applies Calico's UsingV3CRDs rule to the served groups.
func pickGroup(groups *metav1.APIGroupList) (group, version string, err error) {
	served := map[string]bool{}
	for _, g := range groups.Groups {
		served[g.Name] = true
	}
	switch {
	case served[groupV1]:
		return groupV1, "v1", nil
	case served[groupV3]:
		return groupV3, "v3", nil
	}
	return "", "", ErrCalicoNotInstalled
}

// The Calico resources repairs write (plural, lower case, in the detected group, all
// cluster-scoped): actions names them in the permissions a repair uses (Runner.Access).
const (
	ResourceBlocks      = "ipamblocks"
	ResourceAffinities  = "blockaffinities"
	ResourceHandles     = "ipamhandles"
	ResourceClusterInfo = "clusterinformations"
)

// Calico resource names (plural, lower case) in the detected group.
const (
	resBlocks      = ResourceBlocks
	resAffinities  = ResourceAffinities
	resHandles     = ResourceHandles
	resPools       = "ippools"
	resClusterInfo = ResourceClusterInfo
)

func (c *Client) resIPAMConfig() string {
	if c.v3 {
		return "ipamconfigurations"
	}
	return "ipamconfigs"
}

func (c *Client) gvr(resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: c.group, Version: c.version, Resource: resource}
}

func (c *Client) res(resource string) dynamic.ResourceInterface {
	return c.dyn.Resource(c.gvr(resource))
}

// listPageSize is the page size of the paginated list listAll falls back to.
const listPageSize = 500

// listAll lists every object of a Calico resource and passes each item, decoded into T as it
// streams in, to fn. It returns the list's resourceVersion.
//
// It first asks for the whole list in one unpaginated request: without limit and continue, the
// API server answers a consistent list (resourceVersion "") from its watch cache, never from
// etcd, whatever the cache's state; a paginated list's continuation pages are read from etcd
// when the cache holds no snapshot of that revision, at several times the server CPU
// (BENCHMARKS.md). The body is decoded as a stream, so the client never holds the whole list.
// When the API server cannot build that list within its request timeout (a very large list on
// a busy server: apierrors.IsTimeout or IsServerTimeout) and no item has reached fn yet, it
// reads the list again page by page (listPageSize items per request), each page a request of
// its own that makes progress.
func listAll[T any](ctx context.Context, c *Client, resource string, fn func(*T) error) (string, error) {
	passed := 0
	count := func(v *T) error { passed++; return fn(v) }
	page, err := listPage(ctx, c.raw.Get().Resource(resource), count)
	switch {
	case err == nil:
		return page.ResourceVersion, nil
	case !retryPageByPage(err, passed):
		return "", fmt.Errorf("list %s: %w", resource, err)
	}
	rv, perr := listPaged(ctx, c, resource, listPageSize, fn)
	if perr != nil {
		return "", fmt.Errorf("list %s page by page (the whole list timed out: %v): %w", resource, err, perr)
	}
	return rv, nil
}

// retryPageByPage reports whether a failed unpaginated list may be read again page by page:
// the API server ran out of time building it (a 504 Timeout or a ServerTimeout), and no item
// reached the caller yet (a retry would pass those items twice).
func retryPageByPage(err error, passed int) bool {
	return passed == 0 && (apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err))
}

// listPaged lists resource pageSize items per request (limit and continue), passing each item
// to fn, and returns the list's resourceVersion.
func listPaged[T any](ctx context.Context, c *Client, resource string, pageSize int, fn func(*T) error) (string, error) {
	return readPages(func(cont string) (listMeta, error) {
		req := c.raw.Get().Resource(resource).Param("limit", strconv.Itoa(pageSize))
		if cont != "" {
			req = req.Param("continue", cont)
		}
		return listPage(ctx, req, fn)
	})
}

// readPages calls readPage with each continue token ("" first) until a page has none, and
// returns the list's resourceVersion.
func readPages(readPage func(cont string) (listMeta, error)) (string, error) {
	for cont := ""; ; {
		page, err := readPage(cont)
		if err != nil {
			return "", err
		}
		if page.Continue == "" {
			return page.ResourceVersion, nil
		}
		cont = page.Continue
	}
}

// listPage sends req (a list) and decodes its body with decodeListStream.
func listPage[T any](ctx context.Context, req *rest.Request, fn func(*T) error) (listMeta, error) {
	body, err := req.Stream(ctx)
	if err != nil {
		return listMeta{}, err
	}
	defer body.Close()
	return decodeListStream(body, fn)
}

// listMeta is the part of a list's metadata listAll reads.
type listMeta struct {
	ResourceVersion string `json:"resourceVersion"`
	// Continue is the token of the next page of a paginated list; empty on the last.
	Continue string `json:"continue"`
}

// decodeListStream decodes a JSON list ({"metadata":{...},"items":[...]}) from r item by item,
// calling fn with each, and returns the list's metadata.
func decodeListStream[T any](r io.Reader, fn func(*T) error) (listMeta, error) {
	var meta listMeta
	dec := json.NewDecoder(r)
	if err := expectDelim(dec, '{'); err != nil {
		return meta, err
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return meta, fmt.Errorf("decode list: %w", err)
		}
		switch tok {
		case "metadata":
			if err := dec.Decode(&meta); err != nil {
				return meta, fmt.Errorf("decode list metadata: %w", err)
			}
		case "items":
			if err := expectDelim(dec, '['); err != nil {
				return meta, err
			}
			for dec.More() {
				var v T
				if err := dec.Decode(&v); err != nil {
					return meta, fmt.Errorf("decode list item: %w", err)
				}
				if err := fn(&v); err != nil {
					return meta, err
				}
			}
			if err := expectDelim(dec, ']'); err != nil {
				return meta, err
			}
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return meta, fmt.Errorf("decode list: %w", err)
			}
		}
	}
	return meta, expectDelim(dec, '}')
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("decode list: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return fmt.Errorf("decode list: got %v, want %v", tok, want)
	}
	return nil
}

// getRaw reads one Calico object by name and decodes it into T.
func getRaw[T any](ctx context.Context, c *Client, resource, name string) (*T, error) {
	body, err := c.raw.Get().Resource(resource).Name(name).DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	var v T
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, fmt.Errorf("decode %s %s: %w", resource, name, err)
	}
	return &v, nil
}

func isNotFound(err error) bool { return err != nil && apierrors.IsNotFound(err) }
func isConflict(err error) bool { return err != nil && apierrors.IsConflict(err) }

// mayHaveArrived reports whether a write that failed with err may still have been applied:
// its answer never came (the connection broke, the API server stopped), as opposed to an
// answer of the API server (a status) or a connection that was never made (a dial error,
// such as connection refused).
func mayHaveArrived(err error) bool {
	var status apierrors.APIStatus
	var op *net.OpError
	return !errors.As(err, &status) && !(errors.As(err, &op) && op.Op == "dial")
}

func notFoundError(resource, name string) error {
	return apierrors.NewNotFound(schema.GroupResource{Resource: resource}, name)
}
