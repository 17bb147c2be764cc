package calico

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"
)

// liveUse is a fresh view of what uses addresses, read right before a write: the pods of a few
// nodes, those nodes' tunnel addresses and, when asked, LoadBalancer ingress addresses.
type liveUse struct {
	owners map[netip.Addr]string
	pods   map[string]PodUse // "ns/name" -> pod, for the nodes read
}

// useQuery says what to read for a liveUse.
type useQuery struct {
	podNodes  []string     // list the pods bound to these nodes
	tunnels   []string     // read these nodes' tunnel annotations
	byAddress []netip.Addr // list pods with status.podIP equal to these (no node known)
	services  bool         // read LoadBalancer services
}

func (q *useQuery) addNode(n string, tunnel bool) {
	if n == "" {
		return
	}
	if !slices.Contains(q.podNodes, n) {
		q.podNodes = append(q.podNodes, n)
	}
	if tunnel && !slices.Contains(q.tunnels, n) {
		q.tunnels = append(q.tunnels, n)
	}
}

// addAllocation adds what must be read to verify allocation a of a block affine to affine.
func (q *useQuery) addAllocation(a *Allocation, affine string) {
	tunnel := strings.HasSuffix(a.Type, "TunnelAddress") || (a.Pod == "" && a.Type == "")
	q.addNode(a.Node, tunnel)
	if affine != a.Node {
		q.addNode(affine, tunnel)
	}
	if a.Node == "" && affine == "" {
		if ip, ok := parseIP(a.IP); ok {
			q.byAddress = append(q.byAddress, ip)
		}
	}
	if a.Type == "" && a.Pod == "" || strings.Contains(strings.ToLower(a.Type), "loadbalancer") {
		q.services = true
	}
}

// readUse performs q with fresh (quorum) reads.
func (c *Client) readUse(ctx context.Context, q *useQuery) (*liveUse, error) {
	u := &liveUse{owners: map[netip.Addr]string{}, pods: map[string]PodUse{}}
	var mu sync.Mutex
	addPod := func(p PodUse) {
		mu.Lock()
		defer mu.Unlock()
		u.pods[p.Namespace+"/"+p.Name] = p
		for _, ip := range p.IPs {
			u.owners[ip] = p.owner()
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, n := range q.podNodes {
		g.Go(func() error { return c.scanPods(gctx, "spec.nodeName="+n, addPod) })
	}
	for _, ip := range q.byAddress {
		g.Go(func() error { return c.scanPods(gctx, "status.podIP="+ip.String(), addPod) })
	}
	for _, n := range q.tunnels {
		g.Go(func() error {
			nu, _, err := c.getNode(gctx, n)
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			for _, ip := range nu.ips {
				u.owners[ip] = nu.owner()
			}
			return nil
		})
	}
	if q.services {
		g.Go(func() error {
			return c.scanLoadBalancers(gctx, func(l lbUse) {
				mu.Lock()
				defer mu.Unlock()
				for _, ip := range l.ips {
					u.owners[ip] = l.owner()
				}
			})
		})
	}
	if err := g.Wait(); err != nil {
		return nil, fmt.Errorf("re-verify address users: %w", err)
	}
	return u, nil
}

// blocks returns why a must not be released given this fresh view, or "" when nothing uses it.
func (u *liveUse) blocks(a *Allocation) string {
	ip, ok := parseIP(a.IP)
	if !ok {
		return "bad address " + a.IP
	}
	if o, ok := u.owners[ip]; ok {
		return "in use by " + o
	}
	if a.Pod != "" {
		if p, ok := u.pods[a.Namespace+"/"+a.Pod]; ok && p.Pending {
			return "pod " + a.Namespace + "/" + a.Pod + " exists and has no IP yet (CNI ADD in flight)"
		}
	}
	return ""
}
