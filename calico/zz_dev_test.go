package calico

import (
	"context"
	"fmt"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
)

func init() {
	if os.Getenv("DEV_LISTS") == "" {
		return
	}
	ctx := context.Background()
	cfg, _ := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if os.Getenv("DEV_NOGZIP") != "" {
		cfg.DisableCompression = true
	}
	cl, err := NewClient(ctx, cfg)
	if err != nil {
		panic(err)
	}
	for i := 0; i < 2; i++ {
		t := time.Now()
		n := 0
		listAll(ctx, cl, resHandles, func(*handleObject) error { n++; return nil })
		fmt.Println("handles", n, time.Since(t))
		t = time.Now()
		n = 0
		listAll(ctx, cl, resBlocks, func(*blockObject) error { n++; return nil })
		fmt.Println("blocks", n, time.Since(t))
		t = time.Now()
		n = 0
		cl.scanPods(ctx, "", func(podUse) { n++ })
		fmt.Println("pods", n, time.Since(t))
		t = time.Now()
		n = 0
		cl.scanNodes(ctx, func(nodeUse) { n++ })
		fmt.Println("nodes", n, time.Since(t))
	}
	os.Exit(0)
}

func init() {
	if os.Getenv("DEV_META") == "" {
		return
	}
	ctx := context.Background()
	cfg, _ := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if os.Getenv("DEV_NOGZIP") != "" {
		cfg.DisableCompression = true
	}
	cl, err := NewClient(ctx, cfg)
	if err != nil {
		panic(err)
	}
	for i := 0; i < 3; i++ {
		t := time.Now()
		n := 0
		opts := metav1.ListOptions{Limit: 500}
		for {
			l, err := cl.meta.Resource(cl.gvr(resHandles)).List(ctx, opts)
			if err != nil {
				panic(err)
			}
			n += len(l.Items)
			if opts.Continue = l.Continue; opts.Continue == "" {
				break
			}
		}
		fmt.Println("meta handles", n, time.Since(t))
		t = time.Now()
		n = 0
		listAll(ctx, cl, resHandles, func(*handleObject) error { n++; return nil })
		fmt.Println("handles", n, time.Since(t))
		t = time.Now()
		n = 0
		cl.scanPods(ctx, "", func(podUse) { n++ })
		fmt.Println("pods", n, time.Since(t))
	}
	os.Exit(0)
}
