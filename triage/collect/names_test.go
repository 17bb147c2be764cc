package collect

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/whypending/whypending/internal/testcluster"
	"github.com/whypending/whypending/internal/testenv"
)

// TestNames lists ConfigMap and Secret names, metadata only, on a real API server (no
// controller manager runs, so there is no kube-root-ca.crt ConfigMap).
func TestNames(t *testing.T) {
	t.Parallel()
	c := testcluster.Start(t, testenv.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"db-credentials", "api-token"} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop"}, StringData: map[string]string{"k": "hunter2"}}
		if _, err := c.Client.CoreV1().Secrets("shop").Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-config", Namespace: "shop"}}
	if _, err := c.Client.CoreV1().ConfigMaps("shop").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	col := New(c.Client)
	got, created, err := col.read.names(ctx, "shop", "secrets")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"api-token", "db-credentials"}; !cmp.Equal(got, want) {
		t.Errorf("read.names(secrets) = %v, want %v", got, want)
	}
	for _, name := range got {
		if created[name].IsZero() {
			t.Errorf("read.names(secrets) gives %s no creationTimestamp", name)
		}
	}
	got, _, err = col.read.names(ctx, "shop", "configmaps")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"app-config"}; !cmp.Equal(got, want) {
		t.Errorf("read.names(configmaps) = %v, want %v", got, want)
	}
}
