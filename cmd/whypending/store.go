package main

import (
	"context"
	"fmt"

	"k8s.io/client-go/dynamic"

	"github.com/whypending/whypending/bot"
	"github.com/whypending/whypending/bot/approval"
	"github.com/whypending/whypending/fleet"
)

// crdStore is the kubernetes approval store on the store cluster: RemediationRequests through
// the cluster's current connection. While the store cluster is unavailable every call returns
// the *chat.UnavailableError naming it.
type crdStore struct {
	cluster   *fleet.Cluster
	namespace string
}

var _ approval.Store = (*crdStore)(nil)

// storeCluster is the cluster s lives on; nil without s (the memory store).
func storeCluster(s *crdStore) *fleet.Cluster {
	if s == nil {
		return nil
	}
	return s.cluster
}

// check is the store cluster's fleet.Options.Check: the store's dry-run create (see
// approval.CRDStore.Ping), run at each connection and after every probe.
func (s *crdStore) check(ctx context.Context, dyn dynamic.Interface) error {
	return approval.NewCRDStore(dyn, s.namespace).Ping(ctx)
}

func (s *crdStore) store() (*approval.CRDStore, error) {
	dyn, err := s.cluster.Dynamic()
	if err != nil {
		return nil, err
	}
	return approval.NewCRDStore(dyn, s.namespace), nil
}

// Create implements approval.Store.
func (s *crdStore) Create(ctx context.Context, a *approval.Record) error {
	st, err := s.store()
	if err != nil {
		return err
	}
	return s.cluster.Unavailable(st.Create(ctx, a))
}

// Get implements approval.Store.
func (s *crdStore) Get(ctx context.Context, id string) (*approval.Record, error) {
	st, err := s.store()
	if err != nil {
		return nil, err
	}
	a, err := st.Get(ctx, id)
	return a, s.cluster.Unavailable(err)
}

// Update implements approval.Store.
func (s *crdStore) Update(ctx context.Context, a *approval.Record) error {
	st, err := s.store()
	if err != nil {
		return err
	}
	return s.cluster.Unavailable(st.Update(ctx, a))
}

// List implements approval.Store.
func (s *crdStore) List(ctx context.Context, state approval.State) ([]*approval.Record, error) {
	st, err := s.store()
	if err != nil {
		return nil, err
	}
	out, err := st.List(ctx, state)
	return out, s.cluster.Unavailable(err)
}

// Ping is the /readyz check of the store: the result of the last dry-run create, run at
// connection and after every probe, which names a missing namespace or CRD (see
// approval.CRDStore.Ping). While the store cluster is unavailable the store is not checked (that
// cluster's own line says why) and does not make the bot unready.
func (s *crdStore) Ping(context.Context) error {
	if err := s.cluster.Health(); err != nil {
		return fmt.Errorf("%w: cluster %s is unavailable", bot.ErrNotChecked, s.cluster.Name())
	}
	return s.cluster.CheckErr()
}
